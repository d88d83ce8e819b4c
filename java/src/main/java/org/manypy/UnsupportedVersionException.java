package org.manypy;

/** An archive written by a newer (or much older) PyTorch format. (MANYPY_ERR_UNSUPPORTED_VERSION) */
public class UnsupportedVersionException extends ManypyException {
  private static final long serialVersionUID = 1L;

  UnsupportedVersionException(ErrorCode code, String message, String pythonType, String pythonTraceback) {
    super(code, message, pythonType, pythonTraceback);
  }
}
