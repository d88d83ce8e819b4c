package org.manypy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * callAsync on objects and script modules, on real models through the real library: results from
 * many threads, where completions and dependent stages run, executors that refuse or throw, refused
 * submissions, model errors, and closing handles with thousands of calls in flight. Nothing here
 * stops a running call (AsyncStopsTest does, in a JVM of its own). After every test, every native
 * completion has arrived (the glue's count of pending calls is 0).
 */
class AsyncCallsTest {
  static Pool pool;
  static TorchPackage pkg;
  static ReplicatedObject model; // batching.pt: forward(x) = x * 2 + 1, fail(x) raises
  static ScriptModule loop; // loop_script.pt: forward(x, n) adds 1 n times

  @BeforeAll
  static void load() {
    pool = Pool.create(new PoolOptions().interpreters(2));
    pkg = pool.loadPackage(TestSupport.archive("batching.pt"));
    model = pkg.loadPickle("model", "model.pkl");
    loop = ScriptModule.load(TestSupport.archive("loop_script.pt"));
  }

  @AfterAll
  static void close() {
    loop.close();
    model.close();
    pkg.close();
    pool.close();
  }

  @AfterEach
  void everyCompletionArrived() {
    TestSupport.await(() -> TestSupport.pendingAsync() == 0, "every native completion");
  }

  /** A [1, 4] input unique to `seed`, and what forward gives for it. */
  static float[] input(int seed) {
    return new float[] {seed, seed + 0.25f, -seed, seed * 0.5f};
  }

  static float[] expected(int seed) {
    float[] x = input(seed);
    float[] y = new float[x.length];
    for (int i = 0; i < x.length; ++i) y[i] = x[i] * 2 + 1;
    return y;
  }

  static void assertForward(int seed, Object result) {
    try (Tensor y = (Tensor) result) {
      assertArrayEquals(expected(seed), y.toFloatArray(), "request " + seed);
      assertArrayEquals(new long[] {1, 4}, y.shape());
    }
  }

  @Test
  void resultsAreRightFromManyThreads() throws Exception {
    int threads = 8;
    int perThread = 200;
    ExecutorService submitters = Executors.newFixedThreadPool(threads);
    try {
      List<Future<List<CompletableFuture<Object>>>> submitted = new ArrayList<>();
      for (int t = 0; t < threads; ++t) {
        int base = t * perThread;
        submitted.add(
            submitters.submit(
                () -> {
                  List<CompletableFuture<Object>> mine = new ArrayList<>();
                  for (int i = 0; i < perThread; ++i) {
                    try (Tensor x = Tensor.of(input(base + i), 1, 4)) {
                      // Every argument form; the Tensor may be closed once submitted.
                      mine.add(
                          switch (i % 3) {
                            case 0 -> model.callAsync(x);
                            case 1 -> model.callMethodAsync("forward", x);
                            default -> model.callAsync(null, List.of(x), null, null);
                          });
                    }
                  }
                  return mine;
                }));
      }
      for (int t = 0; t < threads; ++t) {
        List<CompletableFuture<Object>> mine =
            submitted.get(t).get(TestSupport.HANG_SECONDS, TimeUnit.SECONDS);
        for (int i = 0; i < perThread; ++i)
          assertForward(t * perThread + i, TestSupport.value(mine.get(i)));
      }
    } finally {
      submitters.shutdownNow();
    }
  }

  @Test
  void aHandoffPoolMixesSynchronousAndAsynchronousCalls() throws Exception {
    try (Pool handoff =
            Pool.create(new PoolOptions().interpreters(2).threadMode(ThreadMode.HANDOFF));
        TorchPackage p = handoff.loadPackage(TestSupport.archive("batching.pt"));
        ReplicatedObject m = p.loadPickle("model", "model.pkl")) {
      ExecutorService sync = Executors.newFixedThreadPool(2);
      try {
        List<Future<?>> syncCalls = new ArrayList<>();
        for (int t = 0; t < 2; ++t) {
          int base = 10_000 * (t + 1);
          syncCalls.add(
              sync.submit(
                  () -> {
                    for (int i = 0; i < 100; ++i)
                      assertForward(base + i, m.call(Tensor.of(input(base + i), 1, 4)));
                    return null;
                  }));
        }
        List<CompletableFuture<Object>> futures = new ArrayList<>();
        for (int i = 0; i < 300; ++i) futures.add(m.callAsync(Tensor.of(input(i), 1, 4)));
        for (int i = 0; i < 300; ++i) assertForward(i, TestSupport.value(futures.get(i)));
        for (Future<?> f : syncCalls) f.get(TestSupport.HANG_SECONDS, TimeUnit.SECONDS);
      } finally {
        sync.shutdownNow();
      }
    }
  }

  @Test
  void torchScriptOnTheHostAsynchronously() {
    List<CompletableFuture<Object>> futures = new ArrayList<>();
    for (int n = 0; n < 64; ++n) {
      Tensor x = Tensor.of(new float[] {n, -n});
      futures.add(
          n % 2 == 0
              ? loop.callAsync(x, (long) n)
              : loop.callAsync(null, List.of(x, (long) n), null));
    }
    for (int n = 0; n < 64; ++n) {
      try (Tensor y = (Tensor) TestSupport.value(futures.get(n))) {
        assertArrayEquals(new float[] {2 * n, 0}, y.toFloatArray());
      }
    }
  }

  /** An executor that runs tasks on its own named threads, once `gate` is open, and counts them. */
  static final class CountingExecutor implements java.util.concurrent.Executor, AutoCloseable {
    final AtomicInteger tasks = new AtomicInteger();
    final CountDownLatch gate;
    final ExecutorService threads =
        Executors.newFixedThreadPool(
            2,
            r -> {
              Thread thread = new Thread(r, "caller-executor");
              thread.setDaemon(true);
              return thread;
            });

    CountingExecutor() {
      this(new CountDownLatch(0));
    }

    CountingExecutor(CountDownLatch gate) {
      this.gate = gate;
    }

    @Override
    public void execute(Runnable task) {
      tasks.incrementAndGet();
      threads.execute(
          () -> {
            try {
              gate.await();
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
            task.run();
          });
    }

    @Override
    public void close() {
      threads.shutdownNow();
    }
  }

  @Test
  void completionsGoThroughTheExecutorAndStagesNeverRunOnManypyThreads() {
    Set<String> stageThreads = ConcurrentHashMap.newKeySet();
    try (CountingExecutor executor = new CountingExecutor()) {
      List<CompletableFuture<Object>> chained = new ArrayList<>();
      int calls = 50;
      for (int i = 0; i < calls; ++i) {
        int seed = i;
        CompletableFuture<Object> future =
            model.callAsync(null, List.of(Tensor.of(input(seed), 1, 4)), null, null, executor);
        // A dependent stage that makes a synchronous call of the same object:
        // on an interpreter's own thread it would hold up that interpreter.
        chained.add(
            future.thenApply(
                first -> {
                  stageThreads.add(Thread.currentThread().getName());
                  assertForward(seed, first);
                  return model.call(Tensor.of(input(seed + 1000), 1, 4));
                }));
      }
      for (int i = 0; i < calls; ++i) assertForward(i + 1000, TestSupport.value(chained.get(i)));
      // Every completion was handed to the executor, whether or not its stage
      // was attached in time to run there (else it ran on this thread).
      assertEquals(calls, executor.tasks.get());
    }
    assertFalse(stageThreads.contains("manypy-native"), stageThreads.toString());
    for (String name : stageThreads) {
      assertTrue(
          name.equals("caller-executor") || name.equals(Thread.currentThread().getName()), name);
    }
    // A direct executor (or a CallerRunsPolicy) would run the task on
    // manypy's thread: the binding sees that and the common pool runs it.
    stageThreads.clear();
    List<CompletableFuture<Object>> direct = new ArrayList<>();
    for (int i = 0; i < 20; ++i) {
      int seed = i;
      direct.add(
          model
              .callAsync(null, List.of(Tensor.of(input(seed), 1, 4)), null, null, Runnable::run)
              .thenApply(
                  v -> {
                    stageThreads.add(Thread.currentThread().getName());
                    return v;
                  }));
    }
    for (int i = 0; i < 20; ++i) assertForward(i, TestSupport.value(direct.get(i)));
    assertFalse(stageThreads.contains("manypy-native"), stageThreads.toString());
    // The default: the common pool. Its *Async stages run on the future's executor.
    CompletableFuture<Object> future = model.callAsync(Tensor.of(input(7), 1, 4));
    CompletableFuture<String> where =
        future.thenApplyAsync(
            v -> {
              Values.closeTensors(v);
              return Thread.currentThread().getName();
            });
    assertTrue(
        ((String) TestSupport.value(where)).startsWith("ForkJoinPool.commonPool-worker"),
        (String) TestSupport.value(where));
    assertSame(java.util.concurrent.ForkJoinPool.commonPool(), future.defaultExecutor());
  }

  @Test
  void aSlowStageHoldsUpNoInterpreter() throws Exception {
    // One interpreter. The first call's stage waits until 20 later calls on
    // the same interpreter have completed: if it ran on the interpreter's
    // thread, those calls could never run, and this would hang. Its
    // executor holds the completion until the stage is attached, so that
    // the stage runs where the completion is delivered (and not on this
    // thread, as a stage attached to a completed future would). The stage
    // blocks, so it has an executor of its own: on the common pool (one
    // worker on a 2-core machine) it would hold up the other completions,
    // as docs/java.md says.
    CountDownLatch attached = new CountDownLatch(1);
    try (Pool one = Pool.create(1);
        TorchPackage p = one.loadPackage(TestSupport.archive("batching.pt"));
        ReplicatedObject m = p.loadPickle("model", "model.pkl");
        CountingExecutor own = new CountingExecutor(attached)) {
      CountDownLatch later = new CountDownLatch(20);
      AtomicReference<String> stageThread = new AtomicReference<>();
      CompletableFuture<Object> slow =
          m.callAsync(null, List.of(Tensor.of(input(1), 1, 4)), null, null, own)
              .thenApply(
                  v -> {
                    stageThread.set(Thread.currentThread().getName());
                    try {
                      assertTrue(
                          later.await(TestSupport.HANG_SECONDS, TimeUnit.SECONDS),
                          "later calls never ran");
                    } catch (InterruptedException e) {
                      throw new AssertionError(e);
                    }
                    return v;
                  });
      attached.countDown();
      List<CompletableFuture<Object>> others = new ArrayList<>();
      for (int i = 0; i < 20; ++i) {
        others.add(
            m.callAsync(Tensor.of(input(100 + i), 1, 4)).whenComplete((v, e) -> later.countDown()));
      }
      for (int i = 0; i < 20; ++i) assertForward(100 + i, TestSupport.value(others.get(i)));
      assertForward(1, TestSupport.value(slow));
      assertEquals("caller-executor", stageThread.get());
    }
  }

  @Test
  void aStageThatThrowsFailsOnlyItsOwnFuture() {
    CompletableFuture<Object> future = model.callAsync(Tensor.of(input(3), 1, 4));
    CompletableFuture<Object> throwing =
        future.thenApply(
            v -> {
              throw new IllegalStateException("the service's own bug");
            });
    CompletableFuture<Object> erroring =
        future.thenApply(
            v -> {
              throw new StackOverflowError("an Error in a stage");
            });
    assertInstanceOf(IllegalStateException.class, TestSupport.failure(throwing));
    assertInstanceOf(StackOverflowError.class, TestSupport.failure(erroring));
    assertForward(3, TestSupport.value(future));
    // The model and the completion path serve on.
    assertForward(4, TestSupport.value(model.callAsync(Tensor.of(input(4), 1, 4))));
  }

  @Test
  void anExecutorThatRefusesOrThrowsLosesNoCompletion() throws Exception {
    List<Throwable> reported = new java.util.concurrent.CopyOnWriteArrayList<>();
    Manypy.setCallbackErrorHandler(reported::add);
    ExecutorService shutDown = Executors.newSingleThreadExecutor();
    shutDown.shutdown();
    try {
      List<java.util.concurrent.Executor> executors =
          List.of(
              shutDown, // RejectedExecutionException
              task -> {
                throw new OutOfMemoryError("an executor out of memory");
              },
              task -> {
                throw new IllegalStateException("a broken executor");
              });
      for (int i = 0; i < executors.size(); ++i) {
        CompletableFuture<Object> future =
            model.callAsync(null, List.of(Tensor.of(input(i), 1, 4)), null, null, executors.get(i));
        assertForward(i, TestSupport.value(future));
        // A failure is delivered too.
        CompletableFuture<Object> failing =
            model.callAsync(
                "fail", List.of(Tensor.of(input(i), 1, 4)), null, null, executors.get(i));
        assertInstanceOf(PythonException.class, TestSupport.failure(failing));
      }
      TestSupport.await(() -> reported.size() == 6, "six rejections reported");
      assertInstanceOf(RejectedExecutionException.class, reported.get(0));
      assertInstanceOf(OutOfMemoryError.class, reported.get(2));
      assertInstanceOf(IllegalStateException.class, reported.get(4));
    } finally {
      Manypy.setCallbackErrorHandler(null);
    }
  }

  @Test
  void modelErrorsFailTheFuture() {
    PythonException e =
        assertInstanceOf(
            PythonException.class,
            TestSupport.failure(model.callMethodAsync("fail", Tensor.of(input(1), 1, 4))));
    assertEquals(ErrorCode.PYTHON, e.code());
    assertEquals("ValueError", e.pythonType());
    assertTrue(e.getMessage().contains("refused a batch of 1 rows"), e.getMessage());
    assertTrue(e.pythonTraceback().contains("fail"), e.pythonTraceback());
    // join() wraps it in CompletionException, as for any future.
    CompletableFuture<Object> failed = model.callMethodAsync("fail", Tensor.of(input(1), 1, 4));
    CompletionException wrapped = assertThrows(CompletionException.class, failed::join);
    assertInstanceOf(PythonException.class, wrapped.getCause());
    // TorchScript: a wrong argument fails in the module.
    assertInstanceOf(
        ManypyException.class,
        failureOrRefusal(() -> loop.callAsync(Tensor.of(new float[] {1}), "not a number")));
    // A missing method: refused at once or failed, as the C side decides;
    // either way NoSuchNameException.
    assertInstanceOf(
        NoSuchNameException.class,
        failureOrRefusal(() -> model.callMethodAsync("no_such_method", Tensor.of(input(1), 1, 4))));
  }

  /** What a call threw at submission, or what its future failed with. */
  static Throwable failureOrRefusal(java.util.function.Supplier<CompletableFuture<Object>> call) {
    CompletableFuture<Object> future;
    try {
      future = call.get();
    } catch (RuntimeException refused) {
      return refused;
    }
    return TestSupport.failure(future);
  }

  @Test
  void refusedSubmissionsThrowAtOnceAsTheSynchronousCallWould() {
    long pending = TestSupport.pendingAsync();
    Tensor x = Tensor.of(input(1), 1, 4);
    // Arguments Java cannot pass.
    assertThrows(IllegalArgumentException.class, () -> model.callAsync(new Object()));
    assertThrows(
        IllegalArgumentException.class,
        () -> model.callAsync(null, List.of(x), Map.of("k", new Thread()), null));
    assertThrows(
        IllegalArgumentException.class,
        () -> model.callAsync(null, List.of(x), null, null, null)); // no executor
    // Options the C API refuses at submission.
    try (CallOptions outside = new CallOptions().interpreter(5)) {
      assertThrows(
          OutOfRangeException.class, () -> model.callAsync(null, List.of(x), null, outside));
    }
    try (CallOptions past = new CallOptions().deadlineNanos(1)) {
      DeadlineExceededException e =
          assertThrows(
              DeadlineExceededException.class, () -> model.callAsync(null, List.of(x), null, past));
      assertEquals("", e.pythonType()); // nothing ran
    }
    try (CancelToken token = new CancelToken();
        CallOptions options = new CallOptions().cancelToken(token)) {
      token.cancel();
      assertThrows(
          CancelledException.class, () -> model.callAsync(null, List.of(x), null, options));
      assertThrows(
          CancelledException.class, () -> loop.callAsync(null, List.of(x, 1L), null, options));
      // Also once the token itself is closed: the options keep it, cancelled.
      token.close();
      assertThrows(
          CancelledException.class, () -> model.callAsync(null, List.of(x), null, options));
    }
    // Closed handles: the object, the options, the module, a Tensor argument.
    CallOptions closedOptions = new CallOptions();
    closedOptions.close();
    assertThrows(
        IllegalStateException.class, () -> model.callAsync(null, List.of(x), null, closedOptions));
    try (TorchPackage p = pool.loadPackage(TestSupport.archive("batching.pt"))) {
      ReplicatedObject closed = p.loadPickle("model", "model.pkl");
      closed.close();
      assertThrows(IllegalStateException.class, () -> closed.callAsync(x));
    }
    ScriptModule closedModule = ScriptModule.load(TestSupport.archive("loop_script.pt"));
    closedModule.close();
    assertThrows(IllegalStateException.class, () -> closedModule.callAsync(x, 1L));
    Tensor closedTensor = Tensor.of(input(1), 1, 4);
    closedTensor.close();
    assertThrows(IllegalStateException.class, () -> model.callAsync(closedTensor));
    // Nothing refused was left pending, and the object serves on.
    assertEquals(pending, TestSupport.pendingAsync());
    assertForward(1, TestSupport.value(model.callAsync(x)));
  }

  @Test
  void optionsApplyToAsynchronousCalls() {
    // Context, pinning and a bound that does not expire: the call serves as
    // usual, and operator callbacks see the options' context (which the
    // binding copies into the call's own options).
    Set<String> contexts = ConcurrentHashMap.newKeySet();
    try (OpCallbackRegistration registration =
        Manypy.addOpCallbacks(
            event -> contexts.add(event.modelId() + "/" + event.requestId()), null, 1.0, false)) {
      for (int interpreter = 0; interpreter < 2; ++interpreter) {
        try (CancelToken token = new CancelToken();
            CallOptions options =
                new CallOptions()
                    .interpreter(interpreter)
                    .timeout(Duration.ofSeconds(60))
                    .cancelToken(token)
                    .context("batching", "r-" + interpreter)) {
          assertForward(
              interpreter,
              TestSupport.value(
                  model.callAsync(
                      null, List.of(Tensor.of(input(interpreter), 1, 4)), null, options)));
          assertFalse(token.isCancelled());
        }
      }
    }
    assertTrue(
        contexts.contains("batching/r-0") && contexts.contains("batching/r-1"),
        contexts.toString());
  }

  @Test
  void theCallersTokenAndTheFuturesCancelAreIndependent() {
    try (CancelToken token = new CancelToken();
        CallOptions options = new CallOptions().cancelToken(token)) {
      // Cancelling a completed future changes nothing, and neither touches the other.
      CompletableFuture<Object> done =
          model.callAsync(null, List.of(Tensor.of(input(2), 1, 4)), null, options);
      assertForward(2, TestSupport.value(done));
      assertFalse(done.cancel(true));
      assertFalse(token.isCancelled());
      assertForward(
          3,
          TestSupport.value(
              model.callAsync(null, List.of(Tensor.of(input(3), 1, 4)), null, options)));
    }
  }

  @Test
  void closingEverythingWithThousandsOfCallsInFlight() throws Exception {
    // Its own pool, package and object, closed (in each order) right after
    // 3000 submissions: every future completes, with its right result.
    List<Consumer<List<AutoCloseable>>> orders =
        List.of(
            handles ->
                closeAll(handles.get(2), handles.get(1), handles.get(0)), // object, package, pool
            handles -> closeAll(handles.get(0), handles.get(1), handles.get(2)), // pool first
            handles ->
                closeAll(handles.get(1), handles.get(0), handles.get(2))); // package, pool, object
    for (Consumer<List<AutoCloseable>> order : orders) {
      Pool p = Pool.create(2);
      TorchPackage k = p.loadPackage(TestSupport.archive("batching.pt"));
      ReplicatedObject m = k.loadPickle("model", "model.pkl");
      List<CompletableFuture<Object>> futures = new ArrayList<>();
      for (int i = 0; i < 3000; ++i) futures.add(m.callAsync(Tensor.of(input(i), 1, 4)));
      order.accept(List.of(p, k, m));
      assertThrows(IllegalStateException.class, () -> m.callAsync(Tensor.of(input(0), 1, 4)));
      for (int i = 0; i < futures.size(); ++i) assertForward(i, TestSupport.value(futures.get(i)));
    }
  }

  @Test
  void closingFromAStageAndClosingAModuleInFlight() {
    TorchPackage k = pool.loadPackage(TestSupport.archive("batching.pt"));
    ReplicatedObject m = k.loadPickle("model", "model.pkl");
    k.close();
    List<CompletableFuture<Object>> futures = new ArrayList<>();
    for (int i = 0; i < 200; ++i) futures.add(m.callAsync(Tensor.of(input(i), 1, 4)));
    // The first completion closes the object the others still run on.
    CompletableFuture<Object> closer =
        futures
            .get(0)
            .thenApply(
                v -> {
                  m.close();
                  return v;
                });
    assertForward(0, TestSupport.value(closer));
    for (int i = 1; i < futures.size(); ++i) assertForward(i, TestSupport.value(futures.get(i)));

    ScriptModule module = ScriptModule.load(TestSupport.archive("loop_script.pt"));
    List<CompletableFuture<Object>> scripted = new ArrayList<>();
    for (int n = 0; n < 200; ++n)
      scripted.add(module.callAsync(Tensor.of(new float[] {0}), (long) n));
    module.close();
    for (int n = 0; n < 200; ++n) {
      try (Tensor y = (Tensor) TestSupport.value(scripted.get(n))) {
        assertArrayEquals(new float[] {n}, y.toFloatArray());
      }
    }
  }

  @Test
  void completionThreadsAreDaemons() {
    for (int i = 0; i < 20; ++i)
      assertForward(i, TestSupport.value(model.callAsync(Tensor.of(input(i), 1, 4))));
    List<Thread> attached = new ArrayList<>();
    for (Thread thread : Thread.getAllStackTraces().keySet()) {
      if (thread.getName().equals("manypy-native")) attached.add(thread);
    }
    assertNotEquals(0, attached.size(), "no manypy thread was attached to deliver completions");
    for (Thread thread : attached) assertTrue(thread.isDaemon(), thread.toString());
  }

  @Test
  void theGaugesSettleAtZero() {
    List<CompletableFuture<Object>> futures = new ArrayList<>();
    for (int i = 0; i < 100; ++i) futures.add(model.callAsync(Tensor.of(input(i), 1, 4)));
    assertTrue(pool.inFlight() >= 0 && pool.queued() >= 0);
    for (int i = 0; i < 100; ++i) assertForward(i, TestSupport.value(futures.get(i)));
    TestSupport.await(
        () -> pool.inFlight() == 0 && pool.queued() == 0, "an idle pool's gauges at 0");
    Pool closed = Pool.create(1);
    closed.close();
    assertThrows(IllegalStateException.class, closed::queued);
    assertThrows(IllegalStateException.class, closed::inFlight);
  }

  static void closeAll(AutoCloseable... handles) {
    for (AutoCloseable handle : handles) {
      try {
        handle.close();
      } catch (Exception e) {
        throw new AssertionError(e);
      }
    }
  }
}
