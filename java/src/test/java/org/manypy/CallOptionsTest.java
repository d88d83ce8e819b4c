package org.manypy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.time.temporal.ChronoUnit;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Timeouts, deadlines and cancel tokens on TorchScript on the host (loop_script.pt: forward(x, n)
 * adds 1 n times), the options' argument checks, and CancelToken's lifetime rules. No pool needed.
 */
class CallOptionsTest {
  static ScriptModule loop;
  static ScheduledExecutorService timer;

  @BeforeAll
  static void load() {
    loop = ScriptModule.load(TestSupport.archive("loop_script.pt"));
    timer = Executors.newSingleThreadScheduledExecutor();
  }

  @AfterAll
  static void close() {
    timer.shutdownNow();
    loop.close();
  }

  static Object runLoop(long n, CallOptions options) {
    return loop.call(null, List.of(Tensor.of(new float[] {0, 0}), n), null, options);
  }

  static void assertLoopGives(float expected, CallOptions options) {
    try (Tensor out = (Tensor) runLoop(3, options)) {
      assertArrayEquals(new float[] {expected, expected}, out.toFloatArray());
    }
  }

  @Test
  void aTorchScriptLoopStopsAtItsTimeout() {
    Duration timeout = Duration.ofMillis(200);
    try (CallOptions options = new CallOptions().timeout(timeout)) {
      long start = System.nanoTime();
      DeadlineExceededException e =
          assertThrows(DeadlineExceededException.class, () -> runLoop(Long.MAX_VALUE, options));
      StuckModelTest.assertStoppedInTime(start, timeout, "loop_script(x, Long.MAX_VALUE)");
      assertEquals(ErrorCode.DEADLINE_EXCEEDED, e.code());
      // A bound that does not expire changes nothing.
      options.timeout(Duration.ofSeconds(10));
      assertLoopGives(3, options);
    }
    // The other overloads are unchanged: no options.
    try (Tensor out = (Tensor) loop.call(Tensor.of(new float[] {1, 2}), 3L)) {
      assertArrayEquals(new float[] {4, 5}, out.toFloatArray());
    }
    try (Tensor out = (Tensor) loop.call(null, List.of(Tensor.of(new float[] {1}), 2L), null)) {
      assertArrayEquals(new float[] {3}, out.toFloatArray());
    }
  }

  @Test
  void aTorchScriptLoopStopsWhenCancelled() {
    try (CancelToken token = new CancelToken();
        CallOptions options = new CallOptions().cancelToken(token)) {
      timer.schedule(token::cancel, 200, TimeUnit.MILLISECONDS);
      CancelledException e =
          assertThrows(CancelledException.class, () -> runLoop(Long.MAX_VALUE, options));
      assertEquals(ErrorCode.CANCELLED, e.code());
      assertTrue(token.isCancelled());
      // Once cancelled, every call with the token fails, however short.
      assertThrows(CancelledException.class, () -> runLoop(3, options));
      // Without the token the options work again.
      options.cancelToken(null);
      assertLoopGives(3, options);
    }
  }

  @Test
  void closingATokenBreaksNeitherOptionsNorCalls() {
    CancelToken live = new CancelToken();
    CancelToken cancelled = new CancelToken();
    try (CallOptions withLive = new CallOptions().cancelToken(live);
        CallOptions withCancelled = new CallOptions().cancelToken(cancelled)) {
      cancelled.cancel();
      cancelled.cancel(); // idempotent
      live.close();
      cancelled.close();
      cancelled.close(); // idempotent
      // The options keep the native tokens: one still live, one cancelled.
      assertLoopGives(3, withLive);
      assertThrows(CancelledException.class, () -> runLoop(3, withCancelled));
      // The closed Java handles refuse further use, as every closed handle does.
      assertThrows(IllegalStateException.class, live::cancel);
      assertThrows(IllegalStateException.class, live::isCancelled);
      assertThrows(IllegalStateException.class, () -> new CallOptions().cancelToken(live));
    }
    // A token dropped without close is freed by its cleaner; calls using it
    // through options are unaffected.
    CallOptions options = new CallOptions().cancelToken(new CancelToken());
    System.gc();
    assertLoopGives(3, options);
    options.close();
  }

  @Test
  void badArguments() {
    try (CallOptions options = new CallOptions()) {
      ErrorsTest.expect(
          OutOfRangeException.class,
          ErrorCode.OUT_OF_RANGE,
          "must be >= 0",
          () -> options.timeout(Duration.ofMillis(-1)));
      ErrorsTest.expect(
          OutOfRangeException.class,
          ErrorCode.OUT_OF_RANGE,
          "must be >= 0",
          () -> options.timeout(Duration.ofSeconds(Long.MIN_VALUE)));
      ErrorsTest.expect(
          OutOfRangeException.class,
          ErrorCode.OUT_OF_RANGE,
          "must be >= 0",
          () -> options.deadlineNanos(-5));
      IllegalArgumentException nullTimeout =
          assertThrows(IllegalArgumentException.class, () -> options.timeout(null));
      assertTrue(nullTimeout.getMessage().contains("null"), nullTimeout.getMessage());
      // Zero removes a bound, null a token; a timeout too long for 64-bit
      // nanoseconds is none at all. The call then runs unbounded.
      options.timeout(ChronoUnit.FOREVER.getDuration());
      options.deadlineNanos(Long.MAX_VALUE);
      options.timeout(Duration.ofSeconds(1)).deadlineNanos(0).timeout(Duration.ZERO);
      options.cancelToken(null);
      assertLoopGives(3, options);
      // A deadline already past fails at once: it runs nothing.
      options.deadlineNanos(1);
      assertThrows(DeadlineExceededException.class, () -> runLoop(3, options));
    }
    CallOptions closed = new CallOptions();
    closed.close();
    assertThrows(IllegalStateException.class, () -> closed.timeout(Duration.ofSeconds(1)));
    assertThrows(IllegalStateException.class, () -> closed.deadlineNanos(1));
    assertThrows(IllegalStateException.class, () -> closed.cancelToken(null));
    assertThrows(IllegalStateException.class, () -> runLoop(3, closed));
  }

  @Test
  void theMonotonicClock() {
    long a = Manypy.monotonicNanos();
    long b = Manypy.monotonicNanos();
    assertTrue(a > 0 && b >= a, a + " then " + b);
    try (CancelToken token = new CancelToken()) {
      assertFalse(token.isCancelled());
      token.cancel();
      assertTrue(token.isCancelled());
    }
  }
}
