package org.manypy;

/**
 * An index or count outside its allowed range (interpreter index, pool size).
 * (MANYPY_ERR_OUT_OF_RANGE)
 */
public class OutOfRangeException extends ManypyException {
  private static final long serialVersionUID = 1L;

  OutOfRangeException(ErrorCode code, String message, String pythonType, String pythonTraceback) {
    super(code, message, pythonType, pythonTraceback);
  }
}
