package org.manypy.consumer;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.manypy.LibraryLoadException;
import org.manypy.Manypy;
import org.manypy.Pool;
import org.manypy.PoolOptions;
import org.manypy.ReplicatedObject;
import org.manypy.Tensor;
import org.manypy.TorchPackage;

/**
 * Serves seed_example.pt (two conv + ReLU) from a pool of 2 interpreters and several threads, and
 * checks every output against the expected one. Prints the time from the JVM's start to the first
 * served request and the manypy libraries the process mapped, for run.sh.
 *
 * <p>usage: ServeSeed model.pt expected.out.bin [threads] [calls per thread] Exit 0: every output
 * matched; 1: a mismatch; 2: manypy failed (message printed).
 */
public final class ServeSeed {
  static final long[] OUTPUT_SHAPE = {1, 64, 2, 2};
  static final double TOLERANCE = 1e-4;

  public static void main(String[] args) throws Exception {
    if (args.length < 2) {
      System.err.println(
          "usage: ServeSeed <model.pt> <expected.out.bin> [threads] [calls per thread]");
      System.exit(64);
    }
    Path model = Path.of(args[0]);
    float[] expected = readFloats(Path.of(args[1]));
    int threads = args.length > 2 ? Integer.parseInt(args[2]) : 4;
    int calls = args.length > 3 ? Integer.parseInt(args[3]) : 8;
    try {
      System.exit(serve(model, expected, threads, calls));
    } catch (LibraryLoadException e) {
      System.out.println("LOAD FAILED: " + e.getMessage());
      System.exit(2);
    }
  }

  static int serve(Path model, float[] expected, int threads, int calls) throws Exception {
    // Loading the natives on its own (extraction, digests, dlopen), then the
    // pool (interpreters importing torch), which dominates the first request.
    long loadStart = System.nanoTime();
    String library = Manypy.libraryVersion();
    System.out.println("natives loaded in " + (System.nanoTime() - loadStart) / 1_000_000 + " ms");
    try (Pool pool = Pool.create(new PoolOptions().interpreters(2));
        TorchPackage pkg = pool.loadPackage(model);
        ReplicatedObject seed = pkg.loadPickle("model", "model.pkl")) {
      // The first request, timed from the JVM's start: what a service waits
      // for before it can answer.
      String first = check(seed, expected);
      Duration sinceStart =
          Duration.between(
              ProcessHandle.current().info().startInstant().orElseThrow(), Instant.now());
      System.out.println(
          "first request served " + sinceStart.toMillis() + " ms after the JVM started");
      if (first != null) {
        System.out.println("FAIL: first call: " + first);
        return 1;
      }
      System.out.println("manypy " + Manypy.version() + ", libmanypy " + library);
      for (String line : Files.readAllLines(Path.of("/proc/self/maps"))) {
        int at = line.indexOf('/');
        if (at >= 0 && line.contains("libmanypy") && line.contains("r-xp")) {
          System.out.println("mapped " + line.substring(at));
        }
      }

      ExecutorService executor = Executors.newFixedThreadPool(threads);
      List<Future<String>> results = new ArrayList<>();
      for (int t = 0; t < threads; ++t) {
        results.add(
            executor.submit(
                () -> {
                  for (int i = 0; i < calls; ++i) {
                    String problem = check(seed, expected);
                    if (problem != null) return "call " + i + ": " + problem;
                  }
                  return null;
                }));
      }
      int failed = 0;
      for (int t = 0; t < threads; ++t) {
        String problem = results.get(t).get();
        if (problem != null) {
          System.out.println("FAIL: thread " + t + ", " + problem);
          ++failed;
        }
      }
      executor.shutdown();
      if (failed > 0) return 1;
      System.out.println(
          "served "
              + (1 + threads * calls)
              + " calls ("
              + threads
              + " threads x "
              + calls
              + " + 1) from a pool of 2 interpreters: every output matched within "
              + TOLERANCE);
      return 0;
    }
  }

  /**
   * One call on torch.ones(1, 1, 10, 10); null if the output is the expected one, else what
   * differs.
   */
  static String check(ReplicatedObject seed, float[] expected) {
    float[] ones = new float[100];
    Arrays.fill(ones, 1f);
    try (Tensor x = Tensor.of(ones, 1, 1, 10, 10);
        Tensor y = (Tensor) seed.call(x)) {
      if (!Arrays.equals(y.shape(), OUTPUT_SHAPE)) {
        return "shape "
            + Arrays.toString(y.shape())
            + ", expected "
            + Arrays.toString(OUTPUT_SHAPE);
      }
      float[] got = y.toFloatArray();
      for (int i = 0; i < expected.length; ++i) {
        if (Math.abs(got[i] - expected[i]) > TOLERANCE + TOLERANCE * Math.abs(expected[i])) {
          return "element " + i + " is " + got[i] + ", expected " + expected[i];
        }
      }
      return null;
    }
  }

  static float[] readFloats(Path file) throws IOException {
    ByteBuffer bytes = ByteBuffer.wrap(Files.readAllBytes(file)).order(ByteOrder.LITTLE_ENDIAN);
    float[] out = new float[bytes.remaining() / 4];
    bytes.asFloatBuffer().get(out);
    if (out.length != 256)
      throw new IOException(file + " holds " + out.length + " floats, expected 256");
    return out;
  }
}
