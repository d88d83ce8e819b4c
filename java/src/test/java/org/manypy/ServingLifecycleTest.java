package org.manypy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.function.Executable;
import org.manypy.internal.ManypyNative;

/**
 * The serving lifecycle (issue 23): serve early, growth, resize, stats, request metrics and their
 * Prometheus text, drain and DrainingException, the interpreter-failed callback's registration. In
 * a JVM of its own (fresh-jvm), so that the first pool starts fresh interpreters (serve early is
 * seen only while interpreters start) and the drains, which cancel running calls, cannot retire an
 * interpreter other suites need.
 */
@Tag("fresh-jvm")
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class ServingLifecycleTest {
  static final String SLEEP_300_MS = "import time\ntime.sleep(0.3)";
  static final String SLEEP_FOREVER = "import time\nwhile True:\n    time.sleep(0.01)";

  static <T extends Throwable> T expect(Class<T> type, String inMessage, Executable call) {
    T e = assertThrows(type, call);
    assertTrue(e.getMessage().contains(inMessage), "message: " + e.getMessage());
    return e;
  }

  static CallOptions as(String model, int interpreter) {
    return new CallOptions().context(model, "").interpreter(interpreter);
  }

  /** Runs `source` with model id `model` on `interpreter`, closing the options. */
  static void exec(Pool pool, String model, int interpreter, String source) {
    try (CallOptions options = as(model, interpreter)) {
      pool.exec(source, options);
    }
  }

  static Future<?> execInBackground(
      ExecutorService threads, Pool pool, String model, int interpreter, String source) {
    return threads.submit(() -> exec(pool, model, interpreter, source));
  }

  /** What a background call threw, or null if it returned. */
  static Throwable outcome(Future<?> call) throws Exception {
    try {
      call.get(TestSupport.HANG_SECONDS, TimeUnit.SECONDS);
      return null;
    } catch (java.util.concurrent.ExecutionException e) {
      return e.getCause();
    }
  }

  static long version(ReplicatedObject model, CallOptions options) {
    return (Long) model.call("version", List.of(), null, options);
  }

  /** Counts the interpreters that serve (ready or busy), never fewer than 1, not while draining. */
  @Test
  @Order(0)
  void servingAtLeastCountsTheInterpretersThatServe() {
    PoolStats twoOfFour = new PoolStats(4, 0, 1, 1, 1, 1, 0, false, Map.of(), 1, 0, false);
    assertTrue(twoOfFour.serving());
    assertTrue(twoOfFour.servingAtLeast(2));
    assertFalse(twoOfFour.servingAtLeast(3), "lost and broken ones do not serve");
    assertFalse(new PoolStats(2, 0, 0, 0, 1, 0, 0, false, Map.of(), 1, 0, false).servingAtLeast(0));
    assertFalse(
        new PoolStats(2, 0, 2, 0, 0, 0, 0, true, Map.of(), 0, 0, false).serving(), "draining");
  }

  // First: the process's interpreters are still fresh, so they take a while to start.
  @Test
  @Order(1)
  void aServeEarlyPoolServesWhileItsOtherInterpretersStart() {
    long t0 = System.nanoTime();
    try (Pool pool = Pool.create(new PoolOptions().interpreters(3).serveEarly(true))) {
      PoolStats first = pool.stats();
      System.out.printf(
          "serve early: serving after %.2f s with %s%n", (System.nanoTime() - t0) / 1e9, first);
      assertEquals(3, first.interpreters());
      assertEquals(3, pool.size());
      assertEquals(
          3, first.starting() + first.ready() + first.busy() + first.broken() + first.lost());
      assertEquals(0, first.broken());
      assertEquals(0, first.lost());
      assertTrue(first.ready() + first.busy() >= 1, first.toString());
      assertTrue(first.serving());
      // Fresh interpreters start one after the other, each importing torch (about a second):
      // when create returns with the first, the others cannot all be up.
      assertTrue(first.starting() >= 1, first.toString());
      // A package loaded now serves on the last interpreter once it has started: a call
      // pinned to it waits for its start.
      try (TorchPackage pkg = pool.loadPackage(TestSupport.archive("version_1.pt"));
          ReplicatedObject model = pkg.loadPickle("model", "model.pkl");
          CallOptions onLast = new CallOptions().interpreter(2).timeout(Duration.ofSeconds(60))) {
        assertEquals(1L, version(model, onLast));
      }
      TestSupport.await(() -> pool.stats().starting() == 0, "every interpreter started");
      PoolStats all = pool.stats();
      assertEquals(3, all.ready() + all.busy(), all.toString());
      for (int i = 0; i < 3; ++i) pool.checkInterpreter(i);
    }
  }

  @Test
  @Order(2)
  void aPoolGrowsWhenCallsWaitLongerThanGrowAfter() throws Exception {
    try (Pool pool =
        Pool.create(
            new PoolOptions()
                .interpreters(1)
                .maxInterpreters(2)
                .growAfter(Duration.ofMillis(5))
                .threadMode(ThreadMode.HANDOFF))) {
      assertEquals(1, pool.size());
      ExecutorService threads = Executors.newFixedThreadPool(4);
      try {
        List<Future<?>> calls = new ArrayList<>();
        for (int i = 0; i < 4; ++i) {
          calls.add(
              execInBackground(
                  threads, pool, "", Pool.ANY_INTERPRETER, "import time\ntime.sleep(0.1)"));
        }
        for (Future<?> call : calls) assertNull(outcome(call));
      } finally {
        threads.shutdown();
      }
      // size() reads the pool at each call: it was 1 and becomes 2.
      TestSupport.await(() -> pool.stats().ready() == 2, "the pool grew to 2 and serves on both");
      assertEquals(2, pool.size());
      assertEquals(2, pool.stats().interpreters());
      pool.checkInterpreter(1);
      exec(pool, "", 1, "x = 1");
    }
  }

  @Test
  void resizeGrowsAndShrinksAndRefusesBadCounts() {
    int max = Manypy.maxInterpreters();
    try (Pool pool = Pool.create(1);
        TorchPackage pkg = pool.loadPackage(TestSupport.archive("version_1.pt"));
        ReplicatedObject model = pkg.loadPickle("model", "model.pkl");
        CallOptions onSecond = new CallOptions().interpreter(1)) {
      OutOfRangeException zero =
          expect(
              OutOfRangeException.class,
              "a pool needs 1 to " + max + " interpreters on this platform, not 0",
              () -> pool.resize(0));
      assertEquals(ErrorCode.OUT_OF_RANGE, zero.code());
      expect(
          OutOfRangeException.class,
          "1 to " + max + " interpreters on this platform, not " + (max + 1),
          () -> pool.resize(max + 1));
      expect(
          OutOfRangeException.class,
          "1 to " + max + " interpreters on this platform, not -1",
          () -> pool.resize(-1));
      assertEquals(1, pool.size());
      for (int round = 0; round < 2; ++round) {
        pool.resize(2);
        assertEquals(2, pool.size());
        assertEquals(2, pool.stats().ready());
        // The object, loaded before the pool grew, serves on the new member (and, the second
        // time, on a member that left and came back).
        assertEquals(1L, version(model, onSecond));
        pool.resize(1);
        assertEquals(1, pool.size());
        expect(OutOfRangeException.class, "the pool has 1", () -> version(model, onSecond));
        pool.resize(1); // the same size: nothing to do
      }
    }
  }

  @Test
  void statsAndRequestMetricsCountCallsByModelAndCode() {
    try (Pool pool = Pool.create(new PoolOptions().interpreters(2).name("svc \"a\""))) {
      assertEquals("svc \"a\"", pool.name());
      PoolStats idle = pool.stats();
      assertEquals(2, idle.interpreters());
      assertEquals(2, idle.ready());
      assertEquals(0, idle.inFlight() + idle.queued());
      assertFalse(idle.draining());
      assertEquals(Map.of(), idle.completed());
      assertEquals(List.of(), pool.requestMetrics());

      for (int i = 0; i < 3; ++i) exec(pool, "m1", Pool.ANY_INTERPRETER, "x = 1");
      expect(PythonException.class, "no", () -> exec(pool, "m1", 0, "raise ValueError('no')"));
      expect(OutOfRangeException.class, "", () -> exec(pool, "m1", 7, "x = 1"));
      exec(pool, "m2", 1, "y = 2");
      PoolStats s = pool.stats();
      assertEquals(4, s.completed(ErrorCode.OK));
      assertEquals(1, s.completed(ErrorCode.PYTHON));
      assertEquals(1, s.completed(ErrorCode.OUT_OF_RANGE));
      assertEquals(0, s.completed(ErrorCode.DRAINING));
      assertEquals(6, s.totalCompleted());
      assertEquals(
          Map.of(ErrorCode.OK, 4L, ErrorCode.PYTHON, 1L, ErrorCode.OUT_OF_RANGE, 1L),
          s.completed());
      assertThrows(UnsupportedOperationException.class, () -> s.completed().put(ErrorCode.OK, 0L));

      List<RequestMetrics> metrics = pool.requestMetrics();
      assertEquals(List.of("m1", "m2"), metrics.stream().map(RequestMetrics::model).toList());
      for (RequestMetrics m : metrics) {
        assertTrue(m.bucketBounds().size() > 4, m.toString());
        assertEquals(m.bucketBounds().size(), m.requestBuckets().size());
        assertEquals(m.bucketBounds().size(), m.queueBuckets().size());
        for (int b = 1; b < m.bucketBounds().size(); ++b) {
          assertTrue(m.bucketBounds().get(b) > m.bucketBounds().get(b - 1), m.toString());
          assertTrue(m.requestBuckets().get(b) >= m.requestBuckets().get(b - 1), m.toString());
          assertTrue(m.queueBuckets().get(b) >= m.queueBuckets().get(b - 1), m.toString());
        }
        assertTrue(m.requestBuckets().get(m.requestBuckets().size() - 1) <= m.requestCount());
        assertThrows(UnsupportedOperationException.class, () -> m.requestBuckets().set(0, 0L));
      }
      RequestMetrics m1 = metrics.get(0);
      assertEquals(3, m1.completed(ErrorCode.OK));
      assertEquals(1, m1.completed(ErrorCode.PYTHON));
      assertEquals(1, m1.completed(ErrorCode.OUT_OF_RANGE));
      // The refusal has no duration: 4 requests timed, 4 queue times.
      assertEquals(4, m1.requestCount());
      assertEquals(4, m1.queueCount());
      assertTrue(m1.requestSecondsSum() > 0 && m1.requestSecondsSum() < 10, m1.toString());
      assertTrue(m1.queueSecondsSum() >= 0 && m1.queueSecondsSum() <= m1.requestSecondsSum());
      RequestMetrics m2 = metrics.get(1);
      assertEquals(Map.of(ErrorCode.OK, 1L), m2.completed());
      assertEquals(1, m2.requestCount());

      String text = pool.prometheusText();
      String label = "pool=\"svc \\\"a\\\"\"";
      for (String line :
          List.of(
              "# TYPE manypy_requests_total counter",
              "manypy_requests_total{" + label + ",model=\"m1\",code=\"ok\"} 3",
              "manypy_requests_total{" + label + ",model=\"m1\",code=\"python\"} 1",
              "manypy_requests_total{" + label + ",model=\"m1\",code=\"out_of_range\"} 1",
              "# TYPE manypy_request_duration_seconds histogram",
              "manypy_request_duration_seconds_bucket{" + label + ",model=\"m1\",le=\"+Inf\"} 4",
              "manypy_queue_duration_seconds_count{" + label + ",model=\"m2\"} 1",
              "manypy_inflight_requests{" + label + "} 0",
              "manypy_interpreters{" + label + ",state=\"ready\"} 2",
              "manypy_draining{" + label + "} 0")) {
        assertTrue(text.lines().anyMatch(line::equals), line + " in\n" + text);
      }
    }
  }

  @Test
  void aPoolWithoutANameHasNoPoolLabel() {
    for (String name : new String[] {null, ""}) {
      try (Pool pool = Pool.create(new PoolOptions().name(name))) {
        assertEquals("", pool.name());
        exec(pool, "m", 0, "x = 1");
        String text = pool.prometheusText();
        assertTrue(text.contains("manypy_requests_total{model=\"m\",code=\"ok\"} 1\n"), text);
        assertFalse(text.contains("pool="), text);
      }
    }
  }

  @Test
  void aDrainFinishesTheCallsInFlightThenEveryCallIsRefused() throws Exception {
    for (ThreadMode mode : ThreadMode.values()) {
      try (Pool pool = Pool.create(new PoolOptions().interpreters(2).threadMode(mode));
          TorchPackage pkg = pool.loadPackage(TestSupport.archive("version_1.pt"));
          ReplicatedObject model = pkg.loadPickle("model", "model.pkl");
          Batcher batcher = model.batcher("forward", new BatcherOptions().maxBatch(2))) {
        ExecutorService threads = Executors.newFixedThreadPool(3);
        try {
          // Two on interpreter 0 (one of them queued), one on 1.
          List<Future<?>> calls = new ArrayList<>();
          for (int i = 0; i < 3; ++i) {
            calls.add(execInBackground(threads, pool, "slow", i == 2 ? 1 : 0, SLEEP_300_MS));
          }
          TestSupport.await(() -> pool.inFlight() == 3, "3 calls in flight");
          DrainResult drained = pool.drain(Duration.ofSeconds(60));
          assertEquals(new DrainResult(3, 0), drained, mode.toString());
          for (Future<?> call : calls) assertNull(outcome(call));
        } finally {
          threads.shutdown();
        }
        // Every new call is refused at once, whatever its path.
        expect(DrainingException.class, "draining", () -> exec(pool, "late", 0, "x = 1"));
        expect(DrainingException.class, "draining", () -> pool.eval("1"));
        expect(DrainingException.class, "draining", () -> version(model, null));
        expect(DrainingException.class, "draining", () -> model.callMethodAsync("version"));
        try (Tensor x = Tensor.of(new float[] {1, 2}, 1, 2)) {
          expect(DrainingException.class, "draining", () -> batcher.call(x));
        }
        PoolStats s = pool.stats();
        assertTrue(s.draining());
        assertFalse(s.serving());
        assertEquals(
            ErrorCode.DRAINING, assertThrows(DrainingException.class, () -> pool.eval("1")).code());
        // The 3 calls drained; the 5 refusals (loading, before, is no call).
        assertEquals(Map.of(ErrorCode.OK, 3L, ErrorCode.DRAINING, 5L), s.completed());
        // Again: nothing is left, nothing counted. Resize is refused.
        assertEquals(new DrainResult(0, 0), pool.drain(Duration.ZERO));
        assertEquals(new DrainResult(0, 0), pool.drain());
        assertEquals(new DrainResult(0, 0), pool.drainUntil(Manypy.monotonicNanos()));
        expect(DrainingException.class, "draining", () -> pool.resize(1));
        assertTrue(pool.prometheusText().contains("manypy_draining 1\n"));
        // Reading an archive runs no Python; unpickling from it is a call, refused.
        try (TorchPackage late = pool.loadPackage(TestSupport.archive("version_2.pt"))) {
          expect(DrainingException.class, "draining", () -> late.loadPickle("model", "model.pkl"));
        }
      }
    }
  }

  @Test
  void badDrainDeadlinesAreRefused() {
    try (Pool pool = Pool.create(1)) {
      expect(OutOfRangeException.class, "deadline_ns must be >= 0", () -> pool.drainUntil(-1));
      expect(OutOfRangeException.class, "negative", () -> pool.drain(Duration.ofMillis(-1)));
      assertThrows(IllegalArgumentException.class, () -> pool.drain(null));
      assertFalse(pool.stats().draining(), "a refused drain does not start one");
      // A timeout too long for 64-bit nanoseconds is no deadline.
      assertEquals(new DrainResult(0, 0), pool.drain(Duration.ofDays(365L * 1000)));
    }
  }

  @Test
  void atItsDeadlineADrainCancelsWhatIsLeft() throws Exception {
    try (Pool pool = Pool.create(new PoolOptions().threadMode(ThreadMode.HANDOFF))) {
      ExecutorService threads = Executors.newFixedThreadPool(2);
      try {
        // One running, one queued behind it; neither ends by itself.
        List<Future<?>> calls = new ArrayList<>();
        for (int i = 0; i < 2; ++i)
          calls.add(execInBackground(threads, pool, "stuck", 0, SLEEP_FOREVER));
        TestSupport.await(() -> pool.inFlight() == 2, "2 calls in flight");
        long t0 = System.nanoTime();
        assertEquals(new DrainResult(0, 2), pool.drain(Duration.ofMillis(300)));
        System.out.printf("drain: cancelled 2 in %.2f s%n", (System.nanoTime() - t0) / 1e9);
        for (Future<?> call : calls) {
          Throwable e = outcome(call);
          assertTrue(e instanceof CancelledException, String.valueOf(e));
          assertTrue(e.getMessage().contains("manypy_pool_drain"), e.getMessage());
        }
      } finally {
        threads.shutdown();
      }
      assertEquals(0, pool.inFlight());
      assertEquals(2, pool.stats().completed(ErrorCode.CANCELLED));
    }
  }

  /**
   * A drain and a close from two threads, in every order: the drain either holds the pool (the
   * close returns at once and the pool is freed when the drain returns) or finds it closed
   * (IllegalStateException). Never a crash, and the call in flight finishes.
   */
  @Test
  void aDrainRacingCloseFromAnotherThreadIsSafe() throws Exception {
    ExecutorService threads = Executors.newFixedThreadPool(3);
    try {
      for (int round = 0; round < 6; ++round) {
        Pool pool = Pool.create(2);
        TorchPackage pkg = pool.loadPackage(TestSupport.archive("version_2.pt"));
        ReplicatedObject model = pkg.loadPickle("model", "model.pkl");
        Future<?> call = execInBackground(threads, pool, "", 0, "import time\ntime.sleep(0.2)");
        TestSupport.await(() -> pool.inFlight() == 1, "a call in flight");
        CountDownLatch go = new CountDownLatch(1);
        final int r = round;
        Future<DrainResult> drain =
            threads.submit(
                () -> {
                  go.await();
                  if (r % 3 == 1) Thread.sleep(20);
                  return pool.drain();
                });
        go.countDown();
        if (r % 3 == 2) Thread.sleep(20);
        if (r % 2 == 0) model.close(); // the drain may race frees of handles too
        pool.close();
        assertTrue(pool.isClosed());
        assertThrows(IllegalStateException.class, pool::stats);
        try {
          DrainResult result = drain.get(TestSupport.HANG_SECONDS, TimeUnit.SECONDS);
          assertEquals(1, result.finished() + result.cancelled(), result.toString());
        } catch (java.util.concurrent.ExecutionException e) {
          assertTrue(e.getCause() instanceof IllegalStateException, String.valueOf(e.getCause()));
        }
        assertNull(outcome(call));
        model.close();
        pkg.close();
      }
    } finally {
      threads.shutdown();
    }
  }

  @Test
  void aClosedPoolRefusesTheLifecycleCalls() {
    Pool pool = Pool.create(1);
    pool.close();
    for (Executable call :
        List.<Executable>of(
            pool::size,
            pool::stats,
            () -> pool.resize(1),
            pool::drain,
            pool::prometheusText,
            pool::requestMetrics)) {
      expect(IllegalStateException.class, "closed", call);
    }
  }

  @Test
  void badPoolOptionsThrowTheCStatus() {
    int max = Manypy.maxInterpreters();
    long before = callbacksHeld();
    InterpreterFailedCallback callback = (i, why) -> {};
    expect(
        OutOfRangeException.class,
        "wait_ns must be >= 1, not 0",
        () ->
            Pool.create(new PoolOptions().growAfter(Duration.ZERO).onInterpreterFailed(callback)));
    expect(
        OutOfRangeException.class,
        "wait_ns must be >= 1, not -1000000",
        () -> Pool.create(new PoolOptions().growAfter(Duration.ofMillis(-1))));
    assertThrows(IllegalArgumentException.class, () -> new PoolOptions().growAfter(null));
    expect(
        OutOfRangeException.class,
        "negative",
        () -> Pool.create(new PoolOptions().maxInterpreters(-1)));
    expect(
        OutOfRangeException.class,
        "between the pool's starting number (2) and this "
            + "platform's limit ("
            + max
            + "), not 1",
        () ->
            Pool.create(
                new PoolOptions()
                    .interpreters(2)
                    .maxInterpreters(1)
                    .onInterpreterFailed(callback)));
    expect(
        OutOfRangeException.class,
        "not " + (max + 1),
        () -> Pool.create(new PoolOptions().maxInterpreters(max + 1)));
    expect(
        IllegalArgumentException.class, "NUL", () -> Pool.create(new PoolOptions().name("a\0b")));
    // A pool that was never made holds no callback: the options released it at once.
    assertEquals(before, callbacksHeld());
    // A maximum equal to the start, and a huge wait, are fine.
    try (Pool pool =
        Pool.create(
            new PoolOptions()
                .interpreters(1)
                .maxInterpreters(1)
                .growAfter(Duration.ofDays(365L * 1000)))) {
      assertEquals(1, pool.size());
    }
  }

  /** Interpreter-failed callbacks the glue holds (global references manypy has not released). */
  static long callbacksHeld() {
    return ManypyNative.manypy_jni_interpreter_failed_callbacks_held();
  }

  /**
   * The native pool holds the callback for as long as anything holds the pool, a Java handle or
   * not, and manypy then releases it, once; null removes it. (A real background start failure needs
   * a JVM without the static TLS setting: ProcessTest.)
   */
  @Test
  void theInterpreterFailedCallbackIsReleasedOnceThePoolIsGone() {
    long before = callbacksHeld();
    InterpreterFailedCallback callback = (i, why) -> {};
    try (Pool none =
        Pool.create(new PoolOptions().onInterpreterFailed(callback).onInterpreterFailed(null))) {
      assertEquals(before, callbacksHeld());
    }

    // The pool, its package and object closed first: the batcher still holds the pool.
    Pool pool = Pool.create(new PoolOptions().onInterpreterFailed(callback).serveEarly(true));
    assertEquals(before + 1, callbacksHeld(), "held by the pool (its options are freed)");
    TorchPackage pkg = pool.loadPackage(TestSupport.archive("version_1.pt"));
    ReplicatedObject model = pkg.loadPickle("model", "model.pkl");
    Batcher batcher = model.batcher("forward", null);
    pool.close();
    pkg.close();
    model.close();
    collect();
    assertEquals(before + 1, callbacksHeld(), "the batcher still holds the pool");
    batcher.close();
    // Released by the batcher's close, on this thread, at once: no collection needed.
    assertEquals(before, callbacksHeld(), "released with the pool's last holder");

    // An asynchronous call holds the pool after every handle is closed: the callback is
    // released when it completes, on the manypy thread that completes it.
    Pool held = Pool.create(new PoolOptions().interpreters(1).onInterpreterFailed(callback));
    ReplicatedObject stuck = TestSupport.loadModel(held, "stuck.pt");
    try (CancelToken token = new CancelToken();
        CallOptions options = new CallOptions().cancelToken(token)) {
      CompletableFuture<Object> spin = stuck.callAsync("spin", null, null, options);
      TestSupport.await(() -> held.inFlight() == 1, "spin() running");
      stuck.close();
      held.close();
      collect();
      assertEquals(before + 1, callbacksHeld(), "the call holds the pool");
      token.cancel();
      assertTrue(
          TestSupport.failure(spin) instanceof CancelledException,
          String.valueOf(TestSupport.failure(spin)));
    }
    TestSupport.await(() -> callbacksHeld() == before, "the callback released after the call");

    // A pool never closed: the Cleaner frees it once it is unreachable, and the callback with it.
    createUnclosed(callback);
    TestSupport.await(
        () -> {
          collect();
          return callbacksHeld() == before;
        },
        "the collected pool's callback released");
    assertEquals(before, callbacksHeld());
  }

  /** A pool with `callback`, dropped without being closed. */
  private static void createUnclosed(InterpreterFailedCallback callback) {
    Pool pool = Pool.create(new PoolOptions().onInterpreterFailed(callback));
    assertEquals(1, pool.size());
  }

  /** Collects garbage and gives the Cleaner a moment. */
  static void collect() {
    System.gc();
    try {
      Thread.sleep(50);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /**
   * The Java end of the callback, called as the glue calls it: the callback gets the index and the
   * status's exception; one that throws is reported, and so is an object that is not a callback;
   * handles it frees (the pool's, which must not be destroyed on the pool's own thread) are freed
   * on another thread.
   */
  @Test
  void theCallbackGetsItsExceptionAndMayCloseThePool() throws Exception {
    ConcurrentLinkedQueue<String> told = new ConcurrentLinkedQueue<>();
    ConcurrentLinkedQueue<Throwable> reported = new ConcurrentLinkedQueue<>();
    AtomicReference<String> freedOn = new AtomicReference<>();
    NativeResource probe =
        new NativeResource(1, address -> freedOn.set(Thread.currentThread().getName()), "Probe") {};
    Pool pool = Pool.create(1);
    InterpreterFailedCallback callback =
        (interpreter, why) -> {
          told.add(interpreter + " " + why.getClass().getSimpleName() + " " + why.getMessage());
          probe.close();
          pool.close();
          throw new IllegalStateException("thrown by the callback");
        };
    Manypy.setCallbackErrorHandler(reported::add);
    long status = ManypyNative.manypy_status_new(ErrorCode.STATIC_TLS.value(), "out of static TLS");
    try {
      CallbackDispatch.interpreterFailed(callback, 3, status);
      CallbackDispatch.interpreterFailed("not a callback", 4, status);
    } finally {
      ManypyNative.manypy_status_free(status);
      Manypy.setCallbackErrorHandler(null);
    }
    assertEquals(List.of("3 StaticTlsException out of static TLS"), List.copyOf(told));
    assertEquals(2, reported.size());
    assertEquals("thrown by the callback", reported.peek().getMessage());
    assertTrue(
        List.copyOf(reported).get(1) instanceof ClassCastException,
        String.valueOf(List.copyOf(reported).get(1)));
    TestSupport.await(() -> freedOn.get() != null, "the probe freed");
    assertEquals("manypy-deferred-free", freedOn.get());
    assertTrue(pool.isClosed());
    assertFalse(CallbackDispatch.inPoolCallback());
    // Outside a callback, frees happen at once, on the closing thread.
    NativeResource now =
        new NativeResource(1, address -> freedOn.set(Thread.currentThread().getName()), "Probe") {};
    now.close();
    assertEquals(Thread.currentThread().getName(), freedOn.get());
  }

  @Test
  void asynchronousCallsAfterADrainAreRefusedAtSubmission() {
    try (Pool pool = Pool.create(1);
        TorchPackage pkg = pool.loadPackage(TestSupport.archive("version_2.pt"));
        ReplicatedObject model = pkg.loadPickle("model", "model.pkl")) {
      CompletableFuture<Object> before = model.callMethodAsync("version");
      pool.drain();
      assertEquals(2L, TestSupport.value(before));
      expect(
          DrainingException.class, "draining", () -> model.callAsync(Tensor.of(new float[] {1})));
      TestSupport.await(() -> TestSupport.pendingAsync() == 0, "every native completion");
    }
  }
}
