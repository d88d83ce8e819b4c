package org.manypy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The loader's bundled natives (NativeBundle): extraction, digests, the cache's repair, concurrent
 * extraction and the errors, on bundles this test writes (arbitrary bytes: nothing here is loaded),
 * and once end to end in a child JVM with the build's real libraries.
 */
class NativeBundleTest {
  static final String PLATFORM = NativeBundle.currentPlatform();

  @TempDir Path tmp;

  /** Files of a fake bundle: sizes chosen so copies take a little while. */
  static Map<String, byte[]> fakeFiles() {
    Random random = new Random(21);
    Map<String, byte[]> files = new LinkedHashMap<>();
    for (String name :
        List.of(
            "libmanypy_jni.so",
            "libmanypy.so.0.3",
            "manypy/libmanypy_interp.so",
            "manypy/libmanypy_hooks.so")) {
      byte[] bytes = new byte[256 * 1024 + random.nextInt(4096)];
      random.nextBytes(bytes);
      files.put(name, bytes);
    }
    return files;
  }

  /**
   * Writes a bundle as scripts/package/maven.sh lays it out into `resources`, with the real digests
   * unless `digests` overrides some.
   */
  static void writeBundle(
      Path resources, String platform, Map<String, byte[]> files, Map<String, String> digests)
      throws IOException {
    Path dir = resources.resolve(NativeBundle.ROOT + platform);
    StringBuilder manifest =
        new StringBuilder(
            "version=0.3.0\nplatform="
                + platform
                + "\ntorch=1.13.1\npython=3.11\njni=libmanypy_jni.so\nfiles="
                + String.join(",", files.keySet())
                + "\n");
    for (Map.Entry<String, byte[]> file : files.entrySet()) {
      Path target = dir.resolve(file.getKey());
      Files.createDirectories(target.getParent());
      Files.write(target, file.getValue());
      String digest = digests.getOrDefault(file.getKey(), NativeBundle.digestOrNull(target));
      manifest.append("sha256.").append(file.getKey()).append('=').append(digest).append('\n');
    }
    Files.writeString(dir.resolve(NativeBundle.MANIFEST), manifest);
    Files.writeString(
        resources.resolve(NativeBundle.INDEX), platform + "=torch 1.13.1, CPython 3.11\n");
  }

  static URLClassLoader loaderOf(Path resources) throws IOException {
    return new URLClassLoader(new URL[] {resources.toUri().toURL()}, null);
  }

  NativeBundle bundle(Map<String, byte[]> files) throws IOException {
    Path resources = tmp.resolve("resources");
    writeBundle(resources, PLATFORM, files, Map.of());
    return NativeBundle.find(loaderOf(resources), PLATFORM);
  }

  static void assertExtracted(Path dir, Map<String, byte[]> files) throws IOException {
    for (Map.Entry<String, byte[]> file : files.entrySet()) {
      assertArrayEquals(
          file.getValue(), Files.readAllBytes(dir.resolve(file.getKey())), file.getKey());
    }
    try (var stream = Files.walk(dir)) {
      List<Path> stray = stream.filter(p -> p.getFileName().toString().endsWith(".tmp")).toList();
      assertTrue(stray.isEmpty(), "temporary files left: " + stray);
    }
  }

  @Test
  void extractsEveryFileWithItsLayout() throws IOException {
    Map<String, byte[]> files = fakeFiles();
    NativeBundle bundle = bundle(files);
    Path cache = tmp.resolve("cache");
    Path jni = bundle.extract(cache);
    Path dir = cache.resolve("0.3.0-" + bundle.build);
    assertEquals(dir.resolve("libmanypy_jni.so").toAbsolutePath(), jni);
    assertEquals(16, bundle.build.length());
    assertEquals("torch 1.13.1, CPython 3.11", bundle.builtFor());
    assertExtracted(dir, files);
  }

  @Test
  void aFilledCacheIsUsedAsItIs() throws IOException {
    Map<String, byte[]> files = fakeFiles();
    NativeBundle bundle = bundle(files);
    Path cache = tmp.resolve("cache");
    Path jni = bundle.extract(cache);
    Object inode = Files.getAttribute(jni, "unix:ino");
    // Nothing is written the second time: the very same file stays.
    assertEquals(jni, bundle.extract(cache));
    assertEquals(inode, Files.getAttribute(jni, "unix:ino"));
  }

  @Test
  void aCorruptOrForeignCacheEntryIsReplaced() throws IOException {
    Map<String, byte[]> files = fakeFiles();
    NativeBundle bundle = bundle(files);
    Path cache = tmp.resolve("cache");
    Path dir = bundle.extract(cache).getParent();
    // One file cut short, one flipped, one from another build, one gone.
    Path jni = dir.resolve("libmanypy_jni.so");
    Files.write(jni, new byte[] {1, 2, 3});
    byte[] flipped = files.get("libmanypy.so.0.3").clone();
    flipped[1000] ^= 1;
    Files.write(dir.resolve("libmanypy.so.0.3"), flipped);
    Files.writeString(dir.resolve("manypy/libmanypy_interp.so"), "another build");
    Files.delete(dir.resolve("manypy/libmanypy_hooks.so"));
    assertEquals(jni, bundle.extract(cache));
    assertExtracted(dir, files);
  }

  @Test
  void concurrentExtractionsAllSucceed() throws Exception {
    // Separate bundles (as separate JVMs have) racing into one empty cache,
    // several rounds, some with a corrupt entry to replace.
    Map<String, byte[]> files = fakeFiles();
    Path resources = tmp.resolve("resources");
    writeBundle(resources, PLATFORM, files, Map.of());
    int threads = 6;
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    try {
      for (int round = 0; round < 8; ++round) {
        Path cache = tmp.resolve("cache" + round);
        if (round % 2 == 1) {
          NativeBundle first = NativeBundle.find(loaderOf(resources), PLATFORM);
          Files.write(first.extract(cache), new byte[] {0});
        }
        CyclicBarrier start = new CyclicBarrier(threads);
        List<Future<Path>> results = new ArrayList<>();
        for (int t = 0; t < threads; ++t) {
          results.add(
              pool.submit(
                  () -> {
                    NativeBundle bundle = NativeBundle.find(loaderOf(resources), PLATFORM);
                    start.await();
                    return bundle.extract(cache);
                  }));
        }
        Path jni = null;
        for (Future<Path> result : results) {
          Path got = result.get();
          if (jni != null) assertEquals(jni, got);
          jni = got;
        }
        assertExtracted(jni.getParent(), files);
      }
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void twoJvmsExtractingAtOnceBothSucceed() throws Exception {
    Map<String, byte[]> files = fakeFiles();
    Path resources = tmp.resolve("resources");
    writeBundle(resources, PLATFORM, files, Map.of());
    Path cache = tmp.resolve("cache");
    ExecutorService pool = Executors.newFixedThreadPool(2);
    try {
      List<Future<TestSupport.ChildResult>> children = new ArrayList<>();
      for (int i = 0; i < 2; ++i) {
        children.add(
            pool.submit(
                () ->
                    TestSupport.runChild(
                        new HashMap<>(),
                        List.of(),
                        "extract",
                        resources.toString(),
                        cache.toString())));
      }
      for (Future<TestSupport.ChildResult> child : children) {
        String line = ProcessTest.resultLine(child.get());
        assertTrue(
            line.startsWith("RESULT extracted " + cache.toAbsolutePath()), child.get().output());
        assertEquals(0, child.get().exitCode(), child.get().output());
      }
    } finally {
      pool.shutdownNow();
    }
    try (var dirs = Files.list(cache)) {
      assertExtracted(dirs.findFirst().orElseThrow(), files);
    }
  }

  @Test
  void aDigestMismatchNamesTheFileAndBothDigests() throws IOException {
    Map<String, byte[]> files = fakeFiles();
    Path resources = tmp.resolve("resources");
    String wrong = "00".repeat(32);
    writeBundle(resources, PLATFORM, files, Map.of("manypy/libmanypy_hooks.so", wrong));
    String actual =
        NativeBundle.digestOrNull(
            resources.resolve(NativeBundle.ROOT + PLATFORM + "/manypy/libmanypy_hooks.so"));
    NativeBundle bundle = NativeBundle.find(loaderOf(resources), PLATFORM);
    Path cache = tmp.resolve("cache");
    LibraryLoadException e = assertThrows(LibraryLoadException.class, () -> bundle.extract(cache));
    String message = e.getMessage();
    assertTrue(
        message.contains(
            "digest mismatch for org/manypy/native/" + PLATFORM + "/manypy/libmanypy_hooks.so"),
        message);
    assertTrue(message.contains("expected SHA-256 " + wrong), message);
    assertTrue(message.contains("found " + actual), message);
    assertTrue(message.contains("download it again"), message);
    // What did not match was never put where the loader would load it.
    assertNull(
        NativeBundle.digestOrNull(bundle.directory(cache).resolve("manypy/libmanypy_hooks.so")));
  }

  @Test
  void aJarForAnotherPlatformSaysWhatItHolds() throws IOException {
    Path resources = tmp.resolve("resources");
    writeBundle(resources, "linux-riscv64", fakeFiles(), Map.of());
    NativeBundle.OtherPlatform e =
        assertThrows(
            NativeBundle.OtherPlatform.class,
            () -> NativeBundle.find(loaderOf(resources), PLATFORM));
    String message = e.getMessage();
    assertTrue(
        message.contains(
            "this jar holds native libraries for linux-riscv64 (torch 1.13.1, CPython 3.11)"),
        message);
    assertTrue(message.contains("not for this JVM's platform " + PLATFORM), message);
    assertTrue(message.contains("-Dmanypy.native.path=<dir>"), message);
  }

  @Test
  void aPlainJarHasNoBundle() throws IOException {
    Files.createDirectories(tmp.resolve("empty"));
    assertNull(NativeBundle.find(loaderOf(tmp.resolve("empty")), PLATFORM));
  }

  @Test
  void aManifestCannotWriteOutsideItsDirectory() throws IOException {
    Path resources = tmp.resolve("resources");
    writeBundle(resources, PLATFORM, fakeFiles(), Map.of());
    Path manifest = resources.resolve(NativeBundle.ROOT + PLATFORM + "/" + NativeBundle.MANIFEST);
    Files.writeString(
        manifest,
        Files.readString(manifest)
                .replace("files=libmanypy_jni.so,", "files=libmanypy_jni.so,../../escape.so,")
            + "sha256.../../escape.so="
            + "00".repeat(32)
            + "\n");
    LibraryLoadException e =
        assertThrows(
            LibraryLoadException.class, () -> NativeBundle.find(loaderOf(resources), PLATFORM));
    assertTrue(e.getMessage().contains("../../escape.so"), e.getMessage());
  }

  @Test
  void anUnwritableCacheNamesTheDirectoryAndTheProperty() throws IOException {
    NativeBundle bundle = bundle(fakeFiles());
    // A file where a directory is expected: refused even to root, which
    // permissions would not stop.
    Path file = tmp.resolve("not-a-directory");
    Files.writeString(file, "x");
    Path cache = file.resolve("cache");
    LibraryLoadException e = assertThrows(LibraryLoadException.class, () -> bundle.extract(cache));
    String message = e.getMessage();
    assertTrue(
        message.contains(
            "cannot write the native libraries bundled in this jar into the cache directory "
                + bundle.directory(cache).toAbsolutePath()),
        message);
    // The reason, as the file system gives it (ENOTDIR from mkdir below the file).
    assertTrue(message.contains(file + "/cache: Not a directory"), message);
    assertTrue(message.contains("-Dmanypy.native.cache=<dir>"), message);
    assertTrue(message.contains("-Dmanypy.native.path=<dir>"), message);
  }

  @Test
  void theCacheRootFollowsThePropertyThenXdg() {
    String old = System.getProperty(NativeBundle.CACHE_PROPERTY);
    try {
      System.setProperty(NativeBundle.CACHE_PROPERTY, tmp.toString());
      assertEquals(tmp, NativeBundle.defaultCacheRoot());
      System.clearProperty(NativeBundle.CACHE_PROPERTY);
      String xdg = System.getenv("XDG_CACHE_HOME");
      Path expected =
          xdg != null && !xdg.isEmpty() && Path.of(xdg).isAbsolute()
              ? Path.of(xdg, "manypy", "native")
              : Path.of(System.getProperty("user.home"), ".cache", "manypy", "native");
      assertEquals(expected, NativeBundle.defaultCacheRoot());
    } finally {
      if (old != null) System.setProperty(NativeBundle.CACHE_PROPERTY, old);
    }
  }

  @Test
  void thePlatformNameMatchesTheJarLayout() {
    assertTrue(PLATFORM.matches("[a-z]+-[a-z0-9_]+"), PLATFORM);
    if (System.getProperty("os.arch").equals("amd64")) assertEquals("linux-x86_64", PLATFORM);
  }

  @Test
  void aMissingLibtorchSaysToInstallPythonTorch() {
    // glibc's text when libmanypy.so's libtorch is not installed.
    String tried = "/root/.cache/manypy/native/0.3.0-0123456789abcdef/libmanypy_jni.so";
    UnsatisfiedLinkError error =
        new UnsatisfiedLinkError(
            tried
                + ": libtorch_cpu.so.1.13: cannot open shared object file: No such file or directory");
    String message = LinkErrors.explain(tried, error, "torch 1.13.1, CPython 3.11");
    assertTrue(message.contains("libtorch is not installed"), message);
    assertTrue(message.contains("need libtorch_cpu.so.1.13"), message);
    assertTrue(message.contains("(built for torch 1.13.1, CPython 3.11)"), message);
    assertTrue(message.contains("install python3-torch"), message);
    assertTrue(message.contains("libtorch1.13"), message);

    String noManypy =
        LinkErrors.explain(
            "/usr/lib/x86_64-linux-gnu/jni/libmanypy_jni.so",
            new UnsatisfiedLinkError(
                "/usr/lib/x86_64-linux-gnu/jni/libmanypy_jni.so: libmanypy.so.0.3: cannot open shared object file:"
                    + " No such file or directory"),
            null);
    assertTrue(noManypy.contains("libmanypy0.3"), noManypy);
  }

  /**
   * The build's real libraries, bundled, extracted and loaded in a child JVM with nothing on
   * java.library.path, serve a call, and the process maps them from the cache (their RUNPATH
   * $ORIGIN comes first).
   */
  @Test
  void theRealNativesLoadFromTheCache() throws Exception {
    Path lib = TestSupport.buildDir().resolve("lib");
    Map<String, byte[]> files = new LinkedHashMap<>();
    for (String name :
        List.of(
            "libmanypy_jni.so",
            "libmanypy.so.0.3",
            "manypy/libmanypy_interp.so",
            "manypy/libmanypy_hooks.so")) {
      files.put(name, Files.readAllBytes(lib.resolve(name)));
    }
    Path resources = tmp.resolve("resources");
    writeBundle(resources, PLATFORM, files, Map.of());
    Path cache = tmp.resolve("cache");
    TestSupport.ChildResult child =
        TestSupport.runChild(
            ProcessTest.env(ProcessTest.TUNABLES),
            List.of("-Djava.library.path=/nonexistent"),
            "load-bundled",
            resources.toString(),
            cache.toString());
    assertTrue(
        ProcessTest.resultLine(child).startsWith("RESULT served Tensor(float32, [2])"),
        child.output());
    Path dir;
    try (var dirs = Files.list(cache)) {
      dir = dirs.findFirst().orElseThrow();
    }
    for (String name : files.keySet()) {
      assertTrue(
          child.output().contains("MAPPED " + dir.resolve(name) + "\n"),
          name + " not mapped from " + dir + ":\n" + child.output());
    }
    assertNotEquals(-1, child.output().indexOf("MAPPED"), child.output());
    assertEquals(
        new String(files.get("libmanypy_jni.so"), StandardCharsets.ISO_8859_1),
        Files.readString(dir.resolve("libmanypy_jni.so"), StandardCharsets.ISO_8859_1));
  }
}
