package org.manypy;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.LongFunction;
import org.manypy.internal.ManypyNative;

/**
 * Which archives may run (docs/security.md): those whose SHA-256 digest is listed, and those the
 * {@link ArchiveVerifier} accepts. A pool given one ({@link PoolOptions#trust}), a host load given
 * one ({@link ScriptModule#load(java.nio.file.Path, ArchiveTrust)}, {@link
 * AotiModule#load(java.nio.file.Path, ArchiveTrust)}) and, as the host trust ({@link
 * Manypy#setHostArchiveTrust}), every host load given none refuse any other archive with {@link
 * UntrustedArchiveException}, whose message gives its digest, before any of it runs. One trust can
 * serve every load of a service:
 *
 * <pre>{@code
 * ArchiveTrust trust = ArchiveTrust.ofSha256("3f2a...", "9c01...")   // as sha256sum prints them
 *     .withVerifier((sha256, origin) -> registry.approves(sha256));
 * Manypy.setHostArchiveTrust(trust);   // ScriptModule.load(path), AotiModule.load(path)
 * Pool pool = Pool.create(new PoolOptions().interpreters(4).trust(trust));
 * ScriptModule ranker = ScriptModule.load(Path.of("ranker.pt"));
 * }</pre>
 *
 * <p>An immutable value, so thread safe, with nothing to close: each use hands the native library a
 * copy (pools and the host trust keep theirs). Digests are checked there, at use: a digest that is
 * not 64 hex digits makes the load, {@link Pool#create(PoolOptions)} or {@link
 * Manypy#setHostArchiveTrust} throw {@link InvalidArgumentException}. {@link #NONE}, with neither
 * digests nor a verifier, checks nothing: every archive loads.
 */
public final class ArchiveTrust {
  /**
   * Trusts every archive: checks nothing, as a pool without a trust. Given to a host load, it adds
   * nothing to the host trust ({@link Manypy#setHostArchiveTrust}), which that load still checks.
   */
  public static final ArchiveTrust NONE = new ArchiveTrust(List.of(), null);

  private final List<String> sha256;
  private final ArchiveVerifier verifier;

  private ArchiveTrust(List<String> sha256, ArchiveVerifier verifier) {
    this.sha256 = sha256;
    this.verifier = verifier;
  }

  /** A trust listing these digests (64 hex digits each, either case, as sha256sum prints them). */
  public static ArchiveTrust ofSha256(String... hexDigests) {
    return NONE.withSha256(hexDigests);
  }

  /** This trust with more digests listed. */
  public ArchiveTrust withSha256(String... hexDigests) {
    List<String> all = new ArrayList<>(sha256);
    for (String digest : hexDigests) {
      if (digest == null) throw new IllegalArgumentException("manypy: a SHA-256 digest is null");
      all.add(digest);
    }
    return new ArchiveTrust(List.copyOf(all), verifier);
  }

  /**
   * This trust with `verifier` deciding about archives not listed (null: none), replacing its
   * verifier.
   */
  public ArchiveTrust withVerifier(ArchiveVerifier verifier) {
    return new ArchiveTrust(sha256, verifier);
  }

  /** The listed digests, as given. */
  public List<String> sha256() {
    return sha256;
  }

  /** The verifier, or null. */
  public ArchiveVerifier verifier() {
    return verifier;
  }

  /**
   * Runs `use` with a native copy of this trust, freed when it returns. The one place where the
   * binding hands digests and verifiers to the native library.
   */
  <T> T withNative(LongFunction<T> use) {
    long trust = NativeLibrary.newHandle(ManypyNative::manypy_archive_trust_new);
    try {
      for (String digest : sha256) {
        Status.check(ManypyNative.manypy_archive_trust_add_sha256(trust, digest));
      }
      if (verifier != null) {
        // The glue holds the verifier by a global reference, released when the last native
        // copy goes (or at once if this fails).
        Status.check(ManypyNative.manypy_jni_archive_trust_set_verifier(trust, verifier));
      }
      return use.apply(trust);
    } finally {
      ManypyNative.manypy_archive_trust_free(trust);
    }
  }

  static ArchiveTrust require(ArchiveTrust trust) {
    if (trust == null) {
      throw new IllegalArgumentException(
          "manypy: the trust is null (ArchiveTrust.NONE checks nothing)");
    }
    return trust;
  }

  @Override
  public String toString() {
    return "ArchiveTrust"
        + Arrays.toString(sha256.toArray())
        + (verifier != null ? " + verifier" : "");
  }
}
