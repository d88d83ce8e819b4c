package org.manypy;

/**
 * Python code raised an exception (or a TorchScript method did); see pythonType() and
 * pythonTraceback(). (MANYPY_ERR_PYTHON)
 */
public class PythonException extends ManypyException {
  private static final long serialVersionUID = 1L;

  PythonException(ErrorCode code, String message, String pythonType, String pythonTraceback) {
    super(code, message, pythonType, pythonTraceback);
  }
}
