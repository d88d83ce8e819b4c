package org.manypy;

/**
 * A NULL or closed handle, an empty string, or a bad option value. (MANYPY_ERR_INVALID_ARGUMENT)
 */
public class InvalidArgumentException extends ManypyException {
  private static final long serialVersionUID = 1L;

  InvalidArgumentException(
      ErrorCode code, String message, String pythonType, String pythonTraceback) {
    super(code, message, pythonType, pythonTraceback);
  }
}
