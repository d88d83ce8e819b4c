package org.manypy;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.manypy.internal.ManypyNative;
import org.manypy.internal.ManypyNativeConstants;
import org.manypy.internal.Utf8;

/**
 * Java objects to and from manypy values.
 *
 * <pre>
 *   Java                               Python
 *   null                               None
 *   Boolean                            bool
 *   Long, Integer, Short, Byte         int (results: Long)
 *   Double, Float                      float (results: Double)
 *   String                             str
 *   byte[]                             bytes
 *   Tensor                             torch.Tensor (zero copy)
 *   Tuple                              tuple
 *   List                               list (results: ArrayList)
 *   Map with String keys               dict (results: LinkedHashMap, in order)
 * </pre>
 */
final class Values {
  private Values() {}

  /** A new native value for `object` (owned by the caller). */
  static long toNative(Object object) {
    if (object == null) return checkAllocated(ManypyNative.manypy_value_new_none());
    if (object instanceof Boolean b)
      return checkAllocated(ManypyNative.manypy_value_new_bool(b ? 1 : 0));
    if (object instanceof Long
        || object instanceof Integer
        || object instanceof Short
        || object instanceof Byte) {
      return checkAllocated(ManypyNative.manypy_value_new_int64(((Number) object).longValue()));
    }
    if (object instanceof Double || object instanceof Float) {
      return checkAllocated(ManypyNative.manypy_value_new_double(((Number) object).doubleValue()));
    }
    if (object instanceof String s) {
      long[] out = new long[1];
      Status.check(ManypyNative.manypy_value_new_string(Utf8.encode(s), out));
      return out[0];
    }
    if (object instanceof byte[] bytes)
      return checkAllocated(ManypyNative.manypy_value_new_bytes(bytes));
    if (object instanceof Tensor t) return t.toValue();
    if (object instanceof Tuple t) return sequence(ManypyNative.manypy_value_new_tuple(), t);
    if (object instanceof List<?> l) return sequence(ManypyNative.manypy_value_new_list(), l);
    if (object instanceof Map<?, ?> m) return dict(m);
    throw new IllegalArgumentException(
        "manypy: cannot pass a "
            + object.getClass().getName()
            + " to Python; supported: null, Boolean, Long/Integer/Short/Byte, Double/Float, String,"
            + " byte[], Tensor, Tuple, List and Map<String, ?> of these");
  }

  /** A native tuple of positional arguments (0 for none). */
  static long arguments(List<?> args) {
    return args == null || args.isEmpty()
        ? 0
        : sequence(ManypyNative.manypy_value_new_tuple(), args);
  }

  /** A native dict of `map` (keyword arguments, extra files), or 0 for null or empty. */
  static long optionalDict(Map<String, ?> map) {
    return map == null || map.isEmpty() ? 0 : dict(map);
  }

  /** A C call taking native args and kwargs (0 for none) and filling out[0] with its result. */
  @FunctionalInterface
  interface NativeCall {
    long run(long args, long kwargs, long[] out);
  }

  /**
   * Converts `args` and `kwargs`, runs `call` with them, and returns its result in Java form; the
   * native arguments and result are freed.
   */
  static Object call(List<?> args, Map<String, ?> kwargs, NativeCall call) {
    long nativeArgs = arguments(args);
    long nativeKwargs = 0;
    try {
      nativeKwargs = optionalDict(kwargs);
      long k = nativeKwargs;
      return result(out -> call.run(nativeArgs, k, out));
    } finally {
      ManypyNative.manypy_value_free(nativeKwargs);
      ManypyNative.manypy_value_free(nativeArgs);
    }
  }

  /** Runs `use` with a native dict of `map` (0 for null or empty), freed afterwards. */
  static void withDict(Map<String, ?> map, java.util.function.LongConsumer use) {
    long dict = optionalDict(map);
    try {
      use.accept(dict);
    } finally {
      ManypyNative.manypy_value_free(dict);
    }
  }

  private static long sequence(long sequence, List<?> items) {
    checkAllocated(sequence);
    try {
      for (Object item : items) {
        // append takes the item, whether or not it succeeds.
        Status.check(ManypyNative.manypy_value_append(sequence, toNative(item)));
      }
      return sequence;
    } catch (RuntimeException | Error e) {
      ManypyNative.manypy_value_free(sequence);
      throw e;
    }
  }

  private static long dict(Map<?, ?> map) {
    long dict = checkAllocated(ManypyNative.manypy_value_new_dict());
    try {
      for (Map.Entry<?, ?> entry : map.entrySet()) {
        if (!(entry.getKey() instanceof String key)) {
          throw new IllegalArgumentException(
              "manypy: dict keys must be Strings, not "
                  + (entry.getKey() == null ? "null" : entry.getKey().getClass().getName()));
        }
        Status.check(ManypyNative.manypy_value_dict_set(dict, key, toNative(entry.getValue())));
      }
      return dict;
    } catch (RuntimeException | Error e) {
      ManypyNative.manypy_value_free(dict);
      throw e;
    }
  }

  private static long checkAllocated(long value) {
    return NativeResource.allocated(value);
  }

  /** A C call that fills out[0] with a new value (or handle) the caller owns. */
  @FunctionalInterface
  interface OutCall {
    long run(long[] out);
  }

  /** Runs `call` and returns what it put in out[0]; throws its status's exception. */
  static long out(OutCall call) {
    long[] out = new long[1];
    Status.check(call.run(out));
    return out[0];
  }

  /** Runs `call` and returns its result value in Java form (the value is freed). */
  static Object result(OutCall call) {
    return takeResult(out(call));
  }

  /** The Java form of a native value (borrowed: still the caller's to free). */
  static Object fromNative(long value) {
    int kind = ManypyNative.manypy_value_get_kind(value);
    switch (kind) {
      case ManypyNativeConstants.MANYPY_VALUE_NONE:
        return null;
      case ManypyNativeConstants.MANYPY_VALUE_BOOL:
        {
          int[] out = new int[1];
          Status.check(ManypyNative.manypy_value_get_bool(value, out));
          return out[0] != 0;
        }
      case ManypyNativeConstants.MANYPY_VALUE_INT64:
        {
          long[] out = new long[1];
          Status.check(ManypyNative.manypy_value_get_int64(value, out));
          return out[0];
        }
      case ManypyNativeConstants.MANYPY_VALUE_DOUBLE:
        {
          double[] out = new double[1];
          Status.check(ManypyNative.manypy_value_get_double(value, out));
          return out[0];
        }
      case ManypyNativeConstants.MANYPY_VALUE_STRING:
        return Utf8.decode(ManypyNative.manypy_jni_value_string(value));
      case ManypyNativeConstants.MANYPY_VALUE_BYTES:
        return ManypyNative.manypy_jni_value_bytes(value);
      case ManypyNativeConstants.MANYPY_VALUE_TENSOR:
        return Tensor.fromValue(value);
      case ManypyNativeConstants.MANYPY_VALUE_LIST:
        return new ArrayList<>(items(value));
      case ManypyNativeConstants.MANYPY_VALUE_TUPLE:
        return Tuple.copyOf(items(value));
      case ManypyNativeConstants.MANYPY_VALUE_DICT:
        {
          int n = length(value);
          Map<String, Object> map = new LinkedHashMap<>();
          for (int i = 0; i < n; ++i) {
            String key = Utf8.decode(ManypyNative.manypy_jni_value_dict_key(value, i));
            map.put(key, fromNative(item(value, i)));
          }
          return map;
        }
      default:
        throw Status.of(
            ErrorCode.UNSUPPORTED_TYPE,
            "manypy: a value of kind " + kind + " is newer than this binding",
            "",
            "");
    }
  }

  /** Converts a result value to Java and frees it. */
  static Object takeResult(long value) {
    try {
      return fromNative(value);
    } finally {
      ManypyNative.manypy_value_free(value);
    }
  }

  /** Closes the Tensors of a converted result nobody will read (nested in lists and maps). */
  static void closeTensors(Object value) {
    if (value instanceof Tensor t) {
      t.close();
    } else if (value instanceof List<?> list) {
      for (Object item : list) closeTensors(item);
    } else if (value instanceof Map<?, ?> map) {
      for (Object item : map.values()) closeTensors(item);
    }
  }

  private static List<Object> items(long value) {
    int n = length(value);
    List<Object> list = new ArrayList<>(n);
    for (int i = 0; i < n; ++i) list.add(fromNative(item(value, i)));
    return list;
  }

  private static int length(long value) {
    long[] out = new long[1];
    Status.check(ManypyNative.manypy_value_length(value, out));
    return Math.toIntExact(out[0]);
  }

  private static long item(long value, int index) {
    long[] out = new long[1];
    Status.check(ManypyNative.manypy_value_get_item(value, index, out));
    return out[0];
  }
}
