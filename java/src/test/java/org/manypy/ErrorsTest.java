package org.manypy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/**
 * Every failure reaches Java as the ManypyException subclass of its code, with the message, and the
 * Python type and traceback when Python raised.
 */
class ErrorsTest {
  static Pool pool;

  @BeforeAll
  static void start() {
    pool = Pool.create(1);
  }

  @AfterAll
  static void stop() {
    pool.close();
  }

  static <T extends ManypyException> T expect(
      Class<T> type, ErrorCode code, String inMessage, Executable call) {
    T e = assertThrows(type, call);
    assertEquals(code, e.code());
    assertTrue(e.getMessage().contains(inMessage), "message: " + e.getMessage());
    return e;
  }

  @Test
  void everyCodeHasItsExceptionClass() {
    Map<ErrorCode, Class<? extends ManypyException>> expected =
        Map.ofEntries(
            Map.entry(ErrorCode.INVALID_ARGUMENT, InvalidArgumentException.class),
            Map.entry(ErrorCode.OUT_OF_RANGE, OutOfRangeException.class),
            Map.entry(ErrorCode.PYTHON, PythonException.class),
            Map.entry(ErrorCode.SYNTAX, PythonSyntaxException.class),
            Map.entry(ErrorCode.UNSUPPORTED_TYPE, UnsupportedTypeException.class),
            Map.entry(ErrorCode.WRONG_KIND, WrongKindException.class),
            Map.entry(ErrorCode.STATIC_TLS, StaticTlsException.class),
            Map.entry(ErrorCode.RESOURCE_EXHAUSTED, ResourceExhaustedException.class),
            Map.entry(ErrorCode.LOADER, LoaderException.class),
            Map.entry(ErrorCode.INTERPRETER_BROKEN, InterpreterBrokenException.class),
            Map.entry(ErrorCode.INTERNAL, InternalException.class),
            Map.entry(ErrorCode.NOT_FOUND, NotFoundException.class),
            Map.entry(ErrorCode.BAD_ARCHIVE, BadArchiveException.class),
            Map.entry(ErrorCode.NOT_A_PACKAGE, NotAPackageException.class),
            Map.entry(ErrorCode.UNSUPPORTED_VERSION, UnsupportedVersionException.class),
            Map.entry(ErrorCode.MODULE_NOT_FOUND, ModuleNotFoundException.class),
            Map.entry(ErrorCode.BAD_TENSOR, BadTensorException.class),
            Map.entry(ErrorCode.NO_SUCH_NAME, NoSuchNameException.class),
            Map.entry(ErrorCode.DEADLINE_EXCEEDED, DeadlineExceededException.class),
            Map.entry(ErrorCode.CANCELLED, CancelledException.class),
            Map.entry(ErrorCode.UNTRUSTED_ARCHIVE, UntrustedArchiveException.class),
            Map.entry(ErrorCode.OVERLOADED, OverloadedException.class),
            Map.entry(ErrorCode.DRAINING, DrainingException.class));
    for (ErrorCode code : ErrorCode.values()) {
      if (code == ErrorCode.OK || code == ErrorCode.UNKNOWN) continue;
      ManypyException e = Status.of(code, "m", "", "");
      assertEquals(expected.get(code), e.getClass(), code.toString());
      // The Java constant is the C code's number: its name round-trips.
      assertEquals(
          "MANYPY_ERR_" + code.name(),
          org.manypy.internal.ManypyNative.manypy_code_name(code.value()));
    }
    assertEquals(ErrorCode.UNKNOWN, ErrorCode.of(999));
  }

  @Test
  void pythonErrorsCarryTypeAndTraceback() {
    PythonException e =
        expect(
            PythonException.class, ErrorCode.PYTHON, "ZeroDivisionError", () -> pool.eval("1 / 0"));
    assertEquals("ZeroDivisionError", e.pythonType());
    assertTrue(e.pythonTraceback().contains("Traceback"), e.pythonTraceback());
    // One line: the class, the code and the message; the traceback is not in it.
    assertEquals("org.manypy.PythonException [PYTHON]: " + e.getMessage(), e.toString());
    assertTrue(!e.getMessage().contains("\n") && !e.toString().contains("Traceback"), e.toString());
    // printStackTrace (and loggers, which print suppressed exceptions) show
    // the traceback, also when the exception is the cause of another.
    assertEquals(1, e.getSuppressed().length);
    assertInstanceOf(ManypyException.PythonTraceback.class, e.getSuppressed()[0]);
    StringWriter printed = new StringWriter();
    new IllegalStateException("request failed", e).printStackTrace(new PrintWriter(printed));
    assertTrue(printed.toString().contains("Suppressed: Python traceback:\n"), printed.toString());
    assertTrue(
        printed.toString().contains(e.pythonTraceback().lines().findFirst().orElseThrow()),
        printed.toString());
    assertTrue(printed.toString().contains("ZeroDivisionError"), printed.toString());
    // No traceback, nothing suppressed.
    OutOfRangeException range =
        assertThrows(OutOfRangeException.class, () -> pool.exec(5, "x = 1"));
    assertEquals(0, range.getSuppressed().length);
    assertEquals("", range.pythonTraceback());
    PythonSyntaxException syntax =
        expect(
            PythonSyntaxException.class,
            ErrorCode.SYNTAX,
            "SyntaxError",
            () -> pool.exec(0, "def (:"));
    assertEquals("SyntaxError", syntax.pythonType());
    assertInstanceOf(PythonException.class, syntax);
    expect(
        ModuleNotFoundException.class,
        ErrorCode.MODULE_NOT_FOUND,
        "no_such_module_xyz",
        () -> pool.exec(0, "import no_such_module_xyz"));
  }

  @Test
  void modelErrorsFromAPackagedModel() {
    try (TorchPackage pkg = pool.loadPackage(TestSupport.archive("python_heavy.pt"));
        ReplicatedObject model = pkg.loadPickle("model", "model.pkl")) {
      // A wrong input shape fails inside the model's own code.
      PythonException e =
          expect(
              PythonException.class,
              ErrorCode.PYTHON,
              "",
              () -> model.call(Tensor.of(new float[6], 2, 3)));
      assertTrue(e.pythonTraceback().contains("forward"), e.pythonTraceback());
      expect(
          PythonException.class,
          ErrorCode.PYTHON,
          "TypeError",
          () ->
              model.call(
                  null,
                  List.of(Tensor.of(new float[256], 4, 64)),
                  Map.of("no_such_kwarg", 1L),
                  null));
      expect(
          NoSuchNameException.class,
          ErrorCode.NO_SUCH_NAME,
          "no_such_method",
          () -> model.callMethod("no_such_method"));
      expect(
          NoSuchNameException.class,
          ErrorCode.NO_SUCH_NAME,
          "no_such_record",
          () -> pkg.readFile("no_such_record"));
      expect(
          NoSuchNameException.class,
          ErrorCode.NO_SUCH_NAME,
          "missing",
          () -> pkg.loadPickle("model", "missing.pkl"));
    }
  }

  @Test
  void malformedArchives() {
    expect(
        NotFoundException.class,
        ErrorCode.NOT_FOUND,
        "/no/such/model.pt",
        () -> pool.loadPackage(Path.of("/no/such/model.pt")));
    expect(
        NotFoundException.class,
        ErrorCode.NOT_FOUND,
        "/no/such/model.pt",
        () -> ScriptModule.load(Path.of("/no/such/model.pt")));
    expect(
        BadArchiveException.class,
        ErrorCode.BAD_ARCHIVE,
        "",
        () -> pool.loadPackage(TestSupport.archive("malformed/not_a_zip.pt")));
    expect(
        BadArchiveException.class,
        ErrorCode.BAD_ARCHIVE,
        "",
        () -> pool.loadPackage(TestSupport.archive("malformed/truncated.pt")));
    expect(
        BadArchiveException.class,
        ErrorCode.BAD_ARCHIVE,
        "",
        () -> pool.loadPackage(new byte[] {1, 2, 3}));
    expect(
        NotAPackageException.class,
        ErrorCode.NOT_A_PACKAGE,
        "",
        () -> pool.loadPackage(TestSupport.archive("malformed/plain.zip")));
    expect(
        NotAPackageException.class,
        ErrorCode.NOT_A_PACKAGE,
        "",
        () -> pool.loadPackage(TestSupport.archive("resnet18_script.pt")));
    expect(
        UnsupportedVersionException.class,
        ErrorCode.UNSUPPORTED_VERSION,
        "",
        () -> pool.loadPackage(TestSupport.archive("malformed/future_version.pt")));
    try (TorchPackage corrupt = pool.loadPackage(TestSupport.archive("malformed/corrupt.pt"))) {
      expect(
          BadArchiveException.class,
          ErrorCode.BAD_ARCHIVE,
          "",
          () -> corrupt.loadPickle("model", "model.pkl"));
    }
    try (TorchPackage missing =
        pool.loadPackage(TestSupport.archive("malformed/missing_extern.pt"))) {
      ModuleNotFoundException e =
          expect(
              ModuleNotFoundException.class,
              ErrorCode.MODULE_NOT_FOUND,
              "",
              () -> missing.loadPickle("model", "model.pkl"));
      assertEquals("ModuleNotFoundError", e.pythonType());
    }
  }

  @Test
  void badArgumentsAndRanges() {
    expect(OutOfRangeException.class, ErrorCode.OUT_OF_RANGE, "", () -> Pool.create(0));
    expect(OutOfRangeException.class, ErrorCode.OUT_OF_RANGE, "", () -> Pool.create(1000));
    expect(OutOfRangeException.class, ErrorCode.OUT_OF_RANGE, "", () -> pool.exec(7, "x = 1"));
    expect(
        OutOfRangeException.class,
        ErrorCode.OUT_OF_RANGE,
        "threads must be >= 1",
        () -> Pool.create(new PoolOptions().intraOpThreads(0)));
    // Refused by the options, before any interpreter is leased.
    expect(
        OutOfRangeException.class,
        ErrorCode.OUT_OF_RANGE,
        "grace_ns must be >= 0",
        () -> Pool.create(new PoolOptions().stopGrace(Duration.ofMillis(-1))));
    assertThrows(IllegalArgumentException.class, () -> new PoolOptions().stopGrace(null));
    expect(
        OutOfRangeException.class,
        ErrorCode.OUT_OF_RANGE,
        "queue limit -1 is negative",
        () -> Pool.create(new PoolOptions().queueLimit(-1)));
    expect(
        InvalidArgumentException.class,
        ErrorCode.INVALID_ARGUMENT,
        "",
        () -> Manypy.logApiUsage(""));
    expect(
        OutOfRangeException.class,
        ErrorCode.OUT_OF_RANGE,
        "sampling probability",
        () -> Profiler.start(0.0));
    expect(
        OutOfRangeException.class,
        ErrorCode.OUT_OF_RANGE,
        "",
        () -> new CallOptions().interpreter(-5));
    expect(
        NotFoundException.class,
        ErrorCode.NOT_FOUND,
        "",
        () -> Manypy.loadOperatorLibrary(Path.of("/no/such/libops.so")));
    expect(
        LoaderException.class,
        ErrorCode.LOADER,
        "",
        () -> Manypy.loadOperatorLibrary(TestSupport.archive("identity.json")));
  }

  @Test
  void aThreadWithASmallStackGetsAnErrorNotACrash() throws Exception {
    // A 160 KB thread stack overflowed inside torch and killed the JVM.
    Throwable[] thrown = new Throwable[1];
    Thread small =
        new Thread(
            null,
            () -> {
              try {
                pool.eval("1 + 1");
              } catch (Throwable e) {
                thrown[0] = e;
              }
            },
            "small-stack",
            160 * 1024);
    small.start();
    small.join();
    ResourceExhaustedException e = assertInstanceOf(ResourceExhaustedException.class, thrown[0]);
    assertTrue(
        e.getMessage().contains("KiB of stack left") && e.getMessage().contains("-Xss"),
        e.getMessage());
    assertEquals(2L, pool.eval("1 + 1")); // this thread's stack is fine
  }

  @Test
  void sixteenCallbackRegistrationsAtMost() {
    List<OpCallbackRegistration> registrations = new ArrayList<>();
    try {
      ResourceExhaustedException e =
          assertThrows(
              ResourceExhaustedException.class,
              () -> {
                for (int i = 0; i < 17; ++i) {
                  registrations.add(Manypy.addOpCallbacks(null, event -> {}, 0.5, false));
                }
              });
      assertEquals(ErrorCode.RESOURCE_EXHAUSTED, e.code());
      assertEquals(16, registrations.size());
    } finally {
      registrations.forEach(OpCallbackRegistration::close);
    }
    // The slots are free again.
    Manypy.addOpCallbacks(null, event -> {}, 0.5, false).close();
  }
}
