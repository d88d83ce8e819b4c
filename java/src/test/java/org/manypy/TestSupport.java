package org.manypy;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BooleanSupplier;
import org.manypy.internal.ManypyNative;

/** Paths and helpers shared by the suites. */
final class TestSupport {
  private TestSupport() {}

  /** The CMake build directory (Maven passes -Dmanypy.build.dir). */
  static Path buildDir() {
    String dir = System.getProperty("manypy.build.dir");
    if (dir == null)
      throw new IllegalStateException("run with -Dmanypy.build.dir=<cmake build dir>");
    return Path.of(dir).toAbsolutePath().normalize();
  }

  /** A sample archive (samples/models/make_archives.py) in the build's archives/. */
  static Path archive(String name) {
    return buildDir().resolve("archives").resolve(name);
  }

  /**
   * The model (model/model.pkl) of a sample archive, loaded into `pool`; it keeps its package open.
   */
  static ReplicatedObject loadModel(Pool pool, String archive) {
    try (TorchPackage pkg = pool.loadPackage(archive(archive))) {
      return pkg.loadPickle("model", "model.pkl");
    }
  }

  /** A float32 little-endian file of the archives directory, e.g. resnet18.input.bin. */
  static float[] floats(String name) {
    try {
      ByteBuffer bytes =
          ByteBuffer.wrap(Files.readAllBytes(archive(name))).order(ByteOrder.LITTLE_ENDIAN);
      float[] out = new float[bytes.remaining() / 4];
      bytes.asFloatBuffer().get(out);
      return out;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  static float maxAbsDiff(float[] a, float[] b) {
    if (a.length != b.length) return Float.POSITIVE_INFINITY;
    float max = 0;
    for (int i = 0; i < a.length; ++i) max = Math.max(max, Math.abs(a[i] - b[i]));
    return max;
  }

  /** How long a test waits for what must happen before it calls it a hang. */
  static final long HANG_SECONDS = 120;

  /** Waits for `condition`, polling; fails after {@link #HANG_SECONDS} (a hang, not a timing). */
  static void await(BooleanSupplier condition, String what) {
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(HANG_SECONDS);
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > end) throw new AssertionError("never happened: " + what);
      try {
        Thread.sleep(2);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new AssertionError("interrupted while waiting for: " + what);
      }
    }
  }

  /** A future's value, failing the test if it failed or hangs. */
  static Object value(CompletableFuture<?> future) {
    try {
      return future.get(HANG_SECONDS, TimeUnit.SECONDS);
    } catch (ExecutionException e) {
      throw new AssertionError("the call failed: " + e.getCause(), e.getCause());
    } catch (InterruptedException | TimeoutException e) {
      throw new AssertionError("the call never completed", e);
    }
  }

  /** Why a future failed: the exception the call would have thrown; fails the test otherwise. */
  static Throwable failure(CompletableFuture<?> future) {
    try {
      Object value = future.get(HANG_SECONDS, TimeUnit.SECONDS);
      throw new AssertionError("the call succeeded with " + value);
    } catch (ExecutionException e) {
      return e.getCause();
    } catch (InterruptedException | TimeoutException e) {
      throw new AssertionError("the call never completed", e);
    }
  }

  /**
   * Asynchronous calls whose native completion has not yet finished (the glue's count). It drops
   * just after the completion hands the future to its executor, so it may lag a future that is
   * already complete: wait for it, never compare it at once.
   */
  static long pendingAsync() {
    return ManypyNative.manypy_jni_async_calls_pending();
  }

  /** The output of a child JVM, and its exit code. */
  record ChildResult(int exitCode, String output) {}

  /**
   * Runs ChildMain in a new JVM with the test classpath, `args`, and the environment changed by
   * `env` (a null value removes a variable).
   */
  static ChildResult runChild(Map<String, String> env, List<String> jvmOptions, String... args)
      throws IOException, InterruptedException {
    Path maven = buildDir().resolve("maven");
    String classpath = maven.resolve("test-classes") + ":" + maven.resolve("classes");
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.addAll(jvmOptions);
    command.add("-Dmanypy.build.dir=" + buildDir());
    command.add("-cp");
    command.add(classpath);
    command.add(ChildMain.class.getName());
    command.addAll(List.of(args));
    ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
    env.forEach(
        (k, v) -> {
          if (v == null) builder.environment().remove(k);
          else builder.environment().put(k, v);
        });
    Process process = builder.start();
    String output = new String(process.getInputStream().readAllBytes());
    if (!process.waitFor(5, TimeUnit.MINUTES)) {
      process.destroyForcibly();
      throw new AssertionError("child JVM did not finish:\n" + output);
    }
    return new ChildResult(process.exitValue(), output);
  }
}
