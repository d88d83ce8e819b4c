import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.manypy.Pool;
import org.manypy.ReplicatedObject;
import org.manypy.Tensor;
import org.manypy.TorchPackage;

/**
 * Serves a packaged Python model from a Java thread pool and prints the throughput with 1
 * interpreter (one GIL for all threads) and with N.
 *
 * <p>The model is the sample python_heavy.pt (samples/models): Python control flow around small
 * torch ops, the kind of model a shared GIL serializes. Every interpreter's output is first checked
 * against eager Python's.
 *
 * <p>Run it from the repository, after scripts/build.sh, as a single-file program (the JVM needs
 * the static TLS setting; see the README):
 *
 * <p>GLIBC_TUNABLES=glibc.rtld.optional_static_tls=16384 \ java -cp build/maven/manypy-0.3.0.jar
 * -Djava.library.path=build/lib \ samples/java/ServeModel.java [--archives DIR] [--threads T]
 * [--interpreters N] [--seconds S]
 *
 * <p>Exits 1 if an output is wrong or a call fails.
 */
public class ServeModel {
  static Path archives = Path.of("build/archives");
  static int threads = 2;
  static int interpreters = 2;
  static double seconds = 3;

  public static void main(String[] args) throws Exception {
    for (int i = 0; i < args.length; i += 2) {
      switch (args[i]) {
        case "--archives" -> archives = Path.of(args[i + 1]);
        case "--threads" -> threads = Integer.parseInt(args[i + 1]);
        case "--interpreters" -> interpreters = Integer.parseInt(args[i + 1]);
        case "--seconds" -> seconds = Double.parseDouble(args[i + 1]);
        default -> throw new IllegalArgumentException("unknown option " + args[i]);
      }
    }
    float[] input = floats("python_heavy.input.bin");
    float[] logits = floats("python_heavy.expected.logits.bin");
    Map<String, Object> kwargs = Map.of("steps", 5L, "normalize", false);

    System.out.printf("python_heavy.pt from %d Java threads, %.1f s per row%n", threads, seconds);
    System.out.printf(
        "%-13s %8s %10s %8s %8s %9s%n",
        "interpreters", "threads", "calls/s", "p50 ms", "p99 ms", "speed-up");
    double baseline = 0;
    for (int n : new int[] {1, interpreters}) {
      try (Pool pool = Pool.create(n);
          TorchPackage pkg = pool.loadPackage(archives.resolve("python_heavy.pt"));
          ReplicatedObject model = pkg.loadPickle("model", "model.pkl")) {
        for (int i = 0; i < n; ++i) check(model, i, input, logits, kwargs);
        Row row = serve(model, input, kwargs);
        if (baseline == 0) baseline = row.callsPerSecond;
        System.out.printf(
            "%-13d %8d %10.1f %8.2f %8.2f %8.2fx%n",
            n,
            threads,
            row.callsPerSecond,
            row.p50Millis,
            row.p99Millis,
            row.callsPerSecond / baseline);
      }
    }
  }

  /** One call pinned to interpreter `index`, compared with eager Python's output. */
  static void check(
      ReplicatedObject model,
      int index,
      float[] input,
      float[] expected,
      Map<String, Object> kwargs) {
    try (org.manypy.CallOptions pinned = new org.manypy.CallOptions().interpreter(index);
        Tensor x = Tensor.of(input, 4, 64)) {
      Map<?, ?> out = (Map<?, ?>) model.call(null, List.of(x), kwargs, pinned);
      try (Tensor y = (Tensor) out.get("logits")) {
        float[] got = y.toFloatArray();
        for (int i = 0; i < got.length; ++i) {
          if (Math.abs(got[i] - expected[i]) > 1e-5f) {
            System.err.println("interpreter " + index + ": output differs from eager Python");
            System.exit(1);
          }
        }
      }
      ((Tensor) out.get("norm")).close();
    }
  }

  record Row(double callsPerSecond, double p50Millis, double p99Millis) {}

  /** `threads` threads call the model as fast as they can for `seconds`. */
  static Row serve(ReplicatedObject model, float[] input, Map<String, Object> kwargs)
      throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    CountDownLatch start = new CountDownLatch(1);
    List<Future<long[]>> results = new ArrayList<>();
    for (int t = 0; t < threads; ++t) {
      results.add(
          pool.submit(
              () -> {
                List<Long> latencies = new ArrayList<>();
                try (Tensor x = Tensor.of(input, 4, 64)) {
                  start.await();
                  long end = System.nanoTime() + (long) (seconds * 1e9);
                  for (long now = System.nanoTime(); now < end; now = System.nanoTime()) {
                    Map<?, ?> out = (Map<?, ?>) model.call(null, List.of(x), kwargs, null);
                    ((Tensor) out.get("logits")).close();
                    ((Tensor) out.get("norm")).close();
                    latencies.add(System.nanoTime() - now);
                  }
                }
                return latencies.stream().mapToLong(Long::longValue).toArray();
              }));
    }
    start.countDown();
    long[] all = new long[0];
    for (Future<long[]> f : results) {
      long[] mine = f.get();
      long[] merged = Arrays.copyOf(all, all.length + mine.length);
      System.arraycopy(mine, 0, merged, all.length, mine.length);
      all = merged;
    }
    pool.shutdown();
    Arrays.sort(all);
    return new Row(
        all.length / seconds,
        all[all.length / 2] / 1e6,
        all[(int) Math.min(all.length - 1, all.length * 0.99)] / 1e6);
  }

  static float[] floats(String name) throws IOException {
    ByteBuffer bytes =
        ByteBuffer.wrap(Files.readAllBytes(archives.resolve(name))).order(ByteOrder.LITTLE_ENDIAN);
    float[] out = new float[bytes.remaining() / 4];
    bytes.asFloatBuffer().get(out);
    return out;
  }
}
