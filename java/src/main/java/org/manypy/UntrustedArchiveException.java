package org.manypy;

/**
 * The pool, or the trust of a TorchScript load, does not trust the archive: its SHA-256 digest (in
 * the message) is not on the allow-list and no verifier accepted it ({@link ArchiveTrust}, {@link
 * PoolOptions#trustSha256(String)}). Nothing of the archive ran. (MANYPY_ERR_UNTRUSTED_ARCHIVE)
 */
public class UntrustedArchiveException extends ManypyException {
  private static final long serialVersionUID = 1L;

  UntrustedArchiveException(
      ErrorCode code, String message, String pythonType, String pythonTraceback) {
    super(code, message, pythonType, pythonTraceback);
  }
}
