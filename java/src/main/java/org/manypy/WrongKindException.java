package org.manypy;

/** A value was read as a kind it is not. (MANYPY_ERR_WRONG_KIND) */
public class WrongKindException extends ManypyException {
  private static final long serialVersionUID = 1L;

  WrongKindException(ErrorCode code, String message, String pythonType, String pythonTraceback) {
    super(code, message, pythonType, pythonTraceback);
  }
}
