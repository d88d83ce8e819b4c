package org.manypy;

/**
 * Python code needs a module that is neither in the package nor installed.
 * (MANYPY_ERR_MODULE_NOT_FOUND)
 */
public class ModuleNotFoundException extends ManypyException {
  private static final long serialVersionUID = 1L;

  ModuleNotFoundException(
      ErrorCode code, String message, String pythonType, String pythonTraceback) {
    super(code, message, pythonType, pythonTraceback);
  }
}
