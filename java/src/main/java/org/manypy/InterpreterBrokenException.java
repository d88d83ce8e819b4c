package org.manypy;

/**
 * The interpreter cannot serve: it failed to start, or it was retired after a stopped call whose
 * clean-up was cut short ({@link Pool#checkInterpreter(int)} says why).
 * (MANYPY_ERR_INTERPRETER_BROKEN)
 */
public class InterpreterBrokenException extends ManypyException {
  private static final long serialVersionUID = 1L;

  InterpreterBrokenException(
      ErrorCode code, String message, String pythonType, String pythonTraceback) {
    super(code, message, pythonType, pythonTraceback);
  }
}
