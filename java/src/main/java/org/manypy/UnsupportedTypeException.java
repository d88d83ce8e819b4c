package org.manypy;

/** A Python result has a type manypy cannot represent. (MANYPY_ERR_UNSUPPORTED_TYPE) */
public class UnsupportedTypeException extends ManypyException {
  private static final long serialVersionUID = 1L;

  UnsupportedTypeException(
      ErrorCode code, String message, String pythonType, String pythonTraceback) {
    super(code, message, pythonType, pythonTraceback);
  }
}
