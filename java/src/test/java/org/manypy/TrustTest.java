package org.manypy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.ref.WeakReference;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.manypy.internal.ManypyNative;

/**
 * Trusted archives, for pools and for TorchScript on the host, and the os._exit guard, from Java.
 *
 * <p>In a JVM of its own (the {@code fresh-jvm} tag: pom.xml runs such classes in a new JVM each).
 * Interpreters remember the archives that ran in them, and a pool with an allow-list leases only
 * interpreters whose whole history it trusts (docs/security.md, "Pools with different trust"): in
 * the suites' shared JVM, earlier classes may leave no such interpreter. Here no pool that checks
 * nothing runs an archive, and every pool that accepts identity.pt lists it, so whatever order the
 * tests run in, each pool finds interpreters it trusts and no verifier is asked about what another
 * test ran.
 */
@Tag("fresh-jvm")
class TrustTest {
  private static String sha256(Path file) throws Exception {
    return HexFormat.of()
        .formatHex(MessageDigest.getInstance("SHA-256").digest(Files.readAllBytes(file)));
  }

  /** Runs invert_script.pt's forward, ~mask, and closes the module. */
  private static void checkInverts(ScriptModule module) {
    try (module;
        Tensor mask = Tensor.of(new boolean[] {true, false, true}, 3);
        Tensor out = (Tensor) module.call(mask)) {
      assertArrayEquals(new boolean[] {false, true, false}, out.toBooleanArray());
    }
  }

  /** A verifier that records what it is asked ("digest origin") and refuses. */
  private static final class Recorder implements ArchiveVerifier {
    final List<String> asked = new ArrayList<>();

    @Override
    public synchronized boolean trusts(byte[] sha256, String origin) {
      asked.add(HexFormat.of().formatHex(sha256) + " " + origin);
      return false;
    }

    synchronized List<String> asked() {
      return List.copyOf(asked);
    }
  }

  @Test
  void onlyArchivesOnTheAllowListLoad() throws Exception {
    Path identity = TestSupport.archive("identity.pt");
    Path other = TestSupport.archive("malformed/runs_code.pt");
    PoolOptions options = new PoolOptions().trustSha256(sha256(identity));
    try (Pool pool = Pool.create(options)) {
      UntrustedArchiveException e =
          assertThrows(UntrustedArchiveException.class, () -> pool.loadPackage(other));
      assertTrue(e.getMessage().contains(sha256(other)), e.getMessage());
      try (TorchPackage pkg = pool.loadPackage(identity);
          ReplicatedObject model = pkg.loadPickle("model", "model.pkl")) {
        assertEquals(Boolean.FALSE, model.getAttr("training"));
      }
    }
    assertThrows(
        InvalidArgumentException.class,
        () -> Pool.create(new PoolOptions().trustSha256("not a digest")).close());
  }

  @Test
  void anAllowListCoversTorchScriptOnTheHost() throws Exception {
    Path invert = TestSupport.archive("invert_script.pt");
    Path loop = TestSupport.archive("loop_script.pt");
    ArchiveTrust trust =
        ArchiveTrust.ofSha256(sha256(invert), sha256(TestSupport.archive("identity.pt")));

    UntrustedArchiveException e =
        assertThrows(UntrustedArchiveException.class, () -> ScriptModule.load(loop, trust));
    assertTrue(e.getMessage().contains(sha256(loop)), e.getMessage());
    byte[] loopBytes = Files.readAllBytes(loop);
    e = assertThrows(UntrustedArchiveException.class, () -> ScriptModule.load(loopBytes, trust));
    assertTrue(e.getMessage().contains(sha256(loop)), e.getMessage());
    // Without a trust, and with no host trust set (HostTrustTest), nothing is checked (what
    // the trust is for); NONE says so.
    ScriptModule.load(loopBytes).close();
    ScriptModule.load(loop, ArchiveTrust.NONE).close();

    // Listed: loads from the file and from memory, and runs.
    checkInverts(ScriptModule.load(invert, trust));
    checkInverts(ScriptModule.load(Files.readAllBytes(invert), trust));
    ArchiveTrust upper = ArchiveTrust.ofSha256(sha256(invert).toUpperCase(Locale.ROOT));
    checkInverts(ScriptModule.load(invert, upper));
    assertThrows(IllegalArgumentException.class, () -> ScriptModule.load(invert, null));
  }

  @Test
  void aVerifierIsAskedAboutWhatIsNotListed() throws Exception {
    Path invert = TestSupport.archive("invert_script.pt");
    Path loop = TestSupport.archive("loop_script.pt");
    byte[] loopBytes = Files.readAllBytes(loop);
    Recorder recorder = new Recorder();
    ArchiveTrust trust = ArchiveTrust.ofSha256(sha256(invert)).withVerifier(recorder);
    assertThrows(UntrustedArchiveException.class, () -> ScriptModule.load(loop, trust));
    assertThrows(UntrustedArchiveException.class, () -> ScriptModule.load(loopBytes, trust));
    checkInverts(ScriptModule.load(invert, trust)); // listed: not asked
    assertEquals(List.of(sha256(loop) + " " + loop, sha256(loop) + " <bytes>"), recorder.asked());

    ArchiveTrust byPath =
        ArchiveTrust.NONE.withVerifier((sha256, origin) -> origin.endsWith("loop_script.pt"));
    ScriptModule.load(loop, byPath).close();
    assertThrows(UntrustedArchiveException.class, () -> ScriptModule.load(loopBytes, byPath));
    // withVerifier(null) removes it: then nothing is checked.
    ScriptModule.load(loopBytes, byPath.withVerifier(null)).close();

    // A verifier that throws refuses; the exception goes to the handler.
    List<Throwable> reported = new ArrayList<>();
    Manypy.setCallbackErrorHandler(reported::add);
    try {
      ArchiveTrust throwing =
          ArchiveTrust.NONE.withVerifier(
              (sha256, origin) -> {
                throw new IllegalStateException("verifier throws on purpose");
              });
      assertThrows(UntrustedArchiveException.class, () -> ScriptModule.load(invert, throwing));
    } finally {
      Manypy.setCallbackErrorHandler(null);
    }
    assertEquals(1, reported.size(), reported.toString());
    assertEquals("verifier throws on purpose", reported.get(0).getMessage());
  }

  @Test
  void theSameTrustServesPools() throws Exception {
    Path identity = TestSupport.archive("identity.pt");
    Path runsCode = TestSupport.archive("malformed/runs_code.pt");
    Path invert = TestSupport.archive("invert_script.pt");
    Recorder recorder = new Recorder();
    ArchiveTrust trust =
        ArchiveTrust.ofSha256(sha256(invert), sha256(identity)).withVerifier(recorder);
    try (Pool pool = Pool.create(new PoolOptions().trust(trust))) {
      // runs_code.pt's pickle would write a file: refused before it runs.
      UntrustedArchiveException e =
          assertThrows(UntrustedArchiveException.class, () -> pool.loadPackage(runsCode));
      assertTrue(e.getMessage().contains(sha256(runsCode)), e.getMessage());
      byte[] runsCodeBytes = Files.readAllBytes(runsCode);
      assertThrows(UntrustedArchiveException.class, () -> pool.loadPackage(runsCodeBytes));
      assertEquals(
          List.of(sha256(runsCode) + " " + runsCode, sha256(runsCode) + " <bytes>"),
          recorder.asked());
      try (ReplicatedObject model = TestSupport.loadModel(pool, "identity.pt");
          Tensor x = Tensor.of(new float[] {1, 2}, 2);
          Tensor y = (Tensor) model.call(x)) {
        assertArrayEquals(new float[] {1, 2}, y.toFloatArray());
      }
      checkInverts(ScriptModule.load(invert, trust));
    }

    // A trust replaces the digests given before it; digests after it add.
    ArchiveTrust onlyInvert = ArchiveTrust.ofSha256(sha256(invert));
    try (Pool replaced =
        Pool.create(new PoolOptions().trustSha256(sha256(identity)).trust(onlyInvert))) {
      assertThrows(UntrustedArchiveException.class, () -> replaced.loadPackage(identity));
    }
    try (Pool added =
            Pool.create(new PoolOptions().trust(onlyInvert).trustSha256(sha256(identity)));
        TorchPackage pkg = added.loadPackage(identity)) {
      assertThrows(UntrustedArchiveException.class, () -> added.loadPackage(runsCode));
    }
    assertThrows(IllegalArgumentException.class, () -> new PoolOptions().trust(null));
  }

  @Test
  void badDigestsAreInvalidArguments() throws Exception {
    Path invert = TestSupport.archive("invert_script.pt");
    for (String bad : List.of("", "not a digest", "0".repeat(63), "0".repeat(65), "g".repeat(64))) {
      ArchiveTrust trust = ArchiveTrust.ofSha256(sha256(invert), bad);
      assertThrows(InvalidArgumentException.class, () -> ScriptModule.load(invert, trust), bad);
      assertThrows(
          InvalidArgumentException.class,
          () -> ScriptModule.load(Files.readAllBytes(invert), trust),
          bad);
      assertThrows(
          InvalidArgumentException.class,
          () -> Pool.create(new PoolOptions().trust(trust)).close(),
          bad);
    }
    // Java-side misuse: a NUL (C strings end there) or null.
    ArchiveTrust nul = ArchiveTrust.ofSha256("0".repeat(64) + "\0");
    assertThrows(IllegalArgumentException.class, () -> ScriptModule.load(invert, nul));
    assertThrows(IllegalArgumentException.class, () -> ArchiveTrust.ofSha256((String) null));
  }

  @Test
  void theVerifierIsReleasedExactlyOnce() throws Exception {
    NativeLibrary.ensureLoaded();
    long before = ManypyNative.manypy_jni_archive_verifiers_held();
    AtomicInteger asked = new AtomicInteger();
    WeakReference<ArchiveVerifier> verifier = useVerifierOnce(asked, before);
    assertEquals(before, ManypyNative.manypy_jni_archive_verifiers_held());
    assertEquals(2, asked.get());
    // The glue's global reference is gone: the verifier can be collected.
    for (int i = 0; i < 100 && verifier.get() != null; ++i) {
      System.gc();
      Thread.sleep(20);
    }
    assertNull(verifier.get(), "the verifier is still reachable after every trust was freed");
  }

  /** Gives a verifier to a pool and a load; returns a weak reference to it. */
  private static WeakReference<ArchiveVerifier> useVerifierOnce(AtomicInteger asked, long before)
      throws Exception {
    ArchiveVerifier verifier = (sha256, origin) -> asked.incrementAndGet() < 0;
    ArchiveTrust trust =
        ArchiveTrust.ofSha256(sha256(TestSupport.archive("identity.pt"))).withVerifier(verifier);
    try (Pool pool = Pool.create(new PoolOptions().trust(trust))) {
      assertEquals(before + 1, ManypyNative.manypy_jni_archive_verifiers_held()); // the pool's
      assertThrows(
          UntrustedArchiveException.class,
          () -> ScriptModule.load(TestSupport.archive("loop_script.pt"), trust));
      assertEquals(before + 1, ManypyNative.manypy_jni_archive_verifiers_held());
      assertThrows(
          UntrustedArchiveException.class,
          () -> pool.loadPackage(TestSupport.archive("malformed/runs_code.pt")));
    }
    // A pool that fails after its options took the trust releases that copy too.
    assertThrows(
        OutOfRangeException.class,
        () ->
            Pool.create(new PoolOptions().trust(trust).interpreters(Manypy.maxInterpreters() + 1))
                .close());
    return new WeakReference<>(verifier);
  }

  @Test
  void osExitRaisesInsteadOfEndingTheJvm() {
    try (Pool pool = Pool.create(1)) {
      PythonException e =
          assertThrows(PythonException.class, () -> pool.exec(0, "import os\nos._exit(3)"));
      assertEquals("manypy.ProcessExitRefused", e.pythonType());
    }
  }
}
