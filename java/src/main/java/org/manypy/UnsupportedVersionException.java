package org.manypy;

/**
 * An archive written by a newer (or much older) PyTorch format, an AOTInductor package this manypy
 * cannot run (built against a torch older than 2.6), or one compiled for what this host is not
 * (another device, CPU architecture, instruction set or OS). (MANYPY_ERR_UNSUPPORTED_VERSION)
 */
public class UnsupportedVersionException extends ManypyException {
  private static final long serialVersionUID = 1L;

  UnsupportedVersionException(
      ErrorCode code, String message, String pythonType, String pythonTraceback) {
    super(code, message, pythonType, pythonTraceback);
  }
}
