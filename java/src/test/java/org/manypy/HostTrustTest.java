package org.manypy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.manypy.internal.ManypyNative;

/**
 * The host trust ({@link Manypy#setHostArchiveTrust}): what every host load checks, whatever trust
 * it is given (both must accept), TorchScript on both legs and AOTInductor packages where manypy
 * runs them.
 *
 * <p>In a JVM of its own (the {@code fresh-jvm} tag), since the host trust is process-wide: while a
 * test has one set, no other class's host load in the same JVM may run. Each test removes it in a
 * finally block, and {@link #noHostTrustIsLeft} checks that it did.
 */
@Tag("fresh-jvm")
class HostTrustTest {
  static final String OTHER = "0".repeat(64); // a digest no archive has

  @AfterEach
  void noHostTrustIsLeft() {
    // An untrusted archive loads again: nothing was left behind, whatever failed.
    ScriptModule.load(TestSupport.archive("loop_script.pt")).close();
  }

  /** Runs invert_script.pt's forward, ~mask, and closes the module. */
  static void checkInverts(ScriptModule module) {
    try (module;
        Tensor mask = Tensor.of(new boolean[] {true, false, true}, 3);
        Tensor out = (Tensor) module.call(mask)) {
      assertArrayEquals(new boolean[] {false, true, false}, out.toBooleanArray());
    }
  }

  @Test
  void theHostTrustCoversTorchScriptLoadedWithoutATrust() throws Exception {
    Path invert = TestSupport.archive("invert_script.pt");
    Path loop = TestSupport.archive("loop_script.pt");
    String digest = AotiModuleTest.sha256(loop);
    byte[] loopBytes = Files.readAllBytes(loop);
    try {
      Manypy.setHostArchiveTrust(ArchiveTrust.ofSha256(OTHER, AotiModuleTest.sha256(invert)));
      UntrustedArchiveException e =
          assertThrows(UntrustedArchiveException.class, () -> ScriptModule.load(loop));
      assertTrue(e.getMessage().contains(digest), e.getMessage());
      e = assertThrows(UntrustedArchiveException.class, () -> ScriptModule.load(loopBytes));
      assertTrue(e.getMessage().contains(digest), e.getMessage());
      // What it lists loads and runs.
      checkInverts(ScriptModule.load(invert));
      checkInverts(ScriptModule.load(Files.readAllBytes(invert)));

      // A trust given to the load cannot widen it (both must accept), nor can NONE; one that
      // refuses what the host trust lists narrows it.
      e =
          assertThrows(
              UntrustedArchiveException.class,
              () -> ScriptModule.load(loop, ArchiveTrust.ofSha256(digest)));
      assertTrue(e.getMessage().contains("the host trust"), e.getMessage());
      assertThrows(
          UntrustedArchiveException.class, () -> ScriptModule.load(loopBytes, ArchiveTrust.NONE));
      e =
          assertThrows(
              UntrustedArchiveException.class,
              () -> ScriptModule.load(invert, ArchiveTrust.ofSha256(OTHER)));
      assertTrue(e.getMessage().contains("the trust given to this load"), e.getMessage());
      ScriptModule.load(invert, ArchiveTrust.NONE).close();

      // Pools are not covered: they have their own trust.
      try (Pool pool = Pool.create(1);
          ReplicatedObject model = TestSupport.loadModel(pool, "identity.pt")) {
        assertEquals(7L, model.call(7L));
      }

      // Set again: replaced.
      Manypy.setHostArchiveTrust(ArchiveTrust.ofSha256(digest));
      ScriptModule.load(loopBytes).close();
      assertThrows(UntrustedArchiveException.class, () -> ScriptModule.load(invert));
    } finally {
      Manypy.setHostArchiveTrust(null);
    }
    // Removed: everything loads again.
    ScriptModule.load(loop).close();
    checkInverts(ScriptModule.load(invert));
  }

  @Test
  void aBadDigestLeavesTheHostTrustAsItWas() throws Exception {
    Path loop = TestSupport.archive("loop_script.pt");
    try {
      Manypy.setHostArchiveTrust(ArchiveTrust.ofSha256(OTHER));
      ErrorsTest.expect(
          InvalidArgumentException.class,
          ErrorCode.INVALID_ARGUMENT,
          "",
          () ->
              Manypy.setHostArchiveTrust(
                  ArchiveTrust.ofSha256(AotiModuleTest.sha256(loop), "not a digest")));
      assertThrows(
          IllegalArgumentException.class,
          () -> Manypy.setHostArchiveTrust(ArchiveTrust.ofSha256(OTHER + "\0")));
      assertThrows(UntrustedArchiveException.class, () -> ScriptModule.load(loop));
      // NONE as the host trust checks nothing, as no host trust.
      Manypy.setHostArchiveTrust(ArchiveTrust.NONE);
      ScriptModule.load(loop).close();
    } finally {
      Manypy.setHostArchiveTrust(null);
    }
  }

  @Test
  void aVerifierInTheHostTrustIsAskedAndReleased() throws Exception {
    Path invert = TestSupport.archive("invert_script.pt");
    Path loop = TestSupport.archive("loop_script.pt");
    String digest = AotiModuleTest.sha256(loop);
    byte[] loopBytes = Files.readAllBytes(loop);
    NativeLibrary.ensureLoaded();
    long held = ManypyNative.manypy_jni_archive_verifiers_held();
    List<String> asked = new ArrayList<>();
    ArchiveVerifier verifier =
        (sha256, origin) -> {
          synchronized (asked) {
            asked.add(HexFormat.of().formatHex(sha256) + " " + origin);
          }
          return origin.endsWith("invert_script.pt");
        };
    try {
      Manypy.setHostArchiveTrust(ArchiveTrust.ofSha256(OTHER).withVerifier(verifier));
      // The host keeps its copy, and so the verifier.
      assertEquals(held + 1, ManypyNative.manypy_jni_archive_verifiers_held());
      assertThrows(UntrustedArchiveException.class, () -> ScriptModule.load(loop));
      assertThrows(UntrustedArchiveException.class, () -> ScriptModule.load(loopBytes));
      checkInverts(ScriptModule.load(invert));
      synchronized (asked) {
        assertEquals(
            List.of(
                digest + " " + loop,
                digest + " <bytes>",
                AotiModuleTest.sha256(invert) + " " + invert),
            asked);
      }
      // Replaced: the old copy's verifier is released, the new one's held.
      Manypy.setHostArchiveTrust(ArchiveTrust.NONE.withVerifier(verifier));
      assertEquals(held + 1, ManypyNative.manypy_jni_archive_verifiers_held());
    } finally {
      Manypy.setHostArchiveTrust(null);
    }
    assertEquals(held, ManypyNative.manypy_jni_archive_verifiers_held());
  }

  @Test
  void theHostTrustCoversAotInductorPackages() throws Exception {
    assumeTrue(
        AotiModuleTest.AOTI,
        "no AOTInductor here: AotiModuleTest checks that every load is refused");
    Path path = TestSupport.archive("python_heavy.pt2");
    String digest = AotiModuleTest.sha256(path);
    byte[] bytes = Files.readAllBytes(path);
    try {
      Manypy.setHostArchiveTrust(ArchiveTrust.ofSha256(OTHER));
      UntrustedArchiveException e =
          assertThrows(UntrustedArchiveException.class, () -> AotiModule.load(path));
      assertTrue(e.getMessage().contains(digest), e.getMessage());
      assertThrows(UntrustedArchiveException.class, () -> AotiModule.load(bytes));
      // A trust given to the load cannot widen it: both must accept.
      assertThrows(
          UntrustedArchiveException.class,
          () -> AotiModule.load(bytes, ArchiveTrust.ofSha256(digest)));
      assertThrows(UntrustedArchiveException.class, () -> AotiModule.load(path, ArchiveTrust.NONE));
      // Listed by the host trust: loads and computes.
      Manypy.setHostArchiveTrust(ArchiveTrust.ofSha256(digest));
      try (AotiModule module = AotiModule.load(bytes);
          Tensor x = Tensor.of(TestSupport.floats("python_heavy.input.bin"), 4, 64)) {
        Object result = module.call(x);
        try {
          float[] logits = ((Tensor) ((Map<?, ?>) result).get("logits")).toFloatArray();
          float diff =
              TestSupport.maxAbsDiff(
                  TestSupport.floats("python_heavy_pt2.expected.logits.bin"), logits);
          assertTrue(diff <= AotiModuleTest.TOLERANCE, "max |diff| " + diff);
        } finally {
          Values.closeTensors(result);
        }
      }
    } finally {
      Manypy.setHostArchiveTrust(null);
    }
    AotiModule.load(path).close();
  }
}
