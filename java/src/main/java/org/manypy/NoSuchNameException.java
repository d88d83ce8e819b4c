package org.manypy;

/** A name (attribute, method, record, dict key) that does not exist. (MANYPY_ERR_NO_SUCH_NAME) */
public class NoSuchNameException extends ManypyException {
  private static final long serialVersionUID = 1L;

  NoSuchNameException(ErrorCode code, String message, String pythonType, String pythonTraceback) {
    super(code, message, pythonType, pythonTraceback);
  }
}
