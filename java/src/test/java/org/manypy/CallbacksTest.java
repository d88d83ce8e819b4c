package org.manypy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Operator callbacks as Java lambdas: context from the caller, threads the JVM did not start,
 * sampling, inputs, exceptions, removal; and the profiler.
 */
class CallbacksTest {
  static float[] input;

  /** What a callback saw, and on which Java thread. */
  record Seen(OpEvent event, String javaThread, boolean daemon) {}

  @BeforeAll
  static void load() {
    input = TestSupport.floats("python_heavy.input.bin");
  }

  @AfterAll
  static void restore() {
    Manypy.setCallbackErrorHandler(null);
  }

  /** Calls python_heavy from `threads` Java threads, each with its own request id. */
  static void serve(Pool pool, int threads, int calls) throws Exception {
    try (TorchPackage pkg = pool.loadPackage(TestSupport.archive("python_heavy.pt"));
        ReplicatedObject model = pkg.loadPickle("model", "model.pkl")) {
      List<Thread> workers = new ArrayList<>();
      Queue<Throwable> failures = new ConcurrentLinkedQueue<>();
      for (int t = 0; t < threads; ++t) {
        final int index = t;
        Thread worker =
            new Thread(
                () -> {
                  try (CallOptions options =
                          new CallOptions().context("heavy", "request-" + index);
                      Tensor x = Tensor.of(input, 4, 64)) {
                    for (int i = 0; i < calls; ++i) {
                      ((Map<?, ?>) model.call(null, List.of(x), null, options))
                          .values()
                          .forEach(
                              v -> {
                                if (v instanceof Tensor tensor) tensor.close();
                              });
                    }
                  } catch (Throwable e) {
                    failures.add(e);
                  }
                },
                "caller-" + index);
        workers.add(worker);
        worker.start();
      }
      for (Thread w : workers) w.join();
      if (!failures.isEmpty()) throw new AssertionError(failures.peek());
    }
  }

  @Test
  void contextTravelsWithEachCallAndNeverMixes() throws Exception {
    Queue<Seen> seen = new ConcurrentLinkedQueue<>();
    try (Pool pool = Pool.create(2);
        OpCallbackRegistration r =
            Manypy.addOpCallbacks(
                null,
                e -> seen.add(new Seen(e, Thread.currentThread().getName(), false)),
                1.0,
                false)) {
      serve(pool, 4, 5);
    }
    assertFalse(seen.isEmpty());
    Set<String> requests = ConcurrentHashMap.newKeySet();
    Set<Integer> interpreters = ConcurrentHashMap.newKeySet();
    for (Seen s : seen) {
      if (s.event().requestId().isEmpty()) continue; // another test's or a start-up operator
      // DIRECT mode: the operator ran on the Java thread that made the call.
      assertEquals("heavy", s.event().modelId());
      assertEquals(s.javaThread().replace("caller-", "request-"), s.event().requestId());
      assertTrue(s.event().endNanos() >= s.event().startNanos());
      assertTrue(s.event().name().startsWith("aten::"), s.event().name());
      requests.add(s.event().requestId());
      interpreters.add(s.event().interpreter());
    }
    assertEquals(Set.of("request-0", "request-1", "request-2", "request-3"), requests);
    assertEquals(2, interpreters.size(), "both interpreters report: " + interpreters);
  }

  @Test
  void libraryThreadsAreAttachedAsDaemons() throws Exception {
    Queue<Seen> seen = new ConcurrentLinkedQueue<>();
    try (Pool pool = Pool.create(new PoolOptions().interpreters(2).threadMode(ThreadMode.HANDOFF));
        OpCallbackRegistration r =
            Manypy.addOpCallbacks(
                e ->
                    seen.add(
                        new Seen(
                            e,
                            Thread.currentThread().getName(),
                            Thread.currentThread().isDaemon())),
                null,
                1.0,
                false)) {
      serve(pool, 2, 3);
    }
    long fromLibrary =
        seen.stream()
            .filter(s -> s.event().requestId().startsWith("request-"))
            .peek(s -> assertEquals("manypy-native", s.javaThread()))
            .peek(s -> assertTrue(s.daemon()))
            .count();
    assertTrue(fromLibrary > 0, "no operator reported from the library's threads");
  }

  @Test
  void samplingInputsAndRemoval() throws Exception {
    AtomicLong all = new AtomicLong();
    AtomicLong sampled = new AtomicLong();
    Queue<OpInput> shapes = new ConcurrentLinkedQueue<>();
    try (Pool pool = Pool.create(1)) {
      try (OpCallbackRegistration every =
              Manypy.addOpCallbacks(e -> all.incrementAndGet(), null, 1.0, false);
          OpCallbackRegistration tenth =
              Manypy.addOpCallbacks(
                  e -> {
                    sampled.incrementAndGet();
                    shapes.addAll(e.inputs());
                  },
                  null,
                  0.1,
                  true)) {
        serve(pool, 1, 30);
      }
      double ratio = (double) sampled.get() / all.get();
      assertTrue(all.get() > 3000, "operators: " + all.get());
      assertTrue(ratio > 0.07 && ratio < 0.13, "sampled " + sampled.get() + " of " + all.get());
      assertTrue(
          shapes.stream()
              .anyMatch(
                  i ->
                      i.kind() == OpInput.Kind.TENSOR
                          && i.dtype() == DType.FLOAT32
                          && i.shape().length == 2
                          && i.shape()[0] == 4),
          "no [4, n] float32 input among the sampled operators' inputs");
      // Removed: nothing more arrives.
      long before = all.get();
      serve(pool, 1, 2);
      assertEquals(before, all.get());
    }
  }

  @Test
  void exceptionsInCallbacksNeverReachTheModel() throws Exception {
    Queue<Throwable> reported = new ConcurrentLinkedQueue<>();
    Manypy.setCallbackErrorHandler(reported::add);
    try (Pool pool = Pool.create(1);
        OpCallbackRegistration r =
            Manypy.addOpCallbacks(
                e -> {
                  throw new IllegalStateException("thrown by a callback");
                },
                e -> {
                  throw new StackOverflowError("an Error too");
                },
                1.0,
                false)) {
      serve(pool, 2, 2); // calls succeed
    } finally {
      Manypy.setCallbackErrorHandler(null);
    }
    assertTrue(reported.stream().anyMatch(e -> e instanceof IllegalStateException));
    assertTrue(reported.stream().anyMatch(e -> e instanceof StackOverflowError));
  }

  @Test
  void torchScriptOnTheHostReportsInterpreterMinusOne() {
    Queue<Integer> interpreters = new ConcurrentLinkedQueue<>();
    try (ScriptModule module = ScriptModule.load(TestSupport.archive("python_heavy_script.pt"));
        OpCallbackRegistration r =
            Manypy.addOpCallbacks(null, e -> interpreters.add(e.interpreter()), 1.0, false);
        Tensor x = Tensor.of(input, 4, 64)) {
      ((Map<?, ?>) module.call(x)).size();
    }
    assertFalse(interpreters.isEmpty());
    assertTrue(interpreters.stream().allMatch(i -> i == -1), interpreters.toString());
  }

  @Test
  void profilerAggregatesByModel() throws Exception {
    try (Pool pool = Pool.create(1);
        Profiler profiler = Profiler.start(1.0)) {
      serve(pool, 2, 3);
      List<ProfileEntry> entries = profiler.snapshot();
      assertTrue(
          entries.stream()
              .anyMatch(
                  e ->
                      e.modelId().equals("heavy")
                          && e.operator().startsWith("aten::")
                          && e.count() > 0
                          && e.p99Nanos() >= e.p50Nanos()));
      assertTrue(
          profiler.prometheus().contains("manypy_operator_duration_seconds{model=\"heavy\""));
      assertTrue(profiler.chromeTrace().contains("\"traceEvents\""));
    }
  }
}
