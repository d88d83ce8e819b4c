package org.manypy;

import java.time.Duration;
import java.util.function.LongFunction;
import org.manypy.internal.ManypyNative;

/**
 * Per-call options: the interpreter to pin a call to, a timeout or deadline, a {@link CancelToken},
 * and the caller's context (model id, request id) that every operator callback of the call reports.
 * They apply to {@link ReplicatedObject#call(String, java.util.List, java.util.Map, CallOptions)},
 * {@link ReplicatedObject#getAttr(String, CallOptions)}, {@link ScriptModule#call(String,
 * java.util.List, java.util.Map, CallOptions)}, {@link AotiModule#call(java.util.List,
 * java.util.Map, CallOptions)}, {@link Pool#exec(String, CallOptions)} and {@link Pool#eval(String,
 * CallOptions)}, to the callAsync forms of the calls (a timeout then runs from submission), and to
 * {@link Batcher} requests. Configure before sharing: once set up, one CallOptions may serve any
 * number of threads at once.
 *
 * <p>A call that outlives its timeout or deadline throws {@link DeadlineExceededException}; one
 * whose token is cancelled throws {@link CancelledException}. Python code that is running is
 * stopped by an exception raised once, at its next line of model code, so that its clean-up runs;
 * TorchScript stops before its next operator; an AOTInductor package is checked before its compiled
 * model starts and when it returns (a late result is dropped); and a call still waiting for its
 * interpreter gives up. What cannot be stopped finishes first: a torch operator already running, a
 * blocking system call (time.sleep, I/O). A model that lets the stop end it leaves its interpreter
 * serving as before. One that has not returned the pool's stop grace later ({@link
 * PoolOptions#stopGrace(Duration)}, 100 ms) is ended by force, and its interpreter is retired
 * ({@link Pool#checkInterpreter(int)}). See docs/java.md.
 */
public final class CallOptions extends NativeResource {
  // What the setters gave the native options, kept here too: an
  // asynchronous call needs native options of its own (its own cancel
  // token, for Future.cancel), and the C API has no copy of options. Set
  // before sharing, as the native ones.
  private int interpreter = Pool.ANY_INTERPRETER;
  private long timeoutNanos; // 0: none
  private long deadlineNanos; // 0: none; at most one of the two is set
  private CancelToken token;
  private String modelId;
  private String requestId;

  public CallOptions() {
    super(
        NativeLibrary.newHandle(ManypyNative::manypy_call_options_new),
        ManypyNative::manypy_call_options_free,
        "CallOptions");
  }

  /**
   * Runs `body` with the native handle of `options`, held for its duration, or with 0 (the C API's
   * defaults) when `options` is null.
   */
  static <T> T with(CallOptions options, LongFunction<T> body) {
    return options == null ? body.apply(0) : options.with(body);
  }

  /** Pins calls to interpreter `index` of the pool, or Pool.ANY_INTERPRETER. */
  public CallOptions interpreter(int index) {
    check(options -> ManypyNative.manypy_call_options_set_interpreter(options, index));
    interpreter = index;
    return this;
  }

  /**
   * Bounds each call made with these options to `timeout` from its start, waiting for an
   * interpreter included. {@link Duration#ZERO} removes the timeout; a negative one throws {@link
   * OutOfRangeException}; one too long for 64-bit nanoseconds (about 292 years) is as good as none.
   * Replaces a deadline set with {@link #deadlineNanos(long)}.
   */
  public CallOptions timeout(Duration timeout) {
    if (timeout == null) {
      throw new IllegalArgumentException("manypy: timeout is null (Duration.ZERO removes it)");
    }
    long nanos = saturatedNanos(timeout);
    check(options -> ManypyNative.manypy_call_options_set_timeout(options, nanos));
    timeoutNanos = nanos;
    deadlineNanos = 0;
    return this;
  }

  /**
   * Bounds calls made with these options by an absolute deadline, in nanoseconds on the clock of
   * {@link Manypy#monotonicNanos()} (CLOCK_MONOTONIC), e.g. {@code Manypy.monotonicNanos() +
   * budget}: one deadline for a request that makes several calls. 0 removes it; negative throws
   * {@link OutOfRangeException}; a deadline already past fails calls at once with {@link
   * DeadlineExceededException}. Replaces a {@link #timeout(Duration)}.
   */
  public CallOptions deadlineNanos(long monotonicNanos) {
    check(options -> ManypyNative.manypy_call_options_set_deadline(options, monotonicNanos));
    deadlineNanos = monotonicNanos;
    timeoutNanos = 0;
    return this;
  }

  /**
   * Calls made with these options stop with {@link CancelledException} once `token` is cancelled;
   * null removes the token. The options keep the native token alive, so `token` may be closed
   * before them.
   */
  public CallOptions cancelToken(CancelToken token) {
    check(
        options ->
            token == null
                ? ManypyNative.manypy_call_options_set_cancel_token(options, 0)
                : token.with(t -> ManypyNative.manypy_call_options_set_cancel_token(options, t)));
    this.token = token;
    return this;
  }

  /** The context operator callbacks report for calls with these options (null is ""). */
  public CallOptions context(String modelId, String requestId) {
    check(options -> ManypyNative.manypy_call_options_set_context(options, modelId, requestId));
    this.modelId = modelId;
    this.requestId = requestId;
    return this;
  }

  /** The cancel token of `options` (null: none, or no options). */
  static CancelToken tokenOf(CallOptions options) {
    return options == null ? null : options.token;
  }

  /**
   * New native options (the caller's to free) for one asynchronous call: the settings of `options`
   * (null: the defaults), with `callToken`, the call's own native cancel token, in place of theirs
   * (which reaches the call through {@link CancelToken#link}). Throws IllegalStateException if
   * `options` is closed, as a synchronous call would.
   */
  static long forAsyncCall(CallOptions options, long callToken) {
    long made = allocated(ManypyNative.manypy_call_options_new());
    try {
      if (options != null) options.with(open -> options.copyTo(made));
      Status.check(ManypyNative.manypy_call_options_set_cancel_token(made, callToken));
      return made;
    } catch (RuntimeException | Error e) {
      ManypyNative.manypy_call_options_free(made);
      throw e;
    }
  }

  private Void copyTo(long native_) {
    if (interpreter != Pool.ANY_INTERPRETER) {
      Status.check(ManypyNative.manypy_call_options_set_interpreter(native_, interpreter));
    }
    if (timeoutNanos != 0) {
      Status.check(ManypyNative.manypy_call_options_set_timeout(native_, timeoutNanos));
    } else if (deadlineNanos != 0) {
      Status.check(ManypyNative.manypy_call_options_set_deadline(native_, deadlineNanos));
    }
    if (modelId != null || requestId != null) {
      Status.check(ManypyNative.manypy_call_options_set_context(native_, modelId, requestId));
    }
    return null;
  }

  /** A duration in nanoseconds, clamped to the range of a long instead of overflowing. */
  static long saturatedNanos(Duration duration) {
    try {
      return duration.toNanos();
    } catch (ArithmeticException tooLong) {
      return duration.isNegative() ? Long.MIN_VALUE : Long.MAX_VALUE;
    }
  }
}
