package org.manypy;

/**
 * Decides about an archive that an {@link ArchiveTrust}'s allow-list does not list: returns whether
 * to trust it. Check a signature, ask a model registry, or log.
 *
 * <p>Runs on the thread loading the archive (or creating a pool, about archives its interpreters
 * ran before), and must not call manypy. An exception it throws refuses the archive and goes to
 * {@link Manypy#setCallbackErrorHandler}.
 */
@FunctionalInterface
public interface ArchiveVerifier {
  /**
   * @param sha256 the SHA-256 of the whole archive, 32 bytes (a copy: the verifier may keep it)
   * @param origin the path it was loaded from, or {@code "<bytes>"}
   */
  boolean trusts(byte[] sha256, String origin);
}
