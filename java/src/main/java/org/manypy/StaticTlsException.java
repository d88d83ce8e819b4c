package org.manypy;

/**
 * The process ran out of static TLS for another interpreter: start the JVM with
 * GLIBC_TUNABLES=glibc.rtld.optional_static_tls=16384 (see the README). (MANYPY_ERR_STATIC_TLS)
 */
public class StaticTlsException extends ManypyException {
  private static final long serialVersionUID = 1L;

  StaticTlsException(ErrorCode code, String message, String pythonType, String pythonTraceback) {
    super(code, message, pythonType, pythonTraceback);
  }
}
