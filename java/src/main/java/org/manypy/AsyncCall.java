package org.manypy;

import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.ForkJoinPool;
import org.manypy.internal.ManypyNative;

/**
 * One asynchronous call ({@code callAsync} of {@link ReplicatedObject}, {@link ScriptModule},
 * {@link AotiModule} and {@link Batcher}): its future, the native cancel token made for it, and the
 * executor its completion goes through.
 *
 * <p>The native completion arrives on a manypy thread (an interpreter's home thread, manypy's
 * completion thread, a host worker thread), which must not run the caller's code: dependent stages
 * may make synchronous calls, or wait, and would hold up every call queued on that interpreter. So
 * the completion only reads the outcome there and hands the future's completion to the executor.
 * The glue (jni_async.cpp) frees the native outcome after {@link #completed} returns, whatever
 * happened in Java.
 */
final class AsyncCall {
  /** Completes on the common pool unless the caller gives an executor. */
  static final Executor DEFAULT_EXECUTOR = ForkJoinPool.commonPool();

  /** A C submission with native args, kwargs and options; returns its refusal status, or 0. */
  @FunctionalInterface
  interface Submit {
    long run(long args, long kwargs, long options, AsyncCall completion);
  }

  private final Executor executor;
  private final CancelToken callerToken; // the caller's options' token, linked to this call
  private final CallFuture future = new CallFuture(this);
  private long token; // this call's native cancel token; 0 once released. Guarded by this.

  private AsyncCall(Executor executor, CancelToken callerToken, long token) {
    this.executor = executor;
    this.callerToken = callerToken;
    this.token = token;
  }

  /**
   * Converts the arguments, submits the call with options of its own (those of `options` with a new
   * cancel token) and returns its future. A refused call throws here, with the exception its
   * synchronous form would throw; its completion never runs.
   */
  static CompletableFuture<Object> submit(
      List<?> args, Map<String, ?> kwargs, CallOptions options, Executor executor, Submit submit) {
    if (executor == null) {
      throw new IllegalArgumentException(
          "manypy: executor is null (without one, completions go through the common pool)");
    }
    long nativeArgs = Values.arguments(args);
    long nativeKwargs = 0;
    long nativeOptions = 0;
    AsyncCall call = null;
    boolean accepted = false;
    try {
      nativeKwargs = Values.optionalDict(kwargs);
      call =
          new AsyncCall(
              executor,
              CallOptions.tokenOf(options),
              NativeLibrary.newHandle(ManypyNative::manypy_cancel_token_new));
      nativeOptions = CallOptions.forAsyncCall(options, call.token);
      // Linked before submitting: a token already cancelled cancels the
      // call's own, and the C API refuses the call as it would refuse a
      // synchronous one.
      if (call.callerToken != null) call.callerToken.link(call);
      Status.check(submit.run(nativeArgs, nativeKwargs, nativeOptions, call));
      accepted = true;
      return call.future;
    } finally {
      if (call != null && !accepted) call.release();
      ManypyNative.manypy_call_options_free(nativeOptions);
      ManypyNative.manypy_value_free(nativeKwargs);
      ManypyNative.manypy_value_free(nativeArgs);
    }
  }

  /**
   * The call's outcome, on a manypy thread (CallbackDispatch.callDone): exactly one of `result` and
   * `status` is not 0, both borrowed. A future already cancelled gets nothing, so nothing is
   * converted.
   */
  void completed(long result, long status) {
    release();
    if (future.isDone()) return;
    Object value = null;
    Throwable error = null;
    try {
      if (status != 0) {
        error = Status.read(status);
      } else {
        value = Values.fromNative(result);
      }
    } catch (Throwable unreadable) {
      error = unreadable; // an Error (out of memory), or a result Java cannot represent
    }
    deliver(value, error);
  }

  /** What escaped {@link #completed} (CallbackDispatch.callLost): the future still completes. */
  void lost(Throwable escaped) {
    release();
    ManypyException error =
        Status.of(
            ErrorCode.INTERNAL,
            "manypy: the outcome of an asynchronous call could not be read: " + escaped,
            "",
            "");
    error.initCause(escaped);
    deliver(null, error);
  }

  /** Asks the native call to stop (Future.cancel, or the caller's token). */
  synchronized void cancelNative() {
    if (token != 0) ManypyNative.manypy_cancel_token_cancel(token);
  }

  /** Frees the call's token and unlinks it: the call completed or was refused. Idempotent. */
  private void release() {
    long mine;
    synchronized (this) {
      mine = token;
      token = 0;
    }
    if (mine == 0) return;
    ManypyNative.manypy_cancel_token_free(mine);
    if (callerToken != null) callerToken.unlink(this);
  }

  /**
   * Completes the future through the executor. One that refuses (shut down, saturated) or throws is
   * reported, and the common pool completes the future instead: a completion is never lost. One
   * that runs the task on this (manypy's) thread, a direct executor or a CallerRunsPolicy, would
   * run the caller's stages here: the common pool runs it then.
   */
  private void deliver(Object value, Throwable error) {
    Thread manypyThread = Thread.currentThread();
    Runnable complete =
        () -> {
          if (Thread.currentThread() == manypyThread) {
            ForkJoinPool.commonPool().execute(() -> complete(value, error));
          } else {
            complete(value, error);
          }
        };
    try {
      executor.execute(complete);
    } catch (Throwable refused) {
      Manypy.reportCallbackError(refused);
      try {
        ForkJoinPool.commonPool().execute(complete);
      } catch (Throwable alsoRefused) {
        complete(value, error); // the last resort: here, rather than never
      }
    }
  }

  private void complete(Object value, Throwable error) {
    if (error instanceof CancelledException && future.cancelRequested) {
      // Stopped by Future.cancel, whose own completion of the future this
      // one may have overtaken: the future is cancelled either way.
      future.cancelled();
    } else if (error != null) {
      future.completeExceptionally(error);
    } else if (!future.complete(value)) {
      Values.closeTensors(value); // cancelled meanwhile: nobody will read it
    }
  }

  /**
   * The future callAsync returns. cancel (either argument) stops the native call through its token:
   * one still queued never runs, one running is stopped (manypy.Cancelled). The future is cancelled
   * at once; the native completion that still comes is dropped.
   */
  private static final class CallFuture extends CompletableFuture<Object> {
    private final AsyncCall call;
    volatile boolean cancelRequested;

    CallFuture(AsyncCall call) {
      this.call = call;
    }

    /**
     * Stops the native call first, then cancels the future. The call's completion, which may come
     * in between, cancels it too: true whenever the future ends up cancelled.
     */
    @Override
    public boolean cancel(boolean mayInterruptIfRunning) {
      if (isDone()) return isCancelled();
      cancelRequested = true;
      call.cancelNative();
      super.cancel(mayInterruptIfRunning);
      return isCancelled();
    }

    void cancelled() {
      super.cancel(false);
    }

    /** The *Async stages without an executor run on the call's. */
    @Override
    public Executor defaultExecutor() {
      return call.executor;
    }

    /** Dependent stages are plain futures: cancelling one does not cancel the call. */
    @Override
    public <U> CompletableFuture<U> newIncompleteFuture() {
      return new CompletableFuture<>();
    }
  }
}
