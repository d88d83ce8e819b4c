package org.manypy;

/**
 * A failed manypy call: the status's code, its one-line message and, when a Python exception caused
 * it, the exception's type and formatted traceback. Each code has its own subclass (PythonException
 * for MANYPY_ERR_PYTHON, NotFoundException for MANYPY_ERR_NOT_FOUND, ...), so callers can catch
 * exactly the failures they handle. Unchecked, like the failures of most native-backed Java APIs.
 *
 * <p>{@link #getMessage()} is the status's one-line message, and {@link #toString()} one line too
 * ({@code org.manypy.PythonException [PYTHON]: ZeroDivisionError: division by zero}), like Rust's
 * Display and Go's Error(). The Python traceback is in {@link #pythonTraceback()}, and is attached
 * as a suppressed {@link PythonTraceback} so that {@link #printStackTrace()} and logging
 * frameworks, which print suppressed exceptions, show where the model failed, also when this
 * exception is the cause of another.
 */
public class ManypyException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final ErrorCode code;
  private final String pythonType;
  private final String pythonTraceback;

  ManypyException(ErrorCode code, String message, String pythonType, String pythonTraceback) {
    super(message);
    this.code = code;
    this.pythonType = pythonType == null ? "" : pythonType;
    this.pythonTraceback = pythonTraceback == null ? "" : pythonTraceback;
    if (!this.pythonTraceback.isEmpty()) addSuppressed(new PythonTraceback(this.pythonTraceback));
  }

  ManypyException(ErrorCode code, String message, Throwable cause) {
    this(code, message, "", "");
    initCause(cause);
  }

  /** The status code. */
  public ErrorCode code() {
    return code;
  }

  /** The qualified type of the Python exception behind the error, or "". */
  public String pythonType() {
    return pythonType;
  }

  /** The formatted Python (or TorchScript) traceback, or "". */
  public String pythonTraceback() {
    return pythonTraceback;
  }

  /** One line: the class, the code and the message. */
  @Override
  public String toString() {
    return getClass().getName() + " [" + code + "]: " + getMessage();
  }

  /**
   * The Python (or TorchScript) traceback behind a {@link ManypyException}, attached to it as a
   * suppressed exception so that stack-trace printers show it: "Suppressed: Python traceback:" and
   * the traceback's lines. It has no Java stack trace of its own.
   */
  public static final class PythonTraceback extends RuntimeException {
    private static final long serialVersionUID = 1L;

    PythonTraceback(String traceback) {
      super(traceback, null, false, false);
    }

    /** "Python traceback:" and the traceback, on the lines that follow. */
    @Override
    public String toString() {
      return "Python traceback:\n" + getMessage().stripTrailing();
    }
  }
}
