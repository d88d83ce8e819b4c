package org.manypy;

/** Not a zip archive, or a truncated or corrupt one. (MANYPY_ERR_BAD_ARCHIVE) */
public class BadArchiveException extends ManypyException {
  private static final long serialVersionUID = 1L;

  BadArchiveException(ErrorCode code, String message, String pythonType, String pythonTraceback) {
    super(code, message, pythonType, pythonTraceback);
  }
}
