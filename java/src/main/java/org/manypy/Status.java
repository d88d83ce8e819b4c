package org.manypy;

import org.manypy.internal.ManypyNative;

/** Turns a manypy_status* into the matching ManypyException. */
final class Status {
  private Status() {}

  /** Throws the exception for `status` (and frees it) unless it is 0 (success). */
  static void check(long status) {
    if (status != 0) throw toException(status);
  }

  /** The exception for a non-zero status, which is freed. */
  static ManypyException toException(long status) {
    try {
      return read(status);
    } finally {
      ManypyNative.manypy_status_free(status);
    }
  }

  /** The exception for a non-zero status, which stays the caller's to free. */
  static ManypyException read(long status) {
    ErrorCode code = ErrorCode.of(ManypyNative.manypy_status_code(status));
    String message = ManypyNative.manypy_status_message(status);
    String type = ManypyNative.manypy_status_python_type(status);
    String traceback = ManypyNative.manypy_status_traceback(status);
    return of(code, message, type, traceback);
  }

  static ManypyException of(ErrorCode code, String message, String type, String traceback) {
    switch (code) {
      case INVALID_ARGUMENT:
        return new InvalidArgumentException(code, message, type, traceback);
      case OUT_OF_RANGE:
        return new OutOfRangeException(code, message, type, traceback);
      case PYTHON:
        return new PythonException(code, message, type, traceback);
      case SYNTAX:
        return new PythonSyntaxException(code, message, type, traceback);
      case UNSUPPORTED_TYPE:
        return new UnsupportedTypeException(code, message, type, traceback);
      case WRONG_KIND:
        return new WrongKindException(code, message, type, traceback);
      case STATIC_TLS:
        return new StaticTlsException(code, message, type, traceback);
      case RESOURCE_EXHAUSTED:
        return new ResourceExhaustedException(code, message, type, traceback);
      case LOADER:
        return new LoaderException(code, message, type, traceback);
      case INTERPRETER_BROKEN:
        return new InterpreterBrokenException(code, message, type, traceback);
      case INTERNAL:
        return new InternalException(code, message, type, traceback);
      case NOT_FOUND:
        return new NotFoundException(code, message, type, traceback);
      case BAD_ARCHIVE:
        return new BadArchiveException(code, message, type, traceback);
      case NOT_A_PACKAGE:
        return new NotAPackageException(code, message, type, traceback);
      case UNSUPPORTED_VERSION:
        return new UnsupportedVersionException(code, message, type, traceback);
      case MODULE_NOT_FOUND:
        return new ModuleNotFoundException(code, message, type, traceback);
      case BAD_TENSOR:
        return new BadTensorException(code, message, type, traceback);
      case NO_SUCH_NAME:
        return new NoSuchNameException(code, message, type, traceback);
      case DEADLINE_EXCEEDED:
        return new DeadlineExceededException(code, message, type, traceback);
      case CANCELLED:
        return new CancelledException(code, message, type, traceback);
      case UNTRUSTED_ARCHIVE:
        return new UntrustedArchiveException(code, message, type, traceback);
      case OVERLOADED:
        return new OverloadedException(code, message, type, traceback);
      case DRAINING:
        return new DrainingException(code, message, type, traceback);
      default:
        return new ManypyException(code, message, type, traceback);
    }
  }
}
