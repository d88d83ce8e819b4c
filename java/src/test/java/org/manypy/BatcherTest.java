package org.manypy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The Batcher on batching.pt (samples/models/batching.py), whose rows(x) gives each row the row
 * count of the batch it ran in, so a test sees the batches formed. Batches are checked by an
 * invariant, not by timing: a batch of r single-row requests makes exactly r of them report r, so
 * the number of requests reporting r is a multiple of r. Long waits (seconds) make requests
 * submitted together share batches without a timing assertion: a batch runs as soon as it is full.
 */
class BatcherTest {
  static Pool pool;
  static TorchPackage pkg;
  static ReplicatedObject model;

  @BeforeAll
  static void load() {
    pool = Pool.create(2);
    pkg = pool.loadPackage(TestSupport.archive("batching.pt"));
    model = pkg.loadPickle("model", "model.pkl");
  }

  @AfterAll
  static void close() {
    model.close();
    pkg.close();
    pool.close();
  }

  @AfterEach
  void everyCompletionArrived() {
    TestSupport.await(() -> TestSupport.pendingAsync() == 0, "every native completion");
  }

  static Tensor row(float seed, int width) {
    float[] x = new float[width];
    for (int i = 0; i < width; ++i) x[i] = seed + i;
    return Tensor.of(x, 1, width);
  }

  /** The batch size each request of `futures` ran in (rows gives [1] per single-row request). */
  static List<Integer> batchSizes(List<CompletableFuture<Object>> futures) {
    List<Integer> sizes = new ArrayList<>();
    for (CompletableFuture<Object> future : futures) {
      try (Tensor y = (Tensor) TestSupport.value(future)) {
        float[] rows = y.toFloatArray();
        assertEquals(1, rows.length);
        sizes.add((int) rows[0]);
      }
    }
    return sizes;
  }

  /** Every batch of r single-row requests makes r of them report r. */
  static void assertBatchesArePartitions(List<Integer> sizes, int maxBatch) {
    Map<Integer, Integer> reporting = new HashMap<>();
    for (int r : sizes) reporting.merge(r, 1, Integer::sum);
    reporting.forEach(
        (r, n) -> {
          assertTrue(r >= 1 && r <= maxBatch, "a batch of " + r + " rows: " + sizes);
          assertEquals(0, n % r, n + " requests report a batch of " + r + ": " + sizes);
        });
  }

  @Test
  void concurrentRequestsAreStacked() {
    try (Batcher batcher =
        model.batcher(
            "rows", new BatcherOptions().maxBatch(8).maxWait(Duration.ofSeconds(5)).name("rows"))) {
      List<CompletableFuture<Object>> futures = new ArrayList<>();
      for (int i = 0; i < 32; ++i) futures.add(batcher.callAsync(row(i, 4)));
      List<Integer> sizes = batchSizes(futures);
      assertBatchesArePartitions(sizes, 8);
      // 32 requests in well under the 5 s wait: full batches of 8.
      assertTrue(sizes.stream().anyMatch(r -> r > 1), "nothing was stacked: " + sizes);
    }
  }

  @Test
  void eachRequestGetsItsOwnRowsFromSyncAndAsyncCallers() throws Exception {
    try (Batcher batcher =
        model.batcher(null, new BatcherOptions().maxBatch(16).maxWait(Duration.ofMillis(20)))) {
      ExecutorService threads = Executors.newFixedThreadPool(8);
      try {
        List<Future<?>> done = new ArrayList<>();
        for (int t = 0; t < 8; ++t) {
          int base = t * 1000;
          boolean async = t % 2 == 0;
          done.add(
              threads.submit(
                  () -> {
                    for (int i = 0; i < 50; ++i) {
                      float seed = base + i;
                      // Requests of 1 to 3 rows: each gets its own rows back.
                      int rows = 1 + i % 3;
                      float[] x = new float[rows * 4];
                      for (int k = 0; k < x.length; ++k) x[k] = seed + k;
                      Object result;
                      try (Tensor in = Tensor.of(x, rows, 4)) {
                        result =
                            async ? TestSupport.value(batcher.callAsync(in)) : batcher.call(in);
                      }
                      try (Tensor y = (Tensor) result) {
                        assertArrayEquals(new long[] {rows, 4}, y.shape());
                        float[] got = y.toFloatArray();
                        for (int k = 0; k < x.length; ++k)
                          assertEquals(x[k] * 2 + 1, got[k], "request " + seed);
                      }
                    }
                    return null;
                  }));
        }
        for (Future<?> f : done) f.get(TestSupport.HANG_SECONDS, TimeUnit.SECONDS);
      } finally {
        threads.shutdownNow();
      }
    }
  }

  @Test
  void mismatchedShapesAndDtypesAreNotStacked() {
    try (Batcher batcher =
        model.batcher("rows", new BatcherOptions().maxBatch(64).maxWait(Duration.ofMillis(500)))) {
      // Three groups that cannot share a batch: [1, 4] float32, [1, 5]
      // float32, [1, 4] float64; sizes 3, 5 and 7.
      List<CompletableFuture<Object>> narrow = new ArrayList<>();
      List<CompletableFuture<Object>> wide = new ArrayList<>();
      List<CompletableFuture<Object>> doubles = new ArrayList<>();
      for (int i = 0; i < 7; ++i) {
        if (i < 3) narrow.add(batcher.callAsync(row(i, 4)));
        if (i < 5) wide.add(batcher.callAsync(row(i, 5)));
        doubles.add(batcher.callAsync(Tensor.of(new double[] {i, i, i, i}, 1, 4)));
      }
      assertBatchesArePartitions(batchSizes(narrow), 3);
      assertBatchesArePartitions(batchSizes(wide), 5);
      for (CompletableFuture<Object> f : doubles) {
        try (Tensor y = (Tensor) TestSupport.value(f)) {
          int r = (int) y.toFloatArray()[0];
          assertTrue(r >= 1 && r <= 7, "a float64 request ran in a batch of " + r);
        }
      }
    }
    // Different non-tensor arguments: each request is scaled by its own factor.
    try (Batcher batcher =
        model.batcher("scale", new BatcherOptions().maxWait(Duration.ofMillis(200)))) {
      List<CompletableFuture<Object>> futures = new ArrayList<>();
      for (int i = 0; i < 12; ++i) futures.add(batcher.callAsync(row(1, 3), (double) (i % 3 + 1)));
      for (int i = 0; i < 12; ++i) {
        float factor = i % 3 + 1;
        try (Tensor y = (Tensor) TestSupport.value(futures.get(i))) {
          assertArrayEquals(new float[] {factor, 2 * factor, 3 * factor}, y.toFloatArray());
        }
      }
    }
  }

  @Test
  void tuplesDictsAndOtherValuesAreSplitBack() {
    try (Batcher batcher =
        model.batcher("pair", new BatcherOptions().maxWait(Duration.ofMillis(200)))) {
      List<CompletableFuture<Object>> futures = new ArrayList<>();
      for (int i = 0; i < 10; ++i) futures.add(batcher.callAsync(row(i, 2), row(10 * i, 2)));
      for (int i = 0; i < 10; ++i) {
        Tuple out = (Tuple) TestSupport.value(futures.get(i));
        try (Tensor sum = (Tensor) out.get(0)) {
          assertArrayEquals(new float[] {11 * i, 11 * i + 2}, sum.toFloatArray());
        }
        Map<?, ?> dict = (Map<?, ?>) out.get(1);
        try (Tensor rowSums = (Tensor) dict.get("sum")) {
          assertArrayEquals(new float[] {2 * i + 1}, rowSums.toFloatArray());
        }
        assertEquals("pair", dict.get("label"));
      }
    }
  }

  @Test
  void aResultWithFewerRowsFailsTheBatchWithBadTensor() throws Exception {
    try (Batcher batcher =
        model.batcher("drop_row", new BatcherOptions().maxWait(Duration.ofMillis(200)))) {
      List<CompletableFuture<Object>> futures = new ArrayList<>();
      for (int i = 0; i < 6; ++i) futures.add(batcher.callAsync(row(i, 4)));
      for (CompletableFuture<Object> f : futures) {
        BadTensorException e = assertInstanceOf(BadTensorException.class, TestSupport.failure(f));
        assertEquals(ErrorCode.BAD_TENSOR, e.code());
      }
      assertThrows(BadTensorException.class, () -> batcher.call(row(0, 4)));
    }
  }

  @Test
  void anExceptionFailsEveryRequestOfItsBatch() {
    try (Batcher batcher =
        model.batcher("fail", new BatcherOptions().maxWait(Duration.ofMillis(200)))) {
      List<CompletableFuture<Object>> futures = new ArrayList<>();
      for (int i = 0; i < 6; ++i) futures.add(batcher.callAsync(row(i, 4)));
      for (CompletableFuture<Object> f : futures) {
        PythonException e = assertInstanceOf(PythonException.class, TestSupport.failure(f));
        assertEquals("ValueError", e.pythonType());
        assertTrue(e.getMessage().contains("refused a batch of"), e.getMessage());
      }
      PythonException sync = assertThrows(PythonException.class, () -> batcher.call(row(0, 4)));
      assertEquals("ValueError", sync.pythonType());
    }
  }

  @Test
  void requestsTheBatcherCannotSplitAreRefusedAtOnce() {
    try (Batcher batcher = model.batcher("pair", null)) {
      long pending = TestSupport.pendingAsync();
      // No tensor at all; tensors with different rows.
      assertThrows(InvalidArgumentException.class, () -> batcher.call(1.0, 2.0));
      assertThrows(InvalidArgumentException.class, () -> batcher.callAsync(1.0, 2.0));
      Tensor two = Tensor.of(new float[4], 2, 2);
      assertThrows(InvalidArgumentException.class, () -> batcher.callAsync(row(0, 2), two));
      assertThrows(InvalidArgumentException.class, () -> batcher.call(row(0, 2), two));
      // Arguments Java cannot pass; no executor.
      assertThrows(IllegalArgumentException.class, () -> batcher.callAsync(new Object()));
      assertThrows(
          IllegalArgumentException.class,
          () -> batcher.callAsync(List.of(row(0, 2), row(0, 2)), null, null, null));
      assertEquals(pending, TestSupport.pendingAsync());
    }
    // A batch dimension the tensors do not have.
    try (Batcher batcher = model.batcher(null, new BatcherOptions().batchDim(3))) {
      assertThrows(InvalidArgumentException.class, () -> batcher.call(row(0, 4)));
    }
    // Options out of range, refused when the batcher is made.
    assertThrows(
        OutOfRangeException.class, () -> model.batcher(null, new BatcherOptions().maxBatch(0)));
    assertThrows(
        OutOfRangeException.class, () -> model.batcher(null, new BatcherOptions().maxBatch(65537)));
    assertThrows(
        OutOfRangeException.class,
        () -> model.batcher(null, new BatcherOptions().maxWait(Duration.ofMillis(-1))));
    assertThrows(
        OutOfRangeException.class,
        () -> model.batcher(null, new BatcherOptions().maxWait(Duration.ofSeconds(61))));
    assertThrows(
        OutOfRangeException.class, () -> model.batcher(null, new BatcherOptions().batchDim(-1)));
    assertThrows(IllegalArgumentException.class, () -> new BatcherOptions().maxWait(null));
    // Closed handles.
    Batcher closed = model.batcher(null, null);
    closed.close();
    closed.close(); // idempotent
    assertThrows(IllegalStateException.class, () -> closed.call(row(0, 4)));
    assertThrows(IllegalStateException.class, () -> closed.callAsync(row(0, 4)));
    try (TorchPackage p = pool.loadPackage(TestSupport.archive("batching.pt"))) {
      ReplicatedObject gone = p.loadPickle("model", "model.pkl");
      gone.close();
      assertThrows(IllegalStateException.class, () -> gone.batcher(null, null));
    }
  }

  @Test
  void aStoppedRequestIsDroppedFromItsBatchAtOnce() {
    try (Batcher batcher =
        model.batcher("rows", new BatcherOptions().maxBatch(4).maxWait(Duration.ofSeconds(60)))) {
      // Three requests wait for a fourth; one is cancelled while it waits.
      // It leaves at once (its native completion arrives while the others
      // still wait for 60 s), and two more fill the batch without it.
      CompletableFuture<Object> a = batcher.callAsync(row(0, 4));
      CompletableFuture<Object> dropped = batcher.callAsync(row(1, 4));
      CompletableFuture<Object> b = batcher.callAsync(row(2, 4));
      assertTrue(dropped.cancel(true));
      assertThrows(CancellationException.class, dropped::join);
      TestSupport.await(() -> TestSupport.pendingAsync() == 2, "the cancelled request leaving");
      CompletableFuture<Object> c = batcher.callAsync(row(3, 4));
      CompletableFuture<Object> d = batcher.callAsync(row(4, 4));
      assertEquals(List.of(4, 4, 4, 4), batchSizes(List.of(a, b, c, d)));
    }
    // Likewise a request whose deadline passes while it waits: it fails with
    // DeadlineExceededException long before its batch's 60 s, and the next
    // two requests make a batch of their own.
    try (Batcher batcher =
            model.batcher(
                "rows", new BatcherOptions().maxBatch(2).maxWait(Duration.ofSeconds(60)));
        CallOptions soon = new CallOptions().timeout(Duration.ofMillis(100))) {
      CompletableFuture<Object> late = batcher.callAsync(List.of(row(0, 4)), null, soon);
      DeadlineExceededException e =
          assertInstanceOf(DeadlineExceededException.class, TestSupport.failure(late));
      assertTrue(e.getMessage().contains("while it waited for its batch"), e.getMessage());
      CompletableFuture<Object> a = batcher.callAsync(row(1, 4));
      CompletableFuture<Object> b = batcher.callAsync(row(2, 4));
      assertEquals(List.of(2, 2), batchSizes(List.of(a, b)));
    }
  }

  @Test
  void closingTheBatcherSendsWaitingRequestsAndAnyCloseOrderWorks() {
    Pool p = Pool.create(1);
    TorchPackage k = p.loadPackage(TestSupport.archive("batching.pt"));
    ReplicatedObject m = k.loadPickle("model", "model.pkl");
    Batcher batcher =
        m.batcher("rows", new BatcherOptions().maxBatch(64).maxWait(Duration.ofSeconds(60)));
    // The batcher holds its object: the pool, the package and the object go first.
    p.close();
    k.close();
    m.close();
    List<CompletableFuture<Object>> waiting = new ArrayList<>();
    for (int i = 0; i < 5; ++i) waiting.add(batcher.callAsync(row(i, 4)));
    // They wait for 59 more rows, or 60 s; closing sends them at once.
    batcher.close();
    assertBatchesArePartitions(batchSizes(waiting), 5);
  }

  @Test
  void operatorCallbacksSeeTheBatchsContext() {
    Set<String> contexts = ConcurrentHashMap.newKeySet();
    try (OpCallbackRegistration registration =
            Manypy.addOpCallbacks(
                event -> contexts.add(event.modelId() + "/" + event.requestId()),
                null,
                1.0,
                false);
        Batcher batcher =
            model.batcher(null, new BatcherOptions().maxBatch(2).maxWait(Duration.ofSeconds(60)));
        CallOptions first = new CallOptions().context("ranker", "a");
        CallOptions second = new CallOptions().context("ranker", "b")) {
      // Two requests fill a batch of 2: the batch's context is the first
      // request's model id and both request ids.
      CompletableFuture<Object> a = batcher.callAsync(List.of(row(0, 4)), null, first);
      CompletableFuture<Object> b = batcher.callAsync(List.of(row(1, 4)), null, second);
      Values.closeTensors(TestSupport.value(a));
      Values.closeTensors(TestSupport.value(b));
    }
    assertTrue(
        contexts.contains("ranker/a,b") || contexts.contains("ranker/b,a"), contexts.toString());
  }

  @Test
  void batchSizesReachThePrometheusOutput() {
    try (Profiler profiler = Profiler.start(1.0);
        Batcher batcher =
            model.batcher(
                "rows",
                new BatcherOptions()
                    .maxBatch(4)
                    .maxWait(Duration.ofSeconds(5))
                    .name("java_rows"))) {
      List<CompletableFuture<Object>> futures = new ArrayList<>();
      for (int i = 0; i < 8; ++i) futures.add(batcher.callAsync(row(i, 4)));
      assertBatchesArePartitions(batchSizes(futures), 4);
      String metrics = profiler.prometheus();
      assertTrue(
          metrics.contains("manypy_batch_size") && metrics.contains("batcher=\"java_rows\""),
          metrics);
    }
  }
}
