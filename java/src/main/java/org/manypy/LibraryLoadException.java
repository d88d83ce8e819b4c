package org.manypy;

/**
 * The native library could not be loaded, or it is not the version this jar was built for. Its
 * message says which file was tried and how to fix it.
 */
public final class LibraryLoadException extends LoaderException {
  private static final long serialVersionUID = 1L;

  LibraryLoadException(String message, Throwable cause) {
    super(ErrorCode.LOADER, message, "", "");
    if (cause != null) initCause(cause);
  }
}
