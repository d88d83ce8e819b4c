package org.manypy;

import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import org.manypy.internal.ManypyNative;

/**
 * An object (a model) loaded once from a package and replicated lazily into each interpreter that
 * serves a call on it; its weights are the archive's memory, held once. Calls run under
 * torch.no_grad(). Keeps its package and pool alive. Thread safe: any number of threads may call it
 * at once, and the pool spreads them over its interpreters.
 */
public final class ReplicatedObject extends NativeResource {
  ReplicatedObject(long handle) {
    super(handle, ManypyNative::manypy_object_free, "ReplicatedObject");
  }

  /** Calls the object itself (for an nn.Module, forward through __call__). */
  public Object call(Object... args) {
    return call(null, Arrays.asList(args), null, null);
  }

  /** Calls the named method. */
  public Object callMethod(String method, Object... args) {
    return call(method, Arrays.asList(args), null, null);
  }

  /**
   * The general call: `method` null calls the object; `args` positional and `kwargs` keyword
   * arguments (either may be null); `options` may be null. NoSuchNameException for a missing
   * method, PythonException (with the traceback) for an exception raised by the model,
   * DeadlineExceededException or CancelledException when the options' timeout, deadline or cancel
   * token stopped it.
   */
  public Object call(String method, List<?> args, Map<String, ?> kwargs, CallOptions options) {
    return with(
        object ->
            CallOptions.with(
                options,
                o ->
                    Values.call(
                        args,
                        kwargs,
                        (a, k, out) ->
                            ManypyNative.manypy_object_call(object, method, a, k, o, out))));
  }

  /**
   * {@link #call(Object...)}, asynchronously: see {@link #callAsync(String, List, Map, CallOptions,
   * Executor)}.
   */
  public CompletableFuture<Object> callAsync(Object... args) {
    return callAsync(null, Arrays.asList(args), null, null);
  }

  /** {@link #callMethod(String, Object...)}, asynchronously. */
  public CompletableFuture<Object> callMethodAsync(String method, Object... args) {
    return callAsync(method, Arrays.asList(args), null, null);
  }

  /** The general call, asynchronously, completing on {@code ForkJoinPool.commonPool()}. */
  public CompletableFuture<Object> callAsync(
      String method, List<?> args, Map<String, ?> kwargs, CallOptions options) {
    return callAsync(method, args, kwargs, options, AsyncCall.DEFAULT_EXECUTOR);
  }

  /**
   * Submits the general call ({@link #call(String, List, Map, CallOptions)}) and returns at once.
   * The call runs on its interpreter's own thread, in either thread mode, and its future completes
   * with what the synchronous call would return, or fails with what it would throw.
   *
   * <ul>
   *   <li>The future is completed through `executor`, never on manypy's threads, so dependent
   *       stages ({@code thenApply}, {@code thenAccept}, ...) run there and may make synchronous
   *       calls. An executor that refuses the task is reported ({@link
   *       Manypy#setCallbackErrorHandler}) and the common pool completes the future.
   *   <li>{@code future.cancel(true)} or {@code cancel(false)} stops the call: a queued one never
   *       runs, a running one is stopped with manypy.Cancelled, as a cancel token stops it. The
   *       future is cancelled at once. The options' token, if any, stops the call too; the future
   *       then fails with {@link CancelledException}.
   *   <li>The options' timeout runs from submission; a call whose deadline passes while it waits
   *       for an interpreter fails with {@link DeadlineExceededException} without running.
   *   <li>Refused submissions throw here, as the synchronous call would: {@link
   *       IllegalStateException} for a closed object or options, {@link IllegalArgumentException}
   *       for arguments Java cannot pass, {@link OverloadedException} when the pool's queue limit
   *       is reached, {@link DeadlineExceededException} or {@link CancelledException} for a
   *       deadline already past or a token already cancelled, and the C API's other refusals.
   * </ul>
   *
   * Closing the object, its package or its pool after submitting is safe: the call holds them and
   * completes.
   */
  public CompletableFuture<Object> callAsync(
      String method, List<?> args, Map<String, ?> kwargs, CallOptions options, Executor executor) {
    return with(
        object ->
            AsyncCall.submit(
                args,
                kwargs,
                options,
                executor,
                (a, k, o, done) ->
                    ManypyNative.manypy_jni_object_call_async(object, method, a, k, o, done)));
  }

  /**
   * A batcher over `method` (null: the object itself), which stacks concurrent requests into one
   * call; `options` null gives the defaults. See {@link Batcher}.
   */
  public Batcher batcher(String method, BatcherOptions options) {
    return with(object -> Batcher.create(object, method, options));
  }

  /** The attribute `name`, converted to Java. */
  public Object getAttr(String name) {
    return getAttr(name, null);
  }

  /**
   * The attribute `name`, converted to Java, with `options` (may be null): a property runs Python
   * code, which their timeout, deadline or cancel token can stop.
   */
  public Object getAttr(String name, CallOptions options) {
    return with(
        object ->
            CallOptions.with(
                options,
                o ->
                    Values.result(
                        out -> ManypyNative.manypy_object_getattr(object, name, o, out))));
  }

  public boolean hasAttr(String name) {
    int[] out = new int[1];
    check(object -> ManypyNative.manypy_object_hasattr(object, name, out));
    return out[0] != 0;
  }

  /**
   * The underlying manypy_object* for C code in the same process (for example a native component of
   * the service). Valid while this object is open; the C side must not free it.
   */
  public long nativeHandle() {
    return with(object -> object);
  }
}
