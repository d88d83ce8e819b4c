package org.manypy;

/**
 * The call was refused at once, without running, because its pool already had as many calls waiting
 * for an interpreter as its queue limit allows ({@link PoolOptions#queueLimit(long)}). Nothing ran
 * and nothing is held: retry later, or shed the load (answer 503 or 429). Thrown by the call
 * itself, synchronous or asynchronous, never through a future. (MANYPY_ERR_OVERLOADED)
 */
public class OverloadedException extends ManypyException {
  private static final long serialVersionUID = 1L;

  OverloadedException(ErrorCode code, String message, String pythonType, String pythonTraceback) {
    super(code, message, pythonType, pythonTraceback);
  }
}
