package org.manypy;

/**
 * A platform resource is exhausted: link-map namespaces, pthread keys, threads, memory, callback
 * slots, every interpreter leased; or, in DIRECT mode, the calling thread's stack (a call needs 256
 * KiB of it free). (MANYPY_ERR_RESOURCE_EXHAUSTED)
 */
public class ResourceExhaustedException extends ManypyException {
  private static final long serialVersionUID = 1L;

  ResourceExhaustedException(
      ErrorCode code, String message, String pythonType, String pythonTraceback) {
    super(code, message, pythonType, pythonTraceback);
  }
}
