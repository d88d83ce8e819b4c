package org.manypy;

import org.manypy.internal.ManypyNative;

/**
 * Per-call options: the interpreter to pin a call to, and the caller's
 * context (model id, request id) that every operator callback of the call
 * reports. Configure before sharing: once set up, one CallOptions may serve
 * any number of threads at once.
 */
public final class CallOptions extends NativeResource {
  public CallOptions() {
    super(newOptions(), ManypyNative::manypy_call_options_free, "CallOptions");
  }

  private static long newOptions() {
    NativeLibrary.ensureLoaded();
    long handle = ManypyNative.manypy_call_options_new();
    if (handle == 0) throw new OutOfMemoryError("manypy: native memory exhausted");
    return handle;
  }

  /** Pins calls to interpreter `index` of the pool, or Pool.ANY_INTERPRETER. */
  public CallOptions interpreter(int index) {
    long options = acquire();
    try {
      Status.check(ManypyNative.manypy_call_options_set_interpreter(options, index));
      return this;
    } finally {
      release();
    }
  }

  /** The context operator callbacks report for calls with these options (null is ""). */
  public CallOptions context(String modelId, String requestId) {
    long options = acquire();
    try {
      Status.check(ManypyNative.manypy_call_options_set_context(options, modelId, requestId));
      return this;
    } finally {
      release();
    }
  }
}
