package org.manypy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.function.Executable;

/**
 * Deadlines and cancel tokens on stuck.pt (samples/models/stuck.py), whose methods never return, in
 * a pool of 2 interpreters of one thread mode (DeadlinesDirectTest, DeadlinesHandoffTest): a model
 * stuck in Python is stopped within its timeout plus 100 ms (the contract; the mechanism needs
 * about one GIL switch interval, 5 ms), its interpreter keeps serving, a waiting call gives up, and
 * a bound that does not expire changes nothing. A model that catches the stop and goes on is ended
 * when the pool's stop grace has passed, and its interpreter is retired: that test runs last,
 * because interpreter 1 never serves again, and each class runs in a JVM of its own (fresh-jvm),
 * because the process never gets that interpreter back (a torch 2.x process has only 7). Mirrors
 * tests/capi/capi_deadlines.c.
 */
@Tag("fresh-jvm")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
abstract class StuckModelTest {
  /** How late a stop may come after its deadline or its cancel. */
  static final long SLACK_NANOS = TimeUnit.MILLISECONDS.toNanos(100);

  /** How late an escalated stop (after the grace) may end the call. */
  static final long ESCALATION_SLACK_NANOS = TimeUnit.MILLISECONDS.toNanos(500);

  Pool pool;
  TorchPackage pkg;
  ReplicatedObject stuck;
  ExecutorService threads;

  abstract ThreadMode mode();

  /** The pool's stop grace: null for the library's default. */
  abstract Duration stopGrace();

  /** The library's default stop grace. */
  static final Duration DEFAULT_STOP_GRACE = Duration.ofMillis(100);

  @BeforeAll
  void load() {
    PoolOptions options = new PoolOptions().interpreters(2).threadMode(mode());
    pool = Pool.create(stopGrace() == null ? options : options.stopGrace(stopGrace()));
    pkg = pool.loadPackage(TestSupport.archive("stuck.pt"));
    stuck = pkg.loadPickle("model", "model.pkl");
    threads = Executors.newCachedThreadPool();
    // Replicas are made on an interpreter's first call: make them now, so
    // that no timeout below includes that.
    assertServes(0);
    assertServes(1);
  }

  @AfterAll
  void close() {
    threads.shutdownNow();
    stuck.close();
    pkg.close();
    pool.close();
  }

  /** Options pinned to `interpreter`, with a timeout (null: none) and a token (null: none). */
  static CallOptions pinned(int interpreter, Duration timeout, CancelToken token) {
    CallOptions options = new CallOptions().interpreter(interpreter).cancelToken(token);
    return timeout == null ? options : options.timeout(timeout);
  }

  /** stuck's forward(x) on `interpreter` gives x * 2. */
  void assertServes(int interpreter) {
    try (CallOptions options = pinned(interpreter, null, null);
        Tensor out =
            (Tensor) stuck.call(null, List.of(Tensor.of(new float[] {1, 2, 3})), null, options)) {
      assertArrayEquals(new float[] {2, 4, 6}, out.toFloatArray());
    }
  }

  /**
   * Runs `call`, which must throw `type`, naming the stop in its message and, when Python was
   * stopped while running (`ran`), carrying the Python type and a traceback through `where`.
   * Returns the exception.
   */
  static <T extends ManypyException> T expectStop(
      Class<T> type, String where, boolean ran, Executable call) {
    T e = assertThrows(type, call);
    boolean cancelled = e instanceof CancelledException;
    assertEquals(cancelled ? ErrorCode.CANCELLED : ErrorCode.DEADLINE_EXCEEDED, e.code());
    assertTrue(
        e.getMessage().contains(cancelled ? "cancelled" : "deadline exceeded"), e.getMessage());
    if (ran) {
      assertEquals(cancelled ? "manypy.Cancelled" : "manypy.DeadlineExceeded", e.pythonType());
      assertTrue(e.pythonTraceback().contains(where), e.pythonTraceback());
    }
    return e;
  }

  /** Asserts a stop came after `timeout` and no later than 100 ms past it. */
  static void assertStoppedInTime(long startNanos, Duration timeout, String what) {
    assertStoppedInTime(startNanos, timeout, what, SLACK_NANOS);
  }

  static void assertStoppedInTime(long startNanos, Duration timeout, String what, long slackNanos) {
    long elapsed = System.nanoTime() - startNanos;
    String ms = (elapsed / 1_000_000) + " ms";
    assertTrue(elapsed >= timeout.toNanos(), what + " stopped early, after " + ms);
    assertTrue(
        elapsed <= timeout.toNanos() + slackNanos,
        what + " stopped after " + ms + " (timeout " + timeout.toMillis() + " ms)");
  }

  @Test
  void aPythonLoopStopsAtItsTimeoutAndTheInterpreterServesOn() {
    Duration timeout = Duration.ofMillis(300);
    try (CallOptions options = pinned(0, timeout, null)) {
      long start = System.nanoTime();
      expectStop(
          DeadlineExceededException.class,
          "spin",
          true,
          () -> stuck.call("spin", null, null, options));
      assertStoppedInTime(start, timeout, "spin()");
    }
    assertServes(0);
  }

  /**
   * A model that catches every stop: the stop escalates once the grace has passed, the call ends,
   * and interpreter 1 is retired for the rest of the JVM; the pool replaces it in the same index
   * (docs/serving.md, "Retired interpreters") before the call returns. Last in the class: the
   * replacement's start is what follows.
   */
  @Test
  @Order(Integer.MAX_VALUE)
  void catchingTheStopRetiresTheInterpreter() {
    Duration timeout = Duration.ofMillis(200);
    Duration grace = stopGrace() == null ? DEFAULT_STOP_GRACE : stopGrace();
    String graceText = "within its " + grace.toMillis() + " ms grace period";
    try (CallOptions options = pinned(1, timeout, null)) {
      long start = System.nanoTime();
      DeadlineExceededException e =
          expectStop(
              DeadlineExceededException.class,
              "spin_catching",
              true,
              () -> stuck.call("spin_catching", null, null, options));
      // An escalation is a second stop, and then the retirement: the same
      // bound as capi_deadlines.c's, which leaves room for a loaded machine.
      assertStoppedInTime(
          start, timeout.plus(grace), "spin_catching() with its grace", ESCALATION_SLACK_NANOS);
      assertTrue(e.getMessage().contains("the interpreter was retired"), e.getMessage());
      assertTrue(e.getMessage().contains(graceText), e.getMessage());

      // Replaced: index 1 names the replacement, which serves once it has started (calls pinned
      // to it wait for it).
      PoolStats stats = pool.stats();
      assertEquals(1, stats.replaced(), stats.toString());
      assertFalse(stats.noRoom(), stats.toString());
      pool.checkInterpreter(1);
      pool.checkInterpreter(0);
      assertThrows(OutOfRangeException.class, () -> pool.checkInterpreter(2));
      assertThrows(OutOfRangeException.class, () -> pool.checkInterpreter(Pool.ANY_INTERPRETER));
    }
    for (int k = 0; k < 4; ++k) assertServes(Pool.ANY_INTERPRETER);
    assertServes(0);
    assertServes(1);
  }

  @Test
  void anAbsoluteDeadline() {
    Duration budget = Duration.ofMillis(150);
    try (CallOptions options = pinned(0, null, null)) {
      long start = System.nanoTime();
      options.deadlineNanos(Manypy.monotonicNanos() + budget.toNanos());
      expectStop(
          DeadlineExceededException.class,
          "spin",
          true,
          () -> stuck.call("spin", null, null, options));
      assertStoppedInTime(start, budget, "spin() with a deadline");
      // Now past: later calls with it fail without running.
      ManypyException e =
          expectStop(
              DeadlineExceededException.class,
              "",
              false,
              () -> stuck.call(null, List.of(Tensor.of(new float[] {1})), null, options));
      assertEquals("", e.pythonType());
    }
  }

  @Test
  void aCancelFromAnotherJavaThreadStopsEveryCallUsingTheToken() throws Exception {
    CancelToken token = new CancelToken();
    CallOptions options0 = pinned(0, null, token);
    CallOptions options1 = pinned(1, null, token);
    // One token, two running calls (one per interpreter), cancelled from a
    // third thread 300 ms in.
    Future<CancelledException> other =
        threads.submit(
            () ->
                assertThrows(
                    CancelledException.class, () -> stuck.call("spin", null, null, options1)));
    AtomicLong cancelledAt = new AtomicLong();
    Future<?> canceller =
        threads.submit(
            () -> {
              Thread.sleep(300);
              cancelledAt.set(System.nanoTime());
              token.cancel();
              return null;
            });
    expectStop(
        CancelledException.class, "spin", true, () -> stuck.call("spin", null, null, options0));
    long late = System.nanoTime() - cancelledAt.get();
    canceller.get();
    assertTrue(late <= SLACK_NANOS, "stopped " + late / 1_000_000 + " ms after the cancel");
    CancelledException otherStop = other.get(10, TimeUnit.SECONDS);
    assertEquals("manypy.Cancelled", otherStop.pythonType());
    assertTrue(otherStop.pythonTraceback().contains("spin"), otherStop.pythonTraceback());
    assertTrue(token.isCancelled());
    token.close(); // the options keep the native token: still cancelled for them
    // Later calls with the token fail at once, without running.
    long start = System.nanoTime();
    ManypyException again =
        expectStop(
            CancelledException.class,
            "",
            false,
            () -> stuck.call(null, List.of(Tensor.of(new float[] {1})), null, options0));
    assertEquals("", again.pythonType());
    assertTrue(System.nanoTime() - start <= SLACK_NANOS, "a call with a cancelled token ran");
    expectStop(CancelledException.class, "", false, () -> stuck.getAttr("training", options1));
    options0.close();
    options1.close();
    assertServes(0);
    assertServes(1);
  }

  @Test
  void aDeadlineExpiresWhileWaitingForABusyInterpreter() throws Exception {
    // Interpreter 0 is busy for 1 s; a call pinned to it with a 200 ms
    // timeout gives up at its deadline (HANDOFF: it leaves the queue;
    // DIRECT: it gets the GIL, which time.sleep released, starts, and is
    // stopped), and the busy call is unaffected.
    Future<Object> busy;
    try (CallOptions busyOptions = pinned(0, null, null)) {
      busy = threads.submit(() -> stuck.call("sleep", List.of(1.0), null, busyOptions));
      Thread.sleep(100); // the sleep call has started
      Duration timeout = Duration.ofMillis(200);
      try (CallOptions options = pinned(0, timeout, null)) {
        long start = System.nanoTime();
        expectStop(
            DeadlineExceededException.class,
            "spin",
            false,
            () -> stuck.call("spin", null, null, options));
        assertStoppedInTime(start, timeout, "a call waiting for interpreter 0");
      }
      assertEquals(1.0, busy.get(10, TimeUnit.SECONDS));
    }
    assertServes(0);
  }

  @Test
  void aBoundThatDoesNotExpireChangesNothing() {
    try (CancelToken token = new CancelToken();
        CallOptions timeout = pinned(0, Duration.ofSeconds(10), token);
        CallOptions deadline = pinned(1, null, token)) {
      deadline.deadlineNanos(Manypy.monotonicNanos() + Duration.ofSeconds(10).toNanos());
      for (CallOptions options : List.of(timeout, deadline)) {
        for (int k = 0; k < 20; ++k) {
          try (Tensor out =
              (Tensor) stuck.call(null, List.of(Tensor.of(new float[] {5, -1})), null, options)) {
            assertArrayEquals(new float[] {10, -2}, out.toFloatArray());
          }
        }
        assertEquals(false, stuck.getAttr("training", options));
        assertEquals(0.0, stuck.call("sleep", List.of(0.0), null, options));
      }
      assertFalse(token.isCancelled());
    }
  }

  @Test
  void getattrOfALoopingPropertyStops() {
    Duration timeout = Duration.ofMillis(200);
    try (CallOptions options = pinned(1, timeout, null)) {
      long start = System.nanoTime();
      expectStop(
          DeadlineExceededException.class,
          "spinning_property",
          true,
          () -> stuck.getAttr("spinning_property", options));
      assertStoppedInTime(start, timeout, "getattr(spinning_property)");
    }
    assertServes(1);
  }
}
