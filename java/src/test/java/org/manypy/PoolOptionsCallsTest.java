package org.manypy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Pool.exec and Pool.eval with CallOptions (deadline, cancel token, pinned interpreter), and one
 * Tensor passed to many calls from many threads at once. The stops here end cleanly (the loops let
 * the stop's exception through), so no interpreter is retired and the class shares its JVM.
 */
class PoolOptionsCallsTest {
  static Pool pool;
  static ExecutorService threads;

  @BeforeAll
  static void start() {
    pool = Pool.create(2);
    pool.execAll("def spin():\n    while True:\n        pass\n");
    threads = Executors.newFixedThreadPool(4);
  }

  @AfterAll
  static void stop() {
    threads.shutdownNow();
    pool.close();
  }

  /** Every interpreter still serves, and serves the pinned interpreter's globals. */
  static void assertPoolServes() {
    for (int i = 0; i < pool.size(); ++i) {
      pool.checkInterpreter(i);
      assertEquals(42L, pool.eval(i, "6 * 7"));
    }
  }

  @Test
  void anExecStopsAtItsTimeoutAndThePoolServesOn() {
    try (CallOptions options = new CallOptions().timeout(Duration.ofMillis(200))) {
      // On one line: Python 3.11 sends no line event for its jump to itself,
      // and the stop still reaches it (core/interp/stop.c).
      DeadlineExceededException e =
          assertThrows(
              DeadlineExceededException.class, () -> pool.exec("while True: pass", options));
      assertEquals(ErrorCode.DEADLINE_EXCEEDED, e.code());
      // The same options bound an eval, and work when nothing runs long.
      assertThrows(DeadlineExceededException.class, () -> pool.eval("spin()", options));
      assertEquals(3L, pool.eval("1 + 2", options));
      pool.exec("ran_with_options = True", options);
    }
    assertPoolServes();
  }

  @Test
  void aCancelledTokenCancelsAnEval() throws Exception {
    try (CancelToken token = new CancelToken();
        CallOptions options = new CallOptions().cancelToken(token)) {
      Future<?> cancel =
          threads.submit(
              () -> {
                Thread.sleep(100); // lets the eval start; the test holds whichever comes first
                token.cancel();
                return null;
              });
      CancelledException e =
          assertThrows(CancelledException.class, () -> pool.eval("spin()", options));
      assertEquals(ErrorCode.CANCELLED, e.code());
      cancel.get(30, TimeUnit.SECONDS);
      // A token already cancelled fails an exec before anything runs.
      assertThrows(
          CancelledException.class,
          () -> pool.exec("import sys; sys.ran_after_cancel = True", options));
      assertEquals(false, pool.eval("hasattr(__import__('sys'), 'ran_after_cancel')"));
    }
    assertPoolServes();
  }

  @Test
  void theOptionsPinTheInterpreter() {
    pool.exec(0, "where = 0");
    pool.exec(1, "where = 1");
    for (int i = 0; i < pool.size(); ++i) {
      try (CallOptions options = new CallOptions().interpreter(i)) {
        assertEquals((long) i, pool.eval("where", options));
        pool.exec("where_exec = " + i, options);
        assertEquals((long) i, pool.eval(i, "where_exec"));
      }
    }
    try (CallOptions outside = new CallOptions().interpreter(2)) {
      assertThrows(OutOfRangeException.class, () -> pool.eval("1", outside));
      assertThrows(OutOfRangeException.class, () -> pool.exec("x = 1", outside));
    }
    // Null options: any interpreter, unbounded.
    assertEquals(5L, pool.eval("2 + 3", null));
    assertThrows(PythonSyntaxException.class, () -> pool.exec("def (:", null));
  }

  @Test
  void oneTensorServesConcurrentCallsWithoutCopies() throws Exception {
    try (ReplicatedObject model = TestSupport.loadModel(pool, "python_heavy.pt")) {
      float[] values = new float[4 * 64];
      for (int i = 0; i < values.length; ++i) values[i] = (float) Math.sin(i);
      Map<String, Object> kwargs = Map.of("steps", 3L, "normalize", false);
      try (Tensor x = Tensor.of(values, 4, 64)) {
        float[] expected;
        try (Tensor logits = logits(model.call(null, List.of(x), kwargs, null))) {
          expected = logits.toFloatArray();
        }
        List<Future<Integer>> workers = new ArrayList<>();
        for (int t = 0; t < 4; ++t) {
          workers.add(
              threads.submit(
                  () -> {
                    for (int i = 0; i < 25; ++i) {
                      try (Tensor logits = logits(model.call(null, List.of(x), kwargs, null))) {
                        assertArrayEquals(expected, logits.toFloatArray());
                      }
                    }
                    return 25;
                  }));
        }
        int calls = 0;
        for (Future<Integer> w : workers) calls += w.get(300, TimeUnit.SECONDS);
        assertEquals(100, calls);
        // Still the same tensor, unchanged: no call copied it or replaced it.
        assertArrayEquals(values, x.toFloatArray());
      }
    }
  }

  private static Tensor logits(Object result) {
    Map<?, ?> out = (Map<?, ?>) result;
    ((Tensor) out.get("norm")).close();
    return (Tensor) out.get("logits");
  }
}
