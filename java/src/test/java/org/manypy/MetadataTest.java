package org.manypy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Extra files read and written, and the export hook as a Java lambda. */
class MetadataTest {
  static final String PRODUCER = "{\"producer\": \"java-service\", \"version\": 3}";

  @TempDir Path dir;

  @AfterEach
  void removeHook() {
    Manypy.setExportHook(null);
    Manypy.setCallbackErrorHandler(null);
  }

  static String text(Path archive, String record) {
    return new String(Archives.readFile(archive, record), StandardCharsets.UTF_8);
  }

  @Test
  void hookStampsArchivesTheHostWrites() {
    Manypy.setExportHook(
        () -> Map.of("producer_info.json", PRODUCER, "raw.bin", new byte[] {0, 1, 2}));
    Path script = dir.resolve("script.pt");
    try (ScriptModule module = ScriptModule.load(TestSupport.archive("python_heavy_script.pt"))) {
      module.save(script, Map.of("note.txt", "saved from Java"));
    }
    assertTrue(
        Archives.listFiles(script).contains("extra/note.txt"),
        Archives.listFiles(script).toString());
    assertEquals("saved from Java", text(script, "extra/note.txt"));
    assertEquals(PRODUCER, text(script, "extra/producer_info.json"));
    assertEquals(3, Archives.readFile(script, "extra/raw.bin").length);

    Path copy = dir.resolve("copy.pt");
    try (Pool pool = Pool.create(1);
        TorchPackage pkg = pool.loadPackage(TestSupport.archive("identity.pt"))) {
      pkg.save(copy, Map.of("model_card.md", "# identity"));
      assertEquals("# identity", text(copy, "extra/model_card.md"));
      assertEquals(PRODUCER, text(copy, "extra/producer_info.json"));
      // The copy loads and serves like the original.
      try (TorchPackage again = pool.loadPackage(copy);
          ReplicatedObject model = again.loadPickle("model", "model.pkl")) {
        assertEquals(7L, model.call(7L));
        assertTrue(again.listFiles().contains("extra/model_card.md"));
        assertEquals(
            "# identity",
            new String(again.readFile("extra/model_card.md"), StandardCharsets.UTF_8));
      }
    }
  }

  @Test
  void hookStampsArchivesPythonWrites() {
    Manypy.setExportHook(() -> Map.of("producer_info.json", PRODUCER));
    Path script = dir.resolve("from-python.pt");
    Path pkg = dir.resolve("from-python-package.pt");
    try (Pool pool = Pool.create(1)) {
      pool.exec(
          0,
          "import torch\n"
              + "torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), '"
              + script
              + "')\n"
              + "from torch.package import PackageExporter\n"
              + "with PackageExporter('"
              + pkg
              + "') as e:\n"
              + "    e.save_text('notes', 'readme.txt', 'packaged in an interpreter')\n");
    }
    assertEquals(PRODUCER, text(script, "extra/producer_info.json"));
    assertEquals(PRODUCER, text(pkg, "extra/producer_info.json"));
    assertEquals("packaged in an interpreter", text(pkg, "notes/readme.txt"));
  }

  @Test
  void aThrowingHookWritesTheArchiveWithoutItsFiles() throws IOException {
    Queue<Throwable> reported = new ConcurrentLinkedQueue<>();
    Manypy.setCallbackErrorHandler(reported::add);
    Manypy.setExportHook(
        () -> {
          throw new IllegalStateException("hook failed");
        });
    Path script = dir.resolve("no-hook-files.pt");
    try (ScriptModule module = ScriptModule.load(TestSupport.archive("python_heavy_script.pt"))) {
      module.save(script, null);
    }
    assertTrue(Files.size(script) > 0);
    assertFalse(Archives.listFiles(script).stream().anyMatch(n -> n.startsWith("extra/")));
    assertTrue(reported.stream().anyMatch(e -> e.getMessage().equals("hook failed")));
  }

  @Test
  void aCopyOfAnArchiveTheHostDidNotWrite() {
    // Archives.saveCopy on TorchScript and a torch.package (AotiModuleTest copies a .pt2).
    Manypy.setExportHook(() -> Map.of("producer_info.json", PRODUCER));
    Path script = dir.resolve("invert_stamped.pt");
    Archives.saveCopy(
        TestSupport.archive("invert_script.pt"),
        script,
        Map.of("note.txt", "stamped from Java", "raw.bin", new byte[] {0, 1, 2}));
    Path pkg = dir.resolve("identity_stamped.pt");
    Archives.saveCopy(TestSupport.archive("identity.pt"), pkg, null);
    Manypy.setExportHook(null);
    assertEquals("stamped from Java", text(script, "extra/note.txt"));
    assertEquals(3, Archives.readFile(script, "extra/raw.bin").length);
    assertEquals(PRODUCER, text(script, "extra/producer_info.json"));
    assertEquals(PRODUCER, text(pkg, "extra/producer_info.json"));
    // A name given again replaces the record; the copy loads and runs as the original.
    Path again = dir.resolve("invert_again.pt");
    Archives.saveCopy(script, again, Map.of("note.txt", "replaced"));
    assertEquals("replaced", text(again, "extra/note.txt"));
    assertEquals(
        1, Archives.listFiles(again).stream().filter(n -> n.equals("extra/note.txt")).count());
    try (ScriptModule module = ScriptModule.load(again);
        Tensor mask = Tensor.of(new boolean[] {true, false}, 2);
        Tensor out = (Tensor) module.call(mask)) {
      assertArrayEquals(new boolean[] {false, true}, out.toBooleanArray());
    }
    try (Pool pool = Pool.create(1);
        TorchPackage copy = pool.loadPackage(pkg);
        ReplicatedObject model = copy.loadPickle("model", "model.pkl")) {
      assertEquals(7L, model.call(7L));
    }
  }

  @Test
  void aCopyThatCannotBeMadeThrows() {
    Path script = TestSupport.archive("invert_script.pt");
    ErrorsTest.expect(
        NotFoundException.class,
        ErrorCode.NOT_FOUND,
        "",
        () -> Archives.saveCopy(dir.resolve("absent.pt"), dir.resolve("copy.pt"), null));
    ErrorsTest.expect(
        NotFoundException.class,
        ErrorCode.NOT_FOUND,
        "",
        () -> Archives.saveCopy(script, dir.resolve("no/such/dir/copy.pt"), null));
    ErrorsTest.expect(
        InvalidArgumentException.class,
        ErrorCode.INVALID_ARGUMENT,
        "bad.txt",
        () -> Archives.saveCopy(script, dir.resolve("bad.pt"), Map.of("bad.txt", 42L)));
    ErrorsTest.expect(
        BadArchiveException.class,
        ErrorCode.BAD_ARCHIVE,
        "",
        () ->
            Archives.saveCopy(
                TestSupport.archive("malformed/not_a_zip.pt"), dir.resolve("copy.pt"), null));
  }

  @Test
  void extraFilesMustBeBytesOrStrings() {
    try (ScriptModule module = ScriptModule.load(TestSupport.archive("python_heavy_script.pt"))) {
      ErrorsTest.expect(
          InvalidArgumentException.class,
          ErrorCode.INVALID_ARGUMENT,
          "bad.txt",
          () -> module.save(dir.resolve("bad.pt"), Map.of("bad.txt", 42L)));
    }
    ErrorsTest.expect(
        NoSuchNameException.class,
        ErrorCode.NO_SUCH_NAME,
        "extra/nope",
        () -> Archives.readFile(TestSupport.archive("resnet18_script.pt"), "extra/nope"));
    ErrorsTest.expect(
        BadArchiveException.class,
        ErrorCode.BAD_ARCHIVE,
        "",
        () -> Archives.listFiles(TestSupport.archive("malformed/not_a_zip.pt")));
  }
}
