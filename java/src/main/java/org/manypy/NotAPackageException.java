package org.manypy;

/** A readable zip archive that is not a torch.package. (MANYPY_ERR_NOT_A_PACKAGE) */
public class NotAPackageException extends ManypyException {
  private static final long serialVersionUID = 1L;

  NotAPackageException(ErrorCode code, String message, String pythonType, String pythonTraceback) {
    super(code, message, pythonType, pythonTraceback);
  }
}
