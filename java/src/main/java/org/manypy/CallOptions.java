package org.manypy;

import java.time.Duration;
import java.util.function.LongFunction;
import org.manypy.internal.ManypyNative;

/**
 * Per-call options: the interpreter to pin a call to, a timeout or deadline,
 * a {@link CancelToken}, and the caller's context (model id, request id) that
 * every operator callback of the call reports. They apply to {@link
 * ReplicatedObject#call(String, java.util.List, java.util.Map, CallOptions)},
 * {@link ReplicatedObject#getAttr(String, CallOptions)}, {@link
 * ScriptModule#call(String, java.util.List, java.util.Map, CallOptions)},
 * {@link Pool#exec(String, CallOptions)} and {@link Pool#eval(String,
 * CallOptions)}.
 * Configure before sharing: once set up, one CallOptions may serve any number
 * of threads at once.
 *
 * <p>A call that outlives its timeout or deadline throws {@link
 * DeadlineExceededException}; one whose token is cancelled throws {@link
 * CancelledException}. Python code that is running is stopped by an
 * exception raised once, at its next line of model code, so that its
 * clean-up runs; TorchScript stops before its next operator; and a call
 * still waiting for its interpreter gives up. What
 * cannot be stopped finishes first: a torch operator already running, a
 * blocking system call (time.sleep, I/O). A model that lets the stop end it
 * leaves its interpreter serving as before. One that has not returned the
 * pool's stop grace later ({@link PoolOptions#stopGrace(Duration)}, 100 ms)
 * is ended by force, and its interpreter is retired ({@link
 * Pool#checkInterpreter(int)}). See docs/java.md.
 */
public final class CallOptions extends NativeResource {
  public CallOptions() {
    super(NativeLibrary.newHandle(ManypyNative::manypy_call_options_new),
        ManypyNative::manypy_call_options_free, "CallOptions");
  }

  /**
   * Runs `body` with the native handle of `options`, held for its duration,
   * or with 0 (the C API's defaults) when `options` is null.
   */
  static <T> T with(CallOptions options, LongFunction<T> body) {
    return options == null ? body.apply(0) : options.with(body);
  }

  /** Pins calls to interpreter `index` of the pool, or Pool.ANY_INTERPRETER. */
  public CallOptions interpreter(int index) {
    check(options -> ManypyNative.manypy_call_options_set_interpreter(options, index));
    return this;
  }

  /**
   * Bounds each call made with these options to `timeout` from its start,
   * waiting for an interpreter included. {@link Duration#ZERO} removes the
   * timeout; a negative one throws {@link OutOfRangeException}; one too long
   * for 64-bit nanoseconds (about 292 years) is as good as none. Replaces a
   * deadline set with {@link #deadlineNanos(long)}.
   */
  public CallOptions timeout(Duration timeout) {
    if (timeout == null) {
      throw new IllegalArgumentException("manypy: timeout is null (Duration.ZERO removes it)");
    }
    long nanos = saturatedNanos(timeout);
    check(options -> ManypyNative.manypy_call_options_set_timeout(options, nanos));
    return this;
  }

  /**
   * Bounds calls made with these options by an absolute deadline, in
   * nanoseconds on the clock of {@link Manypy#monotonicNanos()}
   * (CLOCK_MONOTONIC), e.g. {@code Manypy.monotonicNanos() + budget}: one
   * deadline for a request that makes several calls. 0 removes it; negative
   * throws {@link OutOfRangeException}; a deadline already past fails calls at
   * once with {@link DeadlineExceededException}. Replaces a {@link
   * #timeout(Duration)}.
   */
  public CallOptions deadlineNanos(long monotonicNanos) {
    check(options -> ManypyNative.manypy_call_options_set_deadline(options, monotonicNanos));
    return this;
  }

  /**
   * Calls made with these options stop with {@link CancelledException} once
   * `token` is cancelled; null removes the token. The options keep the native
   * token alive, so `token` may be closed before them.
   */
  public CallOptions cancelToken(CancelToken token) {
    check(options -> token == null
        ? ManypyNative.manypy_call_options_set_cancel_token(options, 0)
        : token.with(t -> ManypyNative.manypy_call_options_set_cancel_token(options, t)));
    return this;
  }

  /** The context operator callbacks report for calls with these options (null is ""). */
  public CallOptions context(String modelId, String requestId) {
    check(options -> ManypyNative.manypy_call_options_set_context(options, modelId, requestId));
    return this;
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
