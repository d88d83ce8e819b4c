package org.manypy;

import org.manypy.internal.ManypyNativeConstants;

/**
 * Element types a tensor can cross DLPack with (CPU, one lane). {@link #BOOL} is one byte per
 * element holding 0 or 1 (DLPack's kDLBool, code 6, which the DLPack 0.6 of torch 1.13 has no name
 * for; manypy carries it across).
 */
public enum DType {
  FLOAT16(Code.FLOAT, 16),
  BFLOAT16(Code.BFLOAT, 16),
  FLOAT32(Code.FLOAT, 32),
  FLOAT64(Code.FLOAT, 64),
  INT8(Code.INT, 8),
  INT16(Code.INT, 16),
  INT32(Code.INT, 32),
  INT64(Code.INT, 64),
  UINT8(Code.UINT, 8),
  COMPLEX64(Code.COMPLEX, 64),
  COMPLEX128(Code.COMPLEX, 128),
  BOOL(Code.BOOL, 8);

  /** DLPack's DLDataTypeCode values (dlpack.h). */
  static final class Code {
    static final int INT = 0;
    static final int UINT = 1;
    static final int FLOAT = 2;
    static final int BFLOAT = 4;
    static final int COMPLEX = 5;
    static final int BOOL = ManypyNativeConstants.MANYPY_DL_BOOL; // kDLBool, 6

    private Code() {}
  }

  final int code;
  final int bits;

  DType(int code, int bits) {
    this.code = code;
    this.bits = bits;
  }

  /** Bytes per element. */
  public int byteSize() {
    return bits / 8;
  }

  /** The constant for a DLPack code and bit width, or null if there is none. */
  static DType of(long code, long bits) {
    for (DType t : values()) {
      if (t.code == code && t.bits == bits) return t;
    }
    return null;
  }
}
