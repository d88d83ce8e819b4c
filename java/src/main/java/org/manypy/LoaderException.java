package org.manypy;

/**
 * The dynamic loader or the Python runtime could not be started, or a library did not load.
 * (MANYPY_ERR_LOADER)
 */
public class LoaderException extends ManypyException {
  private static final long serialVersionUID = 1L;

  LoaderException(ErrorCode code, String message, String pythonType, String pythonTraceback) {
    super(code, message, pythonType, pythonTraceback);
  }
}
