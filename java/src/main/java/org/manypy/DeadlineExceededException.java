package org.manypy;

/**
 * The call's deadline ({@link CallOptions#timeout}, {@link CallOptions#deadlineNanos}) passed
 * before it finished; its Python code (or TorchScript) was stopped, or it gave up waiting for its
 * interpreter. When Python was running, {@link #pythonType()} is "manypy.DeadlineExceeded" and
 * {@link #pythonTraceback()} shows where it stopped. The interpreter keeps serving.
 * (MANYPY_ERR_DEADLINE_EXCEEDED)
 */
public class DeadlineExceededException extends ManypyException {
  private static final long serialVersionUID = 1L;

  DeadlineExceededException(
      ErrorCode code, String message, String pythonType, String pythonTraceback) {
    super(code, message, pythonType, pythonTraceback);
  }
}
