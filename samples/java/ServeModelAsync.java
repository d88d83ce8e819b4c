import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;
import org.manypy.Batcher;
import org.manypy.BatcherOptions;
import org.manypy.Pool;
import org.manypy.PoolOptions;
import org.manypy.ReplicatedObject;
import org.manypy.Tensor;
import org.manypy.TorchPackage;

/**
 * Serves ResNet-18 asynchronously, as an event-loop service (Netty, Vert.x) would: no thread waits
 * for a call. C clients each keep one batch-1 request in flight; each completion (on the common
 * pool, never on manypy's threads) records its latency and submits the client's next request. It
 * runs twice on the same pool: with callAsync (one call per request), and through a Batcher, which
 * stacks concurrent requests into batches of up to 8 rows, as TorchServe's dynamic batching does.
 * It prints throughput and p50/p99 latency of each, and the ratio.
 *
 * <p>Every output is first checked against eager Python's (resnet18.expected.out.bin), alone and as
 * rows of a batch.
 *
 * <p>Run it from the repository, after scripts/build.sh, as a single-file program (the JVM needs
 * the static TLS setting; see the README):
 *
 * <p>GLIBC_TUNABLES=glibc.rtld.optional_static_tls=16384 \ java -cp build/maven/manypy-0.3.0.jar
 * -Djava.library.path=build/lib \ samples/java/ServeModelAsync.java [--archives DIR] [--clients C]
 * [--interpreters N] [--seconds S] [--max-batch B] [--max-wait-ms W]
 *
 * <p>Exits 1 if an output is wrong or a call fails.
 */
public class ServeModelAsync {
  static Path archives = Path.of("build/archives");
  static int clients = 16;
  static int interpreters = 2;
  static double seconds = 3;
  static int maxBatch = 8;
  static double maxWaitMillis = 2;

  public static void main(String[] args) throws Exception {
    for (int i = 0; i < args.length; i += 2) {
      switch (args[i]) {
        case "--archives" -> archives = Path.of(args[i + 1]);
        case "--clients" -> clients = Integer.parseInt(args[i + 1]);
        case "--interpreters" -> interpreters = Integer.parseInt(args[i + 1]);
        case "--seconds" -> seconds = Double.parseDouble(args[i + 1]);
        case "--max-batch" -> maxBatch = Integer.parseInt(args[i + 1]);
        case "--max-wait-ms" -> maxWaitMillis = Double.parseDouble(args[i + 1]);
        default -> throw new IllegalArgumentException("unknown option " + args[i]);
      }
    }
    float[] input = floats("resnet18.input.bin");
    float[] expected = floats("resnet18.expected.out.bin");
    BatcherOptions batching =
        new BatcherOptions()
            .maxBatch(maxBatch)
            .maxWait(Duration.ofNanos((long) (maxWaitMillis * 1e6)))
            .name("resnet18");

    try (Pool pool = Pool.create(new PoolOptions().interpreters(interpreters));
        TorchPackage pkg = pool.loadPackage(archives.resolve("resnet18.pt"));
        ReplicatedObject model = pkg.loadPickle("model", "model.pkl");
        Batcher batcher = model.batcher(null, batching);
        Tensor x = Tensor.of(input, 1, 3, 224, 224)) {
      // Correct alone, and as each row of a batch (the batcher's split).
      for (int i = 0; i < interpreters; ++i) check(model.callAsync(x), expected, "callAsync");
      List<CompletableFuture<Object>> rows = new ArrayList<>();
      for (int i = 0; i < maxBatch; ++i) rows.add(batcher.callAsync(x));
      for (CompletableFuture<Object> row : rows) check(row, expected, "a batched request");

      System.out.printf(
          "resnet18.pt, batch-1 requests from %d asynchronous clients, %d interpreters,"
              + " %.1f s per row%n",
          clients, interpreters, seconds);
      System.out.printf("%-32s %10s %8s %8s %8s%n", "", "calls/s", "p50 ms", "p99 ms", "ratio");
      Row unbatched = serve(() -> model.callAsync(x));
      print("callAsync (unbatched)", unbatched, unbatched);
      Row batched = serve(() -> batcher.callAsync(x));
      print(
          String.format("Batcher (max %d rows, %.1f ms)", maxBatch, maxWaitMillis),
          batched,
          unbatched);
    }
  }

  static void print(String name, Row row, Row baseline) {
    System.out.printf(
        "%-32s %10.1f %8.2f %8.2f %7.2fx%n",
        name,
        row.callsPerSecond,
        row.p50Millis,
        row.p99Millis,
        row.callsPerSecond / baseline.callsPerSecond);
  }

  /** Compares a [1, 1000] result with eager Python's, relative tolerance 1e-4. */
  static void check(CompletableFuture<Object> future, float[] expected, String what)
      throws Exception {
    try (Tensor y = (Tensor) future.get(60, TimeUnit.SECONDS)) {
      float[] got = y.toFloatArray();
      if (!Arrays.equals(y.shape(), new long[] {1, 1000}))
        fail(what + ": shape " + Arrays.toString(y.shape()));
      for (int i = 0; i < got.length; ++i) {
        if (!(Math.abs(got[i] - expected[i]) <= 1e-4 * (1 + Math.abs(expected[i])))) {
          fail(what + ": output " + i + " is " + got[i] + ", eager Python gave " + expected[i]);
        }
      }
    }
  }

  static void fail(String why) {
    System.err.println("ServeModelAsync: " + why);
    System.exit(1);
  }

  record Row(double callsPerSecond, double p50Millis, double p99Millis) {}

  /**
   * `clients` closed-loop clients for `seconds`: each submits a request, and its completion submits
   * the next. No thread blocks on a call; this one only waits for the end.
   */
  static Row serve(Supplier<CompletableFuture<Object>> request) throws Exception {
    long end = System.nanoTime() + (long) (seconds * 1e9);
    CountDownLatch finished = new CountDownLatch(clients);
    AtomicReference<Throwable> failure = new AtomicReference<>();
    List<List<Long>> latencies = new ArrayList<>();
    for (int c = 0; c < clients; ++c) {
      List<Long> mine = new ArrayList<>(); // one request at a time per client: no lock needed
      latencies.add(mine);
      next(request, mine, end, finished, failure);
    }
    if (!finished.await((long) seconds + 120, TimeUnit.SECONDS)) fail("the clients never finished");
    if (failure.get() != null) {
      failure.get().printStackTrace();
      fail("a call failed: " + failure.get());
    }
    long[] all = latencies.stream().flatMap(List::stream).mapToLong(Long::longValue).toArray();
    Arrays.sort(all);
    return new Row(
        all.length / seconds,
        all[all.length / 2] / 1e6,
        all[(int) Math.min(all.length - 1, all.length * 0.99)] / 1e6);
  }

  static void next(
      Supplier<CompletableFuture<Object>> request,
      List<Long> latencies,
      long end,
      CountDownLatch finished,
      AtomicReference<Throwable> failure) {
    long start = System.nanoTime();
    CompletableFuture<Object> future;
    try {
      future = request.get();
    } catch (RuntimeException refused) {
      failure.compareAndSet(null, refused);
      finished.countDown();
      return;
    }
    future.whenComplete(
        (result, error) -> {
          long now = System.nanoTime();
          if (error != null) {
            failure.compareAndSet(null, error);
            finished.countDown();
            return;
          }
          ((Tensor) result).close();
          latencies.add(now - start);
          if (now < end && failure.get() == null) {
            next(request, latencies, end, finished, failure);
          } else {
            finished.countDown();
          }
        });
  }

  static float[] floats(String name) throws IOException {
    ByteBuffer bytes =
        ByteBuffer.wrap(Files.readAllBytes(archives.resolve(name))).order(ByteOrder.LITTLE_ENDIAN);
    float[] out = new float[bytes.remaining() / 4];
    bytes.asFloatBuffer().get(out);
    return out;
  }
}
