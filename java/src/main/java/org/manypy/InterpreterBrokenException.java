package org.manypy;

/** The interpreter is unusable (it failed to start earlier). (MANYPY_ERR_INTERPRETER_BROKEN) */
public class InterpreterBrokenException extends ManypyException {
  private static final long serialVersionUID = 1L;

  InterpreterBrokenException(ErrorCode code, String message, String pythonType, String pythonTraceback) {
    super(code, message, pythonType, pythonTraceback);
  }
}
