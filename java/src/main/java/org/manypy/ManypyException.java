package org.manypy;

/**
 * A failed manypy call: the status's code, its one-line message and, when a
 * Python exception caused it, the exception's type and formatted traceback.
 * Each code has its own subclass (PythonException for MANYPY_ERR_PYTHON,
 * NotFoundException for MANYPY_ERR_NOT_FOUND, ...), so callers can catch
 * exactly the failures they handle. Unchecked, like the failures of most
 * native-backed Java APIs.
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

  /** The message, followed by the Python traceback when there is one. */
  @Override
  public String toString() {
    String head = getClass().getName() + " [" + code + "]: " + getMessage();
    return pythonTraceback.isEmpty() ? head : head + "\nPython traceback:\n" + pythonTraceback;
  }
}
