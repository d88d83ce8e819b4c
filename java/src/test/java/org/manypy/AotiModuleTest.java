package org.manypy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;
import org.junit.jupiter.api.io.TempDir;

/**
 * AOTInductor packages (.pt2) on the host: {@link AotiModule} and {@link Archives#saveCopy} on a
 * package.
 *
 * <p>Where manypy runs them (built against torch 2.6 or newer, which is where the build compiles
 * the sample packages: archives/python_heavy.pt2 exists), the sample packages against their
 * expected outputs, from a file and from bytes; the metadata; arguments that do not fit, each with
 * its exception; every doctored package of archives/malformed with its exception; a trust given to
 * the load; many threads; deadlines and tokens; asynchronous calls with the module closed behind
 * them; a close racing calls on other threads; the one operator record per call; a copy with extra
 * files that loads and computes as the original. Elsewhere (torch 1.13), {@link
 * #everyLoadIsRefusedWithoutAotInductor}: every load throws {@link UnsupportedVersionException}
 * naming the torch needed. The host trust is in HostTrustTest (process-wide, so in a JVM of its
 * own).
 */
class AotiModuleTest {
  static final boolean AOTI = Files.exists(TestSupport.archive("python_heavy.pt2"));
  static final double TOLERANCE = 1e-4;
  static final String NO_AOTI =
      "no AOTInductor in this build (torch 1.13): everyLoadIsRefusedWithoutAotInductor runs instead";

  static float[] input; // python_heavy.input.bin, [4, 64]
  static float[] logits; // [4, 10]
  static float[] norm; // [4]
  static AotiModule heavy; // python_heavy.pt2, shared by the tests

  @TempDir Path dir;

  @BeforeAll
  static void load() {
    if (!AOTI) return;
    input = TestSupport.floats("python_heavy.input.bin");
    logits = TestSupport.floats("python_heavy_pt2.expected.logits.bin");
    norm = TestSupport.floats("python_heavy_pt2.expected.norm.bin");
    heavy = AotiModule.load(TestSupport.archive("python_heavy.pt2"));
  }

  @AfterAll
  static void close() {
    if (heavy != null) heavy.close();
  }

  @AfterEach
  void everyCompletionArrived() {
    Manypy.setExportHook(null);
    TestSupport.await(() -> TestSupport.pendingAsync() == 0, "every native completion");
  }

  static String sha256(Path file) throws Exception {
    return HexFormat.of()
        .formatHex(MessageDigest.getInstance("SHA-256").digest(Files.readAllBytes(file)));
  }

  static Tensor heavyInput() {
    return Tensor.of(input, 4, 64);
  }

  /**
   * Asserts a python_heavy.pt2 result, {"logits": [4, 10], "norm": [4]}, and closes its tensors.
   */
  static void checkHeavy(Object result, String what) {
    Map<?, ?> out = assertInstanceOf(Map.class, result, what);
    try {
      assertEquals(List.of("logits", "norm"), new ArrayList<>(out.keySet()), what);
      Tensor l = (Tensor) out.get("logits");
      Tensor n = (Tensor) out.get("norm");
      assertEquals(DType.FLOAT32, l.dtype(), what);
      assertArrayEquals(new long[] {4, 10}, l.shape(), what);
      assertArrayEquals(new long[] {4}, n.shape(), what);
      float diff =
          Math.max(
              TestSupport.maxAbsDiff(logits, l.toFloatArray()),
              TestSupport.maxAbsDiff(norm, n.toFloatArray()));
      assertTrue(diff <= TOLERANCE, what + ": max |diff| " + diff);
    } finally {
      Values.closeTensors(result);
    }
  }

  /** Whether a python_heavy.pt2 result is right, without asserting (for threads). */
  static boolean heavyOk(Object result) {
    try {
      if (!(result instanceof Map<?, ?> out)
          || !(out.get("logits") instanceof Tensor l)
          || !(out.get("norm") instanceof Tensor n)) {
        return false;
      }
      return TestSupport.maxAbsDiff(logits, l.toFloatArray()) <= TOLERANCE
          && TestSupport.maxAbsDiff(norm, n.toFloatArray()) <= TOLERANCE;
    } finally {
      Values.closeTensors(result);
    }
  }

  static void callHeavyAndCheck(AotiModule module, String what) {
    try (Tensor x = heavyInput()) {
      checkHeavy(module.call(x), what);
    }
  }

  // ---- torch 1.13: refused --------------------------------------------------------------

  @Test
  void everyLoadIsRefusedWithoutAotInductor() throws Exception {
    assumeFalse(AOTI, "manypy runs AOTInductor packages here: the other tests check them");
    Path script = TestSupport.archive("python_heavy_script.pt");
    byte[] zipHeader = {'P', 'K', 3, 4};
    List<Executable> loads =
        List.of(
            () -> AotiModule.load(script).close(),
            () -> AotiModule.load(Files.readAllBytes(script)).close(),
            () -> AotiModule.load(zipHeader).close(),
            () -> AotiModule.load(script, ArchiveTrust.NONE).close(),
            () -> AotiModule.load(zipHeader, ArchiveTrust.NONE).close());
    for (Executable load : loads) {
      UnsupportedVersionException e =
          ErrorsTest.expect(
              UnsupportedVersionException.class,
              ErrorCode.UNSUPPORTED_VERSION,
              "torch 2.6 or newer",
              load);
      assertTrue(e.getMessage().contains("built against torch 1."), e.getMessage());
    }
  }

  // ---- torch 2.6 and newer: real packages -----------------------------------------------

  @Test
  void pythonHeavyMatchesItsExpectedOutputs() {
    assumeTrue(AOTI, NO_AOTI);
    callHeavyAndCheck(heavy, "python_heavy.pt2");
    // Again: nothing of the first call stays behind.
    callHeavyAndCheck(heavy, "python_heavy.pt2, again");
    // The general form, with empty kwargs and no options.
    try (Tensor x = heavyInput()) {
      checkHeavy(heavy.call(List.of(x), Map.of(), null), "python_heavy.pt2, general form");
    }
  }

  @Test
  void resnet18FromBytes() throws Exception {
    assumeTrue(AOTI, NO_AOTI);
    byte[] bytes = Files.readAllBytes(TestSupport.archive("resnet18.pt2"));
    try (AotiModule module = AotiModule.load(bytes)) {
      // The bytes were copied: the caller's array may change at once.
      Arrays.fill(bytes, (byte) 0);
      float[] expected = TestSupport.floats("resnet18_pt2.expected.out.bin");
      try (Tensor x = Tensor.of(TestSupport.floats("resnet18.input.bin"), 1, 3, 224, 224);
          Tensor y = (Tensor) module.call(x)) {
        assertArrayEquals(new long[] {1, 1000}, y.shape());
        float diff = TestSupport.maxAbsDiff(expected, y.toFloatArray());
        assertTrue(diff <= TOLERANCE, "resnet18.pt2: max |diff| " + diff);
      }
    }
  }

  @Test
  void metadataIsWhatAotInductorRecorded() {
    assumeTrue(AOTI, NO_AOTI);
    Map<String, String> metadata = heavy.metadata();
    assertEquals("cpu", metadata.get("AOTI_DEVICE_KEY"), metadata.toString());
    assertThrows(UnsupportedOperationException.class, () -> metadata.put("x", "y"));
  }

  @Test
  void argumentsThatDoNotFitAreRefused() {
    assumeTrue(AOTI, NO_AOTI);
    try (Tensor x = heavyInput();
        Tensor three = Tensor.of(Arrays.copyOf(input, 3 * 64), 3, 64);
        Tensor wide = Tensor.of(new double[4 * 64], 4, 64)) {
      ErrorsTest.expect(
          InvalidArgumentException.class,
          ErrorCode.INVALID_ARGUMENT,
          "takes 1 positional arguments (Tensor,), not 2",
          () -> heavy.call(x, x));
      ErrorsTest.expect(
          InvalidArgumentException.class, ErrorCode.INVALID_ARGUMENT, "not 0", () -> heavy.call());
      ErrorsTest.expect(
          WrongKindException.class,
          ErrorCode.WRONG_KIND,
          "args[0] must be a tensor",
          () -> heavy.call("x"));
      ErrorsTest.expect(
          InvalidArgumentException.class,
          ErrorCode.INVALID_ARGUMENT,
          "'steps', which the model does not take",
          () -> heavy.call(List.of(x), Map.of("steps", x), null));
      ErrorsTest.expect(
          BadTensorException.class,
          ErrorCode.BAD_TENSOR,
          "unmatched dim value at 0",
          () -> heavy.call(three));
      ErrorsTest.expect(
          BadTensorException.class,
          ErrorCode.BAD_TENSOR,
          "unmatched dtype",
          () -> heavy.call(wide));
      // Asynchronously: refused at submission, thrown there, nothing left pending.
      long pending = TestSupport.pendingAsync();
      ErrorsTest.expect(
          InvalidArgumentException.class,
          ErrorCode.INVALID_ARGUMENT,
          "not 2",
          () -> heavy.callAsync(x, x));
      ErrorsTest.expect(
          WrongKindException.class,
          ErrorCode.WRONG_KIND,
          "must be a tensor",
          () -> heavy.callAsync(List.of(7L), null, null));
      assertEquals(pending, TestSupport.pendingAsync());
      // Java-side misuse, before C: a value Java cannot pass, a null executor.
      assertThrows(IllegalArgumentException.class, () -> heavy.call(new Object()));
      assertThrows(
          IllegalArgumentException.class, () -> heavy.callAsync(List.of(x), null, null, null));
    }
    callHeavyAndCheck(heavy, "python_heavy.pt2 after refused calls");
  }

  record Doctored(String file, Class<? extends ManypyException> type, String message) {}

  @Test
  void doctoredPackagesAreRefusedPrecisely() {
    assumeTrue(AOTI, NO_AOTI);
    List<Doctored> cases =
        List.of(
            new Doctored("malformed/truncated.pt2", BadArchiveException.class, "truncated.pt2"),
            new Doctored(
                "malformed/no_library.pt2",
                NotAPackageException.class,
                "is not an AOTInductor package"),
            new Doctored(
                "malformed/bad_library.pt2",
                BadArchiveException.class,
                "is cut short: its segment"),
            new Doctored("malformed/missing_dependency.pt2", LoaderException.class, "libtorcx.so"),
            new Doctored(
                "malformed/cuda_device.pt2",
                UnsupportedVersionException.class,
                "compiled for device 'cuda'"),
            new Doctored(
                "malformed/other_machine.pt2",
                UnsupportedVersionException.class,
                "compiled for aarch64 CPUs; this host is x86_64"),
            new Doctored(
                "malformed/aarch64_library.pt2",
                UnsupportedVersionException.class,
                "was compiled for aarch64; this host is x86_64"),
            new Doctored(
                "malformed/newer_torch.pt2", LoaderException.class, "aoti_torch_get_dtypf"),
            new Doctored(
                "malformed/exported_only.pt2",
                NotAPackageException.class,
                "holds an exported program but no AOTInductor-compiled model"),
            new Doctored(
                "python_heavy_script.pt", NotAPackageException.class, "manypy_script_load_file"));
    for (Doctored c : cases) {
      ManypyException e =
          assertThrows(
              c.type(), () -> AotiModule.load(TestSupport.archive(c.file())).close(), c.file());
      assertTrue(e.getMessage().contains(c.message()), c.file() + ": " + e.getMessage());
    }
    ErrorsTest.expect(
        NotFoundException.class,
        ErrorCode.NOT_FOUND,
        "",
        () -> AotiModule.load(dir.resolve("absent.pt2")).close());
    callHeavyAndCheck(heavy, "python_heavy.pt2 after doctored packages");
  }

  @Test
  void aTrustGivenToTheLoadIsChecked() throws Exception {
    assumeTrue(AOTI, NO_AOTI);
    Path path = TestSupport.archive("python_heavy.pt2");
    String digest = sha256(path);
    byte[] bytes = Files.readAllBytes(path);
    ArchiveTrust other = ArchiveTrust.ofSha256("0".repeat(64));
    UntrustedArchiveException e =
        assertThrows(UntrustedArchiveException.class, () -> AotiModule.load(path, other));
    assertTrue(e.getMessage().contains(digest), e.getMessage());
    e = assertThrows(UntrustedArchiveException.class, () -> AotiModule.load(bytes, other));
    assertTrue(e.getMessage().contains(digest), e.getMessage());

    try (AotiModule module = AotiModule.load(path, ArchiveTrust.ofSha256(digest))) {
      callHeavyAndCheck(module, "python_heavy.pt2 loaded with its digest listed");
    }
    ArchiveTrust upper = ArchiveTrust.ofSha256(digest.toUpperCase(Locale.ROOT));
    try (AotiModule module = AotiModule.load(bytes, upper)) {
      callHeavyAndCheck(module, "python_heavy.pt2 from bytes with its digest listed");
    }
    // A verifier is asked about what is not listed, with the path or "<bytes>".
    List<String> asked = new ArrayList<>();
    ArchiveTrust byVerifier =
        other.withVerifier(
            (sha256, origin) -> {
              synchronized (asked) {
                asked.add(HexFormat.of().formatHex(sha256) + " " + origin);
              }
              return origin.endsWith("python_heavy.pt2");
            });
    AotiModule.load(path, byVerifier).close();
    assertThrows(UntrustedArchiveException.class, () -> AotiModule.load(bytes, byVerifier));
    assertEquals(List.of(digest + " " + path, digest + " <bytes>"), asked);

    ErrorsTest.expect(
        InvalidArgumentException.class,
        ErrorCode.INVALID_ARGUMENT,
        "",
        () -> AotiModule.load(path, ArchiveTrust.ofSha256("not a digest")));
    assertThrows(IllegalArgumentException.class, () -> AotiModule.load(path, null));
    assertThrows(IllegalArgumentException.class, () -> AotiModule.load(bytes, null));
  }

  @Test
  void manyThreadsShareOneModule() throws Exception {
    assumeTrue(AOTI, NO_AOTI);
    int threads = 6;
    int calls = 50;
    AtomicInteger good = new AtomicInteger();
    ConcurrentLinkedQueue<Throwable> errors = new ConcurrentLinkedQueue<>();
    List<Thread> started = new ArrayList<>();
    try (Tensor x = heavyInput()) { // one Tensor, an argument of every call at once
      for (int t = 0; t < threads; ++t) {
        Thread thread =
            new Thread(
                () -> {
                  for (int k = 0; k < calls; ++k) {
                    try {
                      if (heavyOk(heavy.call(x))) good.incrementAndGet();
                    } catch (Throwable error) {
                      errors.add(error);
                    }
                  }
                });
        thread.start();
        started.add(thread);
      }
      for (Thread thread : started) thread.join();
    }
    assertTrue(errors.isEmpty(), errors.toString());
    assertEquals(threads * calls, good.get());
  }

  @Test
  void deadlinesAreCheckedBeforeTheModelStarts() {
    assumeTrue(AOTI, NO_AOTI);
    try (Tensor x = heavyInput()) {
      // A deadline already past: refused before the model starts.
      try (CallOptions past = new CallOptions().deadlineNanos(1)) {
        ErrorsTest.expect(
            DeadlineExceededException.class,
            ErrorCode.DEADLINE_EXCEEDED,
            "before",
            () -> heavy.call(List.of(x), null, past));
      }
      // A token cancelled before the call.
      try (CancelToken token = new CancelToken();
          CallOptions cancelled = new CallOptions().cancelToken(token)) {
        token.cancel();
        assertThrows(CancelledException.class, () -> heavy.call(List.of(x), null, cancelled));
      }
      // One nanosecond passes while the model runs: its late result is dropped.
      try (CallOptions tiny = new CallOptions().timeout(Duration.ofNanos(1))) {
        assertThrows(DeadlineExceededException.class, () -> heavy.call(List.of(x), null, tiny));
      }
      // A generous timeout changes nothing; the interpreter index is ignored.
      try (CallOptions generous =
          new CallOptions().timeout(Duration.ofSeconds(60)).interpreter(3)) {
        checkHeavy(heavy.call(List.of(x), null, generous), "python_heavy.pt2 within a timeout");
      }
    }
  }

  @Test
  void asynchronousCallsOutliveTheirModule() {
    assumeTrue(AOTI, NO_AOTI);
    int calls = 20;
    AotiModule module = AotiModule.load(TestSupport.archive("python_heavy.pt2"));
    List<CompletableFuture<Object>> futures = new ArrayList<>();
    try (Tensor x = heavyInput()) {
      for (int k = 0; k < calls; ++k) futures.add(module.callAsync(x));
    }
    module.close(); // the calls hold the native module; they still run
    for (CompletableFuture<Object> future : futures) {
      checkHeavy(TestSupport.value(future), "an asynchronous call after close");
    }
    try (Tensor x = heavyInput()) {
      assertThrows(IllegalStateException.class, () -> module.callAsync(x));
      assertThrows(IllegalStateException.class, () -> module.call(x));
      assertThrows(IllegalStateException.class, module::metadata);
      // Options and an executor of the caller's; a deadline past fails the future or is
      // refused at submission, never a result.
      try (CallOptions options = new CallOptions().context("heavy-pt2", "async")) {
        checkHeavy(
            TestSupport.value(heavy.callAsync(List.of(x), null, options, Runnable::run)),
            "an asynchronous call with options");
      }
      try (CallOptions past = new CallOptions().deadlineNanos(1)) {
        Throwable why;
        try {
          why = TestSupport.failure(heavy.callAsync(List.of(x), null, past));
        } catch (DeadlineExceededException refused) {
          why = refused;
        }
        assertInstanceOf(DeadlineExceededException.class, why);
      }
    }
    module.close(); // idempotent
  }

  @Test
  void aCloseRacingCallsFreesTheModuleAfterThem() throws Exception {
    assumeTrue(AOTI, NO_AOTI);
    AotiModule module = AotiModule.load(TestSupport.archive("python_heavy.pt2"));
    int threads = 4;
    AtomicInteger good = new AtomicInteger();
    AtomicInteger refused = new AtomicInteger();
    ConcurrentLinkedQueue<Throwable> errors = new ConcurrentLinkedQueue<>();
    CountDownLatch running = new CountDownLatch(threads);
    List<Thread> started = new ArrayList<>();
    try (Tensor x = heavyInput()) {
      // Each thread calls until the close refuses it: the calls in flight when it comes
      // return their right results, and the next one throws IllegalStateException.
      for (int t = 0; t < threads; ++t) {
        Thread thread =
            new Thread(
                () -> {
                  for (int k = 0; ; ++k) {
                    try {
                      if (heavyOk(module.call(x))) good.incrementAndGet();
                      else errors.add(new AssertionError("a wrong result"));
                    } catch (IllegalStateException closed) {
                      refused.incrementAndGet();
                      return;
                    } catch (Throwable error) {
                      errors.add(error);
                      return;
                    } finally {
                      if (k == 0) running.countDown();
                    }
                  }
                });
        thread.start();
        started.add(thread);
      }
      running.await(); // every thread has made a call and is making more
      module.close();
      for (Thread thread : started) thread.join();
    }
    assertTrue(errors.isEmpty(), errors.toString());
    assertEquals(threads, refused.get());
    assertTrue(good.get() >= threads, "calls that finished: " + good.get());
    assertTrue(module.isClosed());
    try (Tensor x = heavyInput()) {
      assertThrows(IllegalStateException.class, () -> module.call(x));
    }
    module.close(); // idempotent
  }

  @Test
  void operatorCallbacksSeeOneRecordPerCall() {
    assumeTrue(AOTI, NO_AOTI);
    List<OpEvent> events = new ArrayList<>();
    try (CallOptions options = new CallOptions().context("heavy-pt2", "req-7");
        Tensor x = heavyInput()) {
      try (OpCallbackRegistration registration =
          Manypy.addOpCallbacks(
              null,
              event -> {
                if (event.name().equals("manypy::aoti_run")) {
                  synchronized (events) {
                    events.add(event);
                  }
                }
              },
              1.0,
              true)) {
        for (int k = 0; k < 3; ++k) Values.closeTensors(heavy.call(List.of(x), null, options));
      }
    }
    assertEquals(3, events.size(), events.toString());
    for (OpEvent event : events) {
      assertEquals("heavy-pt2", event.modelId());
      assertEquals("req-7", event.requestId());
      assertEquals(-1, event.interpreter());
      assertEquals(1, event.inputs().size());
      assertArrayEquals(new long[] {4, 64}, event.inputs().get(0).shape());
      assertEquals(DType.FLOAT32, event.inputs().get(0).dtype());
    }
  }

  @Test
  void aCopyWithExtraFilesLoadsAsTheOriginal() {
    assumeTrue(AOTI, NO_AOTI);
    Manypy.setExportHook(() -> Map.of("producer_info.json", MetadataTest.PRODUCER));
    Path copy = dir.resolve("heavy_stamped.pt2");
    Archives.saveCopy(
        TestSupport.archive("python_heavy.pt2"),
        copy,
        Map.of("note.txt", "served by manypy", "raw.bin", new byte[] {0, 1, 2}));
    Manypy.setExportHook(null);
    assertEquals("served by manypy", MetadataTest.text(copy, "extra/note.txt"));
    assertArrayEquals(new byte[] {0, 1, 2}, Archives.readFile(copy, "extra/raw.bin"));
    assertEquals(MetadataTest.PRODUCER, MetadataTest.text(copy, "extra/producer_info.json"));
    List<String> records = Archives.listFiles(copy);
    assertTrue(
        records.containsAll(Archives.listFiles(TestSupport.archive("python_heavy.pt2"))),
        records.toString());
    try (AotiModule module = AotiModule.load(copy)) {
      callHeavyAndCheck(module, "the saved copy of python_heavy.pt2");
      assertEquals(heavy.metadata(), module.metadata());
    }
    assertEquals(
        "served by manypy",
        new String(Archives.readFile(copy, "extra/note.txt"), StandardCharsets.UTF_8));
  }
}
