package org.manypy;

import org.manypy.internal.ManypyNativeConstants;

/** The stable codes of manypy_code (capi/include/manypy.h). */
public enum ErrorCode {
  OK(ManypyNativeConstants.MANYPY_OK),
  INVALID_ARGUMENT(ManypyNativeConstants.MANYPY_ERR_INVALID_ARGUMENT),
  OUT_OF_RANGE(ManypyNativeConstants.MANYPY_ERR_OUT_OF_RANGE),
  PYTHON(ManypyNativeConstants.MANYPY_ERR_PYTHON),
  SYNTAX(ManypyNativeConstants.MANYPY_ERR_SYNTAX),
  UNSUPPORTED_TYPE(ManypyNativeConstants.MANYPY_ERR_UNSUPPORTED_TYPE),
  WRONG_KIND(ManypyNativeConstants.MANYPY_ERR_WRONG_KIND),
  STATIC_TLS(ManypyNativeConstants.MANYPY_ERR_STATIC_TLS),
  RESOURCE_EXHAUSTED(ManypyNativeConstants.MANYPY_ERR_RESOURCE_EXHAUSTED),
  LOADER(ManypyNativeConstants.MANYPY_ERR_LOADER),
  INTERPRETER_BROKEN(ManypyNativeConstants.MANYPY_ERR_INTERPRETER_BROKEN),
  INTERNAL(ManypyNativeConstants.MANYPY_ERR_INTERNAL),
  NOT_FOUND(ManypyNativeConstants.MANYPY_ERR_NOT_FOUND),
  BAD_ARCHIVE(ManypyNativeConstants.MANYPY_ERR_BAD_ARCHIVE),
  NOT_A_PACKAGE(ManypyNativeConstants.MANYPY_ERR_NOT_A_PACKAGE),
  UNSUPPORTED_VERSION(ManypyNativeConstants.MANYPY_ERR_UNSUPPORTED_VERSION),
  MODULE_NOT_FOUND(ManypyNativeConstants.MANYPY_ERR_MODULE_NOT_FOUND),
  BAD_TENSOR(ManypyNativeConstants.MANYPY_ERR_BAD_TENSOR),
  NO_SUCH_NAME(ManypyNativeConstants.MANYPY_ERR_NO_SUCH_NAME),
  DEADLINE_EXCEEDED(ManypyNativeConstants.MANYPY_ERR_DEADLINE_EXCEEDED),
  CANCELLED(ManypyNativeConstants.MANYPY_ERR_CANCELLED),
  UNTRUSTED_ARCHIVE(ManypyNativeConstants.MANYPY_ERR_UNTRUSTED_ARCHIVE),
  OVERLOADED(ManypyNativeConstants.MANYPY_ERR_OVERLOADED),
  DRAINING(ManypyNativeConstants.MANYPY_ERR_DRAINING),
  /** A code newer than this binding. */
  UNKNOWN(-1);

  private final int value;

  ErrorCode(int value) {
    this.value = value;
  }

  /** The C value. */
  public int value() {
    return value;
  }

  /** The constant for a C value; UNKNOWN for values this binding does not know. */
  public static ErrorCode of(int value) {
    for (ErrorCode code : values()) {
      if (code.value == value) return code;
    }
    return UNKNOWN;
  }
}
