package org.manypy;

/** A bug in manypy: please report it with the message. (MANYPY_ERR_INTERNAL) */
public class InternalException extends ManypyException {
  private static final long serialVersionUID = 1L;

  InternalException(ErrorCode code, String message, String pythonType, String pythonTraceback) {
    super(code, message, pythonType, pythonTraceback);
  }
}
