package org.manypy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.manypy.internal.ManypyNativeConstants;

/**
 * What happens to a whole JVM: loading the library (missing, mismatched), starting without the
 * static TLS setting, exiting with live pools. Each case runs in a child JVM.
 */
// The quick tier leaves it out: child JVMs, each starting interpreters (about 110 s).
@Tag("slow")
class ProcessTest {
  static final String TUNABLES = "glibc.rtld.optional_static_tls=16384";

  static Map<String, String> env(String tunables) {
    Map<String, String> env = new HashMap<>();
    env.put("GLIBC_TUNABLES", tunables);
    return env;
  }

  static String libraryPath() {
    return "-Djava.library.path=" + TestSupport.buildDir().resolve("lib");
  }

  static String resultLine(TestSupport.ChildResult child) {
    return child
        .output()
        .lines()
        .filter(l -> l.startsWith("RESULT "))
        .findFirst()
        .orElseThrow(() -> new AssertionError("no RESULT line; output:\n" + child.output()));
  }

  @Test
  void versionsAgree() {
    assertEquals(Manypy.version(), Manypy.libraryVersion());
    // While the major is 0, the minor is the ABI: any patch, nothing else.
    assertTrue(NativeLibrary.compatible(200, 200));
    assertTrue(NativeLibrary.compatible(200, 203)); // another patch: same ABI
    assertFalse(NativeLibrary.compatible(200, 100)); // older minor
    assertFalse(NativeLibrary.compatible(200, 300)); // newer minor: another ABI too
    assertFalse(NativeLibrary.compatible(200, 10200)); // another major
    // From 1.0 on, the major is the ABI: a newer minor has all of an older one.
    assertTrue(NativeLibrary.compatible(10100, 10305));
    assertFalse(NativeLibrary.compatible(10300, 10100));
    assertFalse(NativeLibrary.compatible(10100, 20100));
    assertEquals("0.2.x", NativeLibrary.abi(200));
  }

  @Test
  void aMissingLibraryIsAClearError() throws Exception {
    TestSupport.ChildResult child =
        TestSupport.runChild(env(TUNABLES), List.of("-Dmanypy.library.path=/no/such/dir"), "load");
    String line = resultLine(child);
    assertTrue(line.startsWith("RESULT load-failed manypy: could not load /no/such/dir"), line);
    assertTrue(line.contains("-Djava.library.path"), line);
    assertEquals(0, child.exitCode());
  }

  @Test
  void anExplicitPathNeedsNoLibraryPath() throws Exception {
    // The directory, and the file itself, with java.library.path left empty.
    Path lib = TestSupport.buildDir().resolve("lib");
    for (Path path : List.of(lib, lib.resolve("libmanypy_jni.so"))) {
      TestSupport.ChildResult child =
          TestSupport.runChild(
              env(TUNABLES),
              List.of("-Djava.library.path=/nonexistent", "-Dmanypy.library.path=" + path),
              "load");
      assertEquals("RESULT loaded " + Manypy.version(), resultLine(child), child.output());
    }
  }

  @Test
  void theNativePathPropertyAndEnvironmentVariableNeedNoLibraryPath() throws Exception {
    Path lib = TestSupport.buildDir().resolve("lib");
    TestSupport.ChildResult byProperty =
        TestSupport.runChild(
            env(TUNABLES),
            List.of("-Djava.library.path=/nonexistent", "-Dmanypy.native.path=" + lib),
            "load");
    assertEquals("RESULT loaded " + Manypy.version(), resultLine(byProperty), byProperty.output());
    Map<String, String> env = env(TUNABLES);
    env.put("MANYPY_NATIVE_PATH", lib.resolve("libmanypy_jni.so").toString());
    TestSupport.ChildResult byEnv =
        TestSupport.runChild(env, List.of("-Djava.library.path=/nonexistent"), "load");
    assertEquals("RESULT loaded " + Manypy.version(), resultLine(byEnv), byEnv.output());
    // The property wins over the environment.
    env.put("MANYPY_NATIVE_PATH", lib.toString());
    TestSupport.ChildResult both =
        TestSupport.runChild(
            env,
            List.of("-Djava.library.path=/nonexistent", "-Dmanypy.native.path=/no/such/dir"),
            "load");
    assertTrue(
        resultLine(both).startsWith("RESULT load-failed manypy: could not load /no/such/dir"),
        both.output());
  }

  @Test
  void aJarWithoutNativesSaysWhereToGetThem() throws Exception {
    TestSupport.ChildResult child =
        TestSupport.runChild(env(TUNABLES), List.of("-Djava.library.path=/nonexistent"), "load");
    String line = resultLine(child);
    assertTrue(line.contains("this jar carries no native libraries"), line);
    assertTrue(line.contains("libmanypy-java"), line);
    assertTrue(line.contains("org.manypy:manypy"), line);
  }

  @Test
  void aMismatchedLibraryIsRefusedAtLoad() throws Exception {
    // A libmanypy.so that says it is 1.0.0 (java/src/test/native), found
    // first through LD_LIBRARY_PATH.
    Path fake = TestSupport.buildDir().resolve("fake-manypy");
    assertTrue(Files.exists(fake.resolve("libmanypy.so")), "build the manypy_fake_version target");
    Map<String, String> env = env(TUNABLES);
    env.put("LD_LIBRARY_PATH", fake.toString());
    TestSupport.ChildResult child = TestSupport.runChild(env, List.of(libraryPath()), "load");
    String line = resultLine(child);
    assertTrue(
        line.contains(
            "libmanypy.so is version 1.0.0 but this jar needs "
                + NativeLibrary.abi(ManypyNativeConstants.MANYPY_VERSION_NUMBER)),
        line);
  }

  @Test
  void withoutTheTunableTheErrorSaysHowToStartTheJvm() throws Exception {
    TestSupport.ChildResult child =
        TestSupport.runChild(env(null), List.of(libraryPath()), "static-tls");
    String line = resultLine(child);
    assertTrue(line.startsWith("RESULT static-tls after "), child.output());
    assertTrue(line.contains("GLIBC_TUNABLES=glibc.rtld.optional_static_tls=16384"), line);
    int started = Integer.parseInt(line.split(" ")[3].replace(":", ""));
    assertTrue(started >= 1 && started < Manypy.maxInterpreters(), line);
    assertEquals(0, child.exitCode(), child.output());
  }

  /**
   * A serve-early pool whose interpreters past glibc's default static TLS fail to start in the
   * background (ChildMain.interpreterFailed): its callback is told of each, with a
   * StaticTlsException, on a daemon manypy-native thread; the callback's exception goes to the
   * error handler and the JVM lives; each failed interpreter is broken and says why; the pool
   * serves on the others and closes.
   */
  @Test
  void aServeEarlyPoolTellsItsCallbackOfInterpretersThatFailToStart() throws Exception {
    TestSupport.ChildResult child =
        TestSupport.runChild(
            env(null), List.of(libraryPath(), "-Xcheck:jni"), "interpreter-failed");
    assertEquals(0, child.exitCode(), child.output());
    String line = resultLine(child);
    System.out.println("interpreter-failed child: " + line);
    Map<String, String> fields = new HashMap<>();
    for (String field : line.substring("RESULT ".length()).split(" (?=\\w+=)")) {
      fields.put(field.substring(0, field.indexOf('=')), field.substring(field.indexOf('=') + 1));
    }
    int n = Integer.parseInt(fields.get("interpreters"));
    int broken = Integer.parseInt(fields.get("broken"));
    assertEquals("42", fields.get("served"), line);
    assertEquals("0", fields.get("starting"), line);
    // 15 interpreters are more than glibc's default static TLS holds on any torch.
    assertTrue(broken > 0, "nothing failed to start: " + line);
    assertEquals(n, broken + Integer.parseInt(fields.get("up")), line);
    List<String> told = List.of(fields.get("told").replaceAll("^\\[|\\]$", "").split(", "));
    assertEquals(broken, told.size(), line);
    assertEquals(String.valueOf(broken), fields.get("reported"), line);
    StringBuilder expected = new StringBuilder();
    for (String report : told) {
      String[] parts = report.split(":");
      assertEquals(
          List.of("STATIC_TLS", "manypy-native", "true"),
          List.of(parts[1], parts[2], parts[3]),
          line);
      int index = Integer.parseInt(parts[0]);
      assertTrue(index >= 1 && index < n, line);
      expected.append(expected.length() == 0 ? "" : ",").append(index).append(":static-tls");
    }
    // Each failed interpreter is broken, and checkInterpreter says why.
    List<String> checked = List.of(fields.get("checked").split(","));
    assertEquals(
        java.util.Set.copyOf(List.of(expected.toString().split(","))),
        java.util.Set.copyOf(checked),
        line);
  }

  /**
   * The native pool holds its interpreter-failed callback for as long as it lives, Java handles or
   * not (ChildMain.interpreterFailedAfterClose): a pool closed at once while 150 asynchronous calls
   * hold it grows for them, and the interpreters past glibc's default static TLS, which fail to
   * start after the close, are still told; every call succeeds, and once the last one is done the
   * callback is released.
   */
  @Test
  void failuresAfterThePoolIsClosedAreStillTold() throws Exception {
    TestSupport.ChildResult child =
        TestSupport.runChild(
            env(null), List.of(libraryPath(), "-Xcheck:jni"), "interpreter-failed-after-close");
    assertEquals(0, child.exitCode(), child.output());
    String line = resultLine(child);
    System.out.println("interpreter-failed-after-close child: " + line);
    Map<String, String> fields = new HashMap<>();
    for (String field : line.substring("RESULT ".length()).split(" (?=\\w+=)")) {
      fields.put(field.substring(0, field.indexOf('=')), field.substring(field.indexOf('=') + 1));
    }
    int n = Integer.parseInt(fields.get("interpreters"));
    assertEquals(
        "1", fields.get("heldAfterClose"), "the calls hold the pool, and so the callback: " + line);
    assertEquals("150", fields.get("ok"), line);
    assertEquals("0", fields.get("heldAtEnd"), "released with the pool's last call: " + line);
    String told = fields.get("told").replaceAll("^\\[|\\]$", "");
    if (told.isEmpty()) {
      // The pool grows one interpreter at a time while calls wait: it may end its calls before
      // growing past glibc's default static TLS room (5 on torch 1.13, 14 on torch 2.x).
      Assumptions.abort("the pool did not grow past glibc's default static TLS room: " + line);
    }
    for (String report : told.split(", ")) {
      String[] parts = report.split(":");
      int index = Integer.parseInt(parts[0]);
      assertTrue(index >= 1 && index < n, line);
      assertEquals(List.of("STATIC_TLS", "after-close"), List.of(parts[1], parts[2]), line);
    }
  }

  @Test
  void theJvmExitsCleanlyWithLivePools() throws Exception {
    TestSupport.ChildResult child =
        TestSupport.runChild(env(TUNABLES), List.of(libraryPath(), "-Xcheck:jni"), "exit-live");
    assertTrue(resultLine(child).startsWith("RESULT served Tensor(float32, [2])"), child.output());
    assertEquals(0, child.exitCode(), child.output());
  }

  @Test
  void theJvmExitsCleanlyWithAsynchronousCallsInFlight() throws Exception {
    // Two calls that never return running, 200 queued: the JVM's exit does
    // not wait for them, and their completions (which would enter Java on
    // daemon threads) never come.
    TestSupport.ChildResult child =
        TestSupport.runChild(env(TUNABLES), List.of(libraryPath(), "-Xcheck:jni"), "exit-async");
    String line = resultLine(child);
    assertTrue(line.startsWith("RESULT served Tensor(float32, [2]), in flight "), child.output());
    // 202, or 203 while the first call's completion was still finishing.
    assertTrue(Long.parseLong(line.substring(line.lastIndexOf(' ') + 1)) >= 202, line);
    assertEquals(0, child.exitCode(), child.output());
  }
}
