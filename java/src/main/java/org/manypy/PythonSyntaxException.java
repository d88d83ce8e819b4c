package org.manypy;

/** Python source did not compile (a SyntaxError); the traceback is attached. (MANYPY_ERR_SYNTAX) */
public class PythonSyntaxException extends PythonException {
  private static final long serialVersionUID = 1L;

  PythonSyntaxException(ErrorCode code, String message, String pythonType, String pythonTraceback) {
    super(code, message, pythonType, pythonTraceback);
  }
}
