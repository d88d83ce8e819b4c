package org.manypy;

/**
 * The call's {@link CancelToken} was cancelled before it finished; its Python code (or TorchScript)
 * was stopped, or it gave up waiting for its interpreter, or it never started (the token was
 * already cancelled). When Python was running, {@link #pythonType()} is "manypy.Cancelled" and
 * {@link #pythonTraceback()} shows where it stopped. The interpreter keeps serving.
 * (MANYPY_ERR_CANCELLED)
 */
public class CancelledException extends ManypyException {
  private static final long serialVersionUID = 1L;

  CancelledException(ErrorCode code, String message, String pythonType, String pythonTraceback) {
    super(code, message, pythonType, pythonTraceback);
  }
}
