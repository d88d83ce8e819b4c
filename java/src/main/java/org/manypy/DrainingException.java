package org.manypy;

/**
 * The call was refused at once, without running, because its pool is draining ({@link
 * Pool#drain(java.time.Duration)}): it finishes the calls it has and takes no new ones. Nothing ran
 * and nothing is held: send the call to another pool or process (answer 503). Thrown by the call
 * itself, synchronous or asynchronous, never through a future. A pool never stops draining.
 * (MANYPY_ERR_DRAINING)
 */
public class DrainingException extends ManypyException {
  private static final long serialVersionUID = 1L;

  DrainingException(ErrorCode code, String message, String pythonType, String pythonTraceback) {
    super(code, message, pythonType, pythonTraceback);
  }
}
