package org.manypy;

import java.util.ArrayList;
import java.util.List;

/**
 * One input of a sampled operator: never its data.
 *
 * @param kind what it is
 * @param dtype for tensors, the element type (bool tensors: {@link DType#BOOL}); else null
 * @param shape for tensors, the sizes; else empty
 */
public record OpInput(Kind kind, DType dtype, long[] shape) {
  public enum Kind {
    NONE,
    BOOL,
    INT64,
    DOUBLE,
    TENSOR,
    OTHER
  }

  /** Decodes {kind, code, bits, lanes, ndim, shape...} per input (jni_callbacks.cpp). */
  static List<OpInput> decode(long[] encoded) {
    List<OpInput> inputs = new ArrayList<>();
    if (encoded == null) return inputs;
    for (int i = 0; i < encoded.length; ) {
      Kind kind = kindOf(encoded[i]);
      DType dtype = kind == Kind.TENSOR ? DType.of(encoded[i + 1], encoded[i + 2]) : null;
      int ndim = (int) encoded[i + 4];
      long[] shape = java.util.Arrays.copyOfRange(encoded, i + 5, i + 5 + ndim);
      inputs.add(new OpInput(kind, dtype, shape));
      i += 5 + ndim;
    }
    return inputs;
  }

  private static Kind kindOf(long kind) {
    return switch ((int) kind) {
      case 0 -> Kind.NONE;
      case 1 -> Kind.BOOL;
      case 2 -> Kind.INT64;
      case 3 -> Kind.DOUBLE;
      case 5 -> Kind.TENSOR;
      default -> Kind.OTHER;
    };
  }
}
