package org.manypy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Future.cancel, cancel tokens, deadlines and the queue limit on asynchronous calls, with stuck.pt
 * (samples/models/stuck.py), whose spin() never returns unless stopped, on a pool of one
 * interpreter: while spin() runs there, every other call of the pool waits, so a call whose
 * completion arrives meanwhile never ran. No timing is asserted: a stop is proved by a completion
 * that could not otherwise have come. In a JVM of its own (fresh-jvm), as every suite that stops
 * running calls: a stop that does not end its call retires its interpreter for the rest of the
 * process.
 */
@Tag("fresh-jvm")
class AsyncStopsTest {
  static Pool pool;
  static TorchPackage pkg;
  static ReplicatedObject stuck;

  @BeforeAll
  static void load() {
    pool = Pool.create(1);
    pkg = pool.loadPackage(TestSupport.archive("stuck.pt"));
    stuck = pkg.loadPickle("model", "model.pkl");
    assertServes(); // the replica exists before any bound is set
  }

  @AfterAll
  static void close() {
    stuck.close();
    pkg.close();
    pool.close();
  }

  @AfterEach
  void everyCompletionArrived() {
    TestSupport.await(() -> TestSupport.pendingAsync() == 0, "every native completion");
  }

  /** forward(x) is x * 2: the interpreter serves, with the right result. */
  static void assertServes() {
    try (Tensor y = (Tensor) TestSupport.value(stuck.callAsync(Tensor.of(new float[] {1, 2, 3})))) {
      assertArrayEquals(new float[] {2, 4, 6}, y.toFloatArray());
    }
  }

  /** Starts spin() on `p`'s only interpreter and waits until it runs (nothing waits). */
  static CompletableFuture<Object> spinning(Pool p, ReplicatedObject model, CallOptions options) {
    CompletableFuture<Object> spin = model.callAsync("spin", null, null, options);
    TestSupport.await(() -> p.inFlight() == 1 && p.queued() == 0, "spin() running");
    return spin;
  }

  static void assertCancelled(CompletableFuture<Object> future) {
    assertTrue(future.isCancelled());
    assertThrows(CancellationException.class, future::join);
  }

  @Test
  void cancelStopsARunningCall() {
    for (boolean interrupt : new boolean[] {true, false}) {
      CompletableFuture<Object> spin = spinning(pool, stuck, null);
      assertTrue(spin.cancel(interrupt));
      assertCancelled(spin);
      // spin() never returns by itself: its completion arriving proves it was stopped.
      TestSupport.await(() -> TestSupport.pendingAsync() == 0, "the stopped spin() completing");
      assertServes();
    }
  }

  @Test
  void cancelDropsAQueuedCallThatNeverRuns() {
    for (boolean interrupt : new boolean[] {false, true}) {
      CompletableFuture<Object> spin = spinning(pool, stuck, null);
      CompletableFuture<Object> queued = stuck.callAsync(Tensor.of(new float[] {1}));
      TestSupport.await(() -> pool.queued() == 1, "the call queued behind spin()");
      assertTrue(queued.cancel(interrupt));
      assertCancelled(queued);
      // Its completion arrives while spin() still holds the only interpreter:
      // it left the queue without running.
      TestSupport.await(
          () -> TestSupport.pendingAsync() == 1 && pool.queued() == 0,
          "the cancelled call leaving the queue");
      assertFalse(spin.isDone());
      spin.cancel(true);
      TestSupport.await(() -> TestSupport.pendingAsync() == 0, "spin() stopped");
      assertServes();
    }
  }

  @Test
  void theCallersTokenStopsTheCallAndTheFuturesCancelLeavesTheToken() throws Exception {
    try (CancelToken token = new CancelToken();
        CallOptions options = new CallOptions().cancelToken(token)) {
      CompletableFuture<Object> spin = spinning(pool, stuck, options);
      token.cancel();
      CancelledException e = assertInstanceOf(CancelledException.class, TestSupport.failure(spin));
      // The gauges count a call as running once its interpreter took it, a
      // moment before its Python starts: a cancel in that moment stops it
      // before any Python ran, and then there is no Python type.
      if (!e.pythonType().isEmpty()) {
        assertEquals("manypy.Cancelled", e.pythonType());
        assertTrue(e.pythonTraceback().contains("spin"), e.pythonTraceback());
      }
      assertFalse(spin.isCancelled());
    }
    try (CancelToken token = new CancelToken();
        CallOptions options = new CallOptions().cancelToken(token)) {
      CompletableFuture<Object> spin = spinning(pool, stuck, options);
      assertTrue(spin.cancel(true));
      TestSupport.await(() -> TestSupport.pendingAsync() == 0, "spin() stopped by its future");
      // The caller's token is untouched: other calls with it run.
      assertFalse(token.isCancelled());
      try (Tensor y =
          (Tensor)
              TestSupport.value(
                  stuck.callAsync(null, List.of(Tensor.of(new float[] {4})), null, options))) {
        assertArrayEquals(new float[] {8}, y.toFloatArray());
      }
    }
    assertServes();
  }

  @Test
  void aDeadlinePassingWhileQueuedFailsTheCallWithoutRunningIt() {
    CompletableFuture<Object> spin = spinning(pool, stuck, null);
    try (CallOptions options = new CallOptions().timeout(Duration.ofMillis(200))) {
      CompletableFuture<Object> late =
          stuck.callAsync(null, List.of(Tensor.of(new float[] {1})), null, options);
      DeadlineExceededException e =
          assertInstanceOf(DeadlineExceededException.class, TestSupport.failure(late));
      assertEquals(ErrorCode.DEADLINE_EXCEEDED, e.code());
      assertEquals("", e.pythonType()); // no Python ran: it never left the queue
    }
    assertFalse(spin.isDone()); // the only interpreter was busy all along
    spin.cancel(true);
    TestSupport.await(() -> TestSupport.pendingAsync() == 0, "spin() stopped");
    assertServes();
  }

  @Test
  void pastTheQueueLimitCallsAreRefusedWithOverloaded() {
    try (Pool limited = Pool.create(new PoolOptions().queueLimit(2));
        TorchPackage p = limited.loadPackage(TestSupport.archive("stuck.pt"));
        ReplicatedObject model = p.loadPickle("model", "model.pkl");
        Batcher batcher = model.batcher(null, new BatcherOptions().maxWait(Duration.ZERO))) {
      try (Tensor warm = (Tensor) model.call(Tensor.of(new float[] {1}))) {
        assertArrayEquals(new float[] {2}, warm.toFloatArray());
      }
      CompletableFuture<Object> spin = spinning(limited, model, null);
      List<CompletableFuture<Object>> accepted = new ArrayList<>();
      for (int i = 0; i < 2; ++i) accepted.add(model.callAsync(Tensor.of(new float[] {i})));
      TestSupport.await(() -> limited.queued() == 2, "two calls queued");
      long pending = TestSupport.pendingAsync();
      OverloadedException e =
          assertThrows(
              OverloadedException.class, () -> model.callAsync(Tensor.of(new float[] {9})));
      assertEquals(ErrorCode.OVERLOADED, e.code());
      assertThrows(OverloadedException.class, () -> model.call(Tensor.of(new float[] {9})));
      assertThrows(OverloadedException.class, () -> batcher.call(Tensor.of(new float[] {9}, 1, 1)));
      assertThrows(
          OverloadedException.class, () -> batcher.callAsync(Tensor.of(new float[] {9}, 1, 1)));
      assertEquals(pending, TestSupport.pendingAsync()); // refused: nothing pending
      assertEquals(2, limited.queued());
      assertEquals(3, limited.inFlight());
      spin.cancel(true);
      for (int i = 0; i < 2; ++i) {
        try (Tensor y = (Tensor) TestSupport.value(accepted.get(i))) {
          assertArrayEquals(new float[] {2 * i}, y.toFloatArray());
        }
      }
      // Room again.
      try (Tensor y = (Tensor) TestSupport.value(model.callAsync(Tensor.of(new float[] {5})))) {
        assertArrayEquals(new float[] {10}, y.toFloatArray());
      }
      TestSupport.await(() -> limited.inFlight() == 0 && limited.queued() == 0, "an idle pool");
    }
  }

  @Test
  void torchScriptOnTheHostIsCancelledAndBounded() {
    try (ScriptModule loop = ScriptModule.load(TestSupport.archive("loop_script.pt"))) {
      // forward(x, n) adds 1 n times: Long.MAX_VALUE never ends unless stopped.
      CompletableFuture<Object> endless =
          loop.callAsync(Tensor.of(new float[] {0}), Long.MAX_VALUE);
      assertTrue(endless.cancel(true));
      TestSupport.await(() -> TestSupport.pendingAsync() == 0, "the TorchScript loop stopped");
      try (CallOptions options = new CallOptions().timeout(Duration.ofMillis(100))) {
        CompletableFuture<Object> bounded =
            loop.callAsync(
                null, List.of(Tensor.of(new float[] {0}), Long.MAX_VALUE), null, options);
        assertInstanceOf(DeadlineExceededException.class, TestSupport.failure(bounded));
      }
      try (Tensor y = (Tensor) TestSupport.value(loop.callAsync(Tensor.of(new float[] {0}), 3L))) {
        assertArrayEquals(new float[] {3}, y.toFloatArray());
      }
    }
  }

  /**
   * 8 threads submit 4,000 calls with random timeouts, tokens and cancels, racing their
   * completions: every future completes exactly once, with the right result or a stop, and every
   * native completion arrives.
   */
  @Test
  void randomDeadlinesAndCancelsLoseNothing() throws Exception {
    try (Pool two = Pool.create(2);
        TorchPackage p = two.loadPackage(TestSupport.archive("stuck.pt"));
        ReplicatedObject model = p.loadPickle("model", "model.pkl")) {
      ExecutorService threads = Executors.newFixedThreadPool(8);
      try {
        List<Future<int[]>> outcomes = new ArrayList<>();
        for (int t = 0; t < 8; ++t) {
          outcomes.add(threads.submit(() -> randomCalls(model, 500)));
        }
        int[] total = new int[4];
        for (Future<int[]> f : outcomes) {
          int[] mine = f.get(TestSupport.HANG_SECONDS, TimeUnit.SECONDS);
          for (int i = 0; i < 4; ++i) total[i] += mine[i];
        }
        assertEquals(4000, total[0] + total[1] + total[2] + total[3]);
        assertTrue(total[0] > 0, "no call succeeded");
      } finally {
        threads.shutdownNow();
      }
      TestSupport.await(() -> TestSupport.pendingAsync() == 0, "every native completion");
      try (Tensor y = (Tensor) TestSupport.value(model.callAsync(Tensor.of(new float[] {3})))) {
        assertArrayEquals(new float[] {6}, y.toFloatArray());
      }
    }
  }

  /** {succeeded, cancelled futures, stopped by a token, stopped by a deadline}. */
  static int[] randomCalls(ReplicatedObject model, int calls) throws Exception {
    ThreadLocalRandom random = ThreadLocalRandom.current();
    int[] counts = new int[4];
    List<CompletableFuture<Object>> futures = new ArrayList<>();
    List<CancelToken> tokens = new ArrayList<>();
    List<Float> inputs = new ArrayList<>();
    for (int i = 0; i < calls; ++i) {
      float x = random.nextInt(1000);
      CancelToken token = new CancelToken();
      try (CallOptions options = new CallOptions().cancelToken(token)) {
        if (random.nextBoolean())
          options.timeout(Duration.ofNanos(random.nextLong(50_000, 5_000_000)));
        futures.add(model.callAsync(null, List.of(Tensor.of(new float[] {x})), null, options));
      } catch (DeadlineExceededException refused) {
        // A timeout of microseconds may pass during the submission itself
        // (a busy machine preempts the thread): refused at once, as a
        // synchronous call would be.
        assertTrue(refused.getMessage().contains("before the call started"), refused.getMessage());
        futures.add(CompletableFuture.failedFuture(refused));
      }
      tokens.add(token);
      inputs.add(x);
      switch (random.nextInt(4)) {
        case 0 -> futures.get(i).cancel(random.nextBoolean());
        case 1 -> token.cancel();
        default -> {}
      }
    }
    for (int i = 0; i < calls; ++i) {
      CompletableFuture<Object> future = futures.get(i);
      try {
        try (Tensor y = (Tensor) future.get(TestSupport.HANG_SECONDS, TimeUnit.SECONDS)) {
          assertArrayEquals(new float[] {2 * inputs.get(i)}, y.toFloatArray());
          ++counts[0];
        }
      } catch (CancellationException e) {
        assertTrue(future.isCancelled());
        ++counts[1];
      } catch (ExecutionException e) {
        if (e.getCause() instanceof CancelledException) {
          assertTrue(tokens.get(i).isCancelled());
          ++counts[2];
        } else {
          assertInstanceOf(
              DeadlineExceededException.class, e.getCause(), () -> e.getCause().toString());
          ++counts[3];
        }
      }
      tokens.get(i).close();
    }
    return counts;
  }
}
