package org.manypy;

/** A file does not exist or cannot be read. (MANYPY_ERR_NOT_FOUND) */
public class NotFoundException extends ManypyException {
  private static final long serialVersionUID = 1L;

  NotFoundException(ErrorCode code, String message, String pythonType, String pythonTraceback) {
    super(code, message, pythonType, pythonTraceback);
  }
}
