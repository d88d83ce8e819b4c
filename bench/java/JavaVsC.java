import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CyclicBarrier;
import org.manypy.Pool;
import org.manypy.ReplicatedObject;
import org.manypy.Tensor;
import org.manypy.TorchPackage;

/**
 * Java calling through manypy against the same serving loop written in C, side by side in one JVM
 * process: one pool of 2 interpreters, one replicated python_heavy.pt, 2 calling threads, in
 * alternating rounds (Java, C, Java, C, ...). The C loop (c_runner.c, libmanypy_bench_jni.so) runs
 * on native threads and calls manypy.h directly, as a C service would. Target: Java >= 0.9x the C
 * throughput. Then the cost of one call: identity.pt on [1, 16], one call at a time, p50 of Java's
 * call (one input Tensor reused, and a new zero-copy Tensor per call) against the C side's (a new
 * tensor over the caller's buffer per call), as Go's comparison reports it. A benchmark, not a
 * test: it never fails on timing; it exits non-zero only if a call fails.
 *
 * <p>GLIBC_TUNABLES=glibc.rtld.optional_static_tls=16384 \ java -cp build/maven/manypy-0.3.0.jar
 * -Djava.library.path=build/lib \ bench/java/JavaVsC.java [--archives DIR] [--seconds S] [--rounds
 * R]
 */
public class JavaVsC {
  static final int THREADS = 2;

  /** The C loop, in libmanypy_bench_jni.so: total calls in `seconds`. */
  static native long runC(long model, ByteBuffer input, int threads, double seconds);

  /** The C side's calls one at a time, in libmanypy_bench_jni.so: each one's ns. */
  static native void latenciesC(long model, ByteBuffer input, long[] out);

  public static void main(String[] args) throws Exception {
    Path archives = Path.of("build/archives");
    double seconds = 3;
    int rounds = 5;
    for (int i = 0; i < args.length; i += 2) {
      switch (args[i]) {
        case "--archives" -> archives = Path.of(args[i + 1]);
        case "--seconds" -> seconds = Double.parseDouble(args[i + 1]);
        case "--rounds" -> rounds = Integer.parseInt(args[i + 1]);
        default -> throw new IllegalArgumentException("unknown option " + args[i]);
      }
    }
    System.loadLibrary("manypy_bench_jni");
    ByteBuffer input = ByteBuffer.allocateDirect(4 * 64 * 4).order(ByteOrder.nativeOrder());
    input.put(ByteBuffer.wrap(Files.readAllBytes(archives.resolve("python_heavy.input.bin"))));
    Map<String, Object> kwargs = Map.of("steps", 5L, "normalize", false);

    try (Pool pool = Pool.create(2);
        TorchPackage pkg = pool.loadPackage(archives.resolve("python_heavy.pt"));
        ReplicatedObject model = pkg.loadPickle("model", "model.pkl")) {
      // Warm-up: both interpreters get their replica, the JIT compiles the
      // Java path.
      runJava(model, input, kwargs, 2);
      runC(model.nativeHandle(), input, THREADS, 1);

      System.out.printf(
          "python_heavy.pt, %d interpreters x %d threads, %.1f s per round%n",
          pool.size(), THREADS, seconds);
      System.out.printf("%-6s %14s %14s %8s%n", "round", "Java calls/s", "C calls/s", "Java/C");
      List<Double> ratios = new ArrayList<>();
      for (int r = 1; r <= rounds; ++r) {
        double java = runJava(model, input, kwargs, seconds) / seconds;
        double c = runC(model.nativeHandle(), input, THREADS, seconds) / seconds;
        ratios.add(java / c);
        System.out.printf("%-6d %14.1f %14.1f %7.3fx%n", r, java, c, java / c);
      }
      double median = median(ratios);
      System.out.printf(
          "Java / C throughput (median of %d rounds)  %.3fx   >= 0.9x   %s%n",
          rounds, median, median >= 0.9 ? "meets" : "misses");
    }
    callCost(archives, rounds);
  }

  /** One call at a time on identity.pt: Java's p50 against C's, alternating rounds. */
  static void callCost(Path archives, int rounds) throws Exception {
    final int calls = 20000;
    ByteBuffer input = ByteBuffer.allocateDirect(16 * 4).order(ByteOrder.nativeOrder());
    try (Pool pool = Pool.create(1);
        TorchPackage pkg = pool.loadPackage(archives.resolve("identity.pt"));
        ReplicatedObject model = pkg.loadPickle("model", "model.pkl");
        Tensor reused = Tensor.fromBuffer(input, org.manypy.DType.FLOAT32, 1, 16)) {
      long[] c = new long[calls], javaReused = new long[calls], javaNew = new long[calls];
      List<Long> cP50 = new ArrayList<>(),
          reusedP50 = new ArrayList<>(),
          newP50 = new ArrayList<>();
      for (int r = 0; r <= rounds; ++r) { // round 0 warms up
        latenciesC(model.nativeHandle(), input, c);
        for (int i = 0; i < calls; ++i) {
          long t0 = System.nanoTime();
          ((Tensor) model.call(null, List.of(reused), null, null)).close();
          javaReused[i] = System.nanoTime() - t0;
        }
        for (int i = 0; i < calls; ++i) {
          long t0 = System.nanoTime();
          try (Tensor x = Tensor.fromBuffer(input, org.manypy.DType.FLOAT32, 1, 16)) {
            ((Tensor) model.call(null, List.of(x), null, null)).close();
          }
          javaNew[i] = System.nanoTime() - t0;
        }
        if (r == 0) continue;
        cP50.add(p50(c));
        reusedP50.add(p50(javaReused));
        newP50.add(p50(javaNew));
      }
      double cUs = medianOf(cP50) / 1e3;
      double reusedUs = medianOf(reusedP50) / 1e3;
      double newUs = medianOf(newP50) / 1e3;
      System.out.printf(
          "identity.pt [1, 16], one call at a time, %d rounds x %d calls per side%n",
          rounds, calls);
      System.out.printf("  C                                     p50 %7.2f us%n", cUs);
      System.out.printf(
          "  Java, one input Tensor reused         p50 %7.2f us  (p50 %+.2f us vs C)%n",
          reusedUs, reusedUs - cUs);
      System.out.printf(
          "  Java, a new zero-copy Tensor per call p50 %7.2f us  (p50 %+.2f us vs C)%n",
          newUs, newUs - cUs);
    }
  }

  static long p50(long[] ns) {
    long[] sorted = ns.clone();
    Arrays.sort(sorted);
    return sorted[sorted.length / 2];
  }

  static double medianOf(List<Long> values) {
    return median(values.stream().map(Long::doubleValue).toList());
  }

  /** The Java loop: the same call, through the Java API. Returns total calls. */
  static long runJava(
      ReplicatedObject model, ByteBuffer input, Map<String, Object> kwargs, double seconds)
      throws Exception {
    CyclicBarrier start = new CyclicBarrier(THREADS);
    long[] calls = new long[THREADS];
    Throwable[] failure = new Throwable[1];
    List<Thread> threads = new ArrayList<>();
    for (int t = 0; t < THREADS; ++t) {
      final int index = t;
      Thread thread =
          new Thread(
              () -> {
                try {
                  Tensor x =
                      Tensor.fromBuffer(input.duplicate().clear(), org.manypy.DType.FLOAT32, 4, 64);
                  start.await();
                  long end = System.nanoTime() + (long) (seconds * 1e9);
                  while (System.nanoTime() < end) {
                    Map<?, ?> out = (Map<?, ?>) model.call(null, List.of(x), kwargs, null);
                    ((Tensor) out.get("logits")).close();
                    ((Tensor) out.get("norm")).close();
                    calls[index]++;
                  }
                } catch (Throwable e) {
                  failure[0] = e;
                }
              });
      threads.add(thread);
      thread.start();
    }
    for (Thread t : threads) t.join();
    if (failure[0] != null) throw new RuntimeException(failure[0]);
    return Arrays.stream(calls).sum();
  }

  static double median(List<Double> values) {
    double[] v = values.stream().mapToDouble(Double::doubleValue).sorted().toArray();
    return v.length % 2 == 1 ? v[v.length / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
  }
}
