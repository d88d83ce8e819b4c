package org.manypy;

import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.manypy.internal.ManypyNative;

/**
 * An object (a model) loaded once from a package and replicated lazily into
 * each interpreter that serves a call on it; its weights are the archive's
 * memory, held once. Calls run under torch.no_grad(). Keeps its package and
 * pool alive. Thread safe: any number of threads may call it at once, and
 * the pool spreads them over its interpreters.
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
   * The general call: `method` null calls the object; `args` positional and
   * `kwargs` keyword arguments (either may be null); `options` may be null.
   * NoSuchNameException for a missing method, PythonException (with the
   * traceback) for an exception raised by the model, DeadlineExceededException
   * or CancelledException when the options' timeout, deadline or cancel token
   * stopped it.
   */
  public Object call(String method, List<?> args, Map<String, ?> kwargs, CallOptions options) {
    return with(object -> CallOptions.with(options, o -> Values.call(args, kwargs,
        (a, k, out) -> ManypyNative.manypy_object_call(object, method, a, k, o, out))));
  }

  /** The attribute `name`, converted to Java. */
  public Object getAttr(String name) {
    return getAttr(name, null);
  }

  /**
   * The attribute `name`, converted to Java, with `options` (may be null): a
   * property runs Python code, which their timeout, deadline or cancel token
   * can stop.
   */
  public Object getAttr(String name, CallOptions options) {
    return with(object -> CallOptions.with(options, o -> Values.result(
        out -> ManypyNative.manypy_object_getattr(object, name, o, out))));
  }

  public boolean hasAttr(String name) {
    int[] out = new int[1];
    check(object -> ManypyNative.manypy_object_hasattr(object, name, out));
    return out[0] != 0;
  }

  /**
   * The underlying manypy_object* for C code in the same process (for
   * example a native component of the service). Valid while this object is
   * open; the C side must not free it.
   */
  public long nativeHandle() {
    return with(object -> object);
  }
}
