package org.manypy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.HexFormat;
import org.junit.jupiter.api.Test;

/** Trusted archives and the os._exit guard, from Java. */
class TrustTest {
  private static String sha256(Path file) throws Exception {
    return HexFormat.of().formatHex(
        MessageDigest.getInstance("SHA-256").digest(Files.readAllBytes(file)));
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
    assertThrows(InvalidArgumentException.class,
        () -> Pool.create(new PoolOptions().trustSha256("not a digest")).close());
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
