package org.manypy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Hot swap (docs/java.md, "Hot swap") with ModelSlot, on the Versioned model
 * (samples/models/versioned.py): forward(x) is x's shape filled with the version number, and
 * version() returns it. A result therefore says which version served it.
 */
class HotSwapTest {
  static Pool pool;
  // The version each loaded object is: a call's result must match the object it used.
  static final Map<ReplicatedObject, Long> VERSIONS = new ConcurrentHashMap<>();

  @BeforeAll
  static void start() {
    pool = Pool.create(2);
  }

  @AfterAll
  static void stop() {
    pool.close();
  }

  /**
   * Loads version_<n>.pt's model beside whatever serves (its package closes; the object keeps it).
   */
  static ReplicatedObject load(long n) {
    return load(TestSupport.archive("version_" + n + ".pt"), n);
  }

  static ReplicatedObject load(Path archive, long n) {
    try (TorchPackage pkg = pool.loadPackage(archive)) {
      ReplicatedObject model = pkg.loadPickle("model", "model.pkl");
      VERSIONS.put(model, n);
      return model;
    }
  }

  /** Checks one result against the version of the object that served it. */
  static long check(ReplicatedObject model, Tensor x) {
    long expected = VERSIONS.get(model);
    try (Tensor y = (Tensor) model.call(x)) {
      for (float v : y.toFloatArray())
        assertEquals((float) expected, v, "result of version " + expected);
    }
    return expected;
  }

  /**
   * 8 threads call for about 5 s while the version is swapped every 200 ms; two of them call
   * asynchronously, and two do other work (1 ms) between taking the version and calling it, so that
   * swaps land in that window: a slot that closed the old version at once would fail their calls
   * with IllegalStateException. No call fails, every result is the version of the object the call
   * used, both versions serve, and every version swapped out is closed once its calls are done.
   */
  @Test
  void callsNeverFailWhileTheVersionIsSwappedEvery200Ms() throws Exception {
    List<ReplicatedObject> loaded = new ArrayList<>();
    ReplicatedObject first = load(1);
    loaded.add(first);
    AtomicBoolean stop = new AtomicBoolean();
    AtomicLong[] served = {new AtomicLong(), new AtomicLong(), new AtomicLong()};
    ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
    ExecutorService threads = Executors.newFixedThreadPool(8);
    try (ModelSlot slot = new ModelSlot(first);
        Tensor x = Tensor.of(new float[] {0, 0, 0, 0, 0, 0}, 2, 3)) {
      CountDownLatch started = new CountDownLatch(8);
      List<Future<?>> callers = new ArrayList<>();
      for (int t = 0; t < 8; ++t) {
        final boolean async = t < 2;
        final boolean slow = t >= 6;
        callers.add(
            threads.submit(
                () -> {
                  started.countDown();
                  while (!stop.get()) {
                    try {
                      if (async) {
                        // The version is the one current at submission, held until completion.
                        long[] version = new long[1];
                        CompletableFuture<Object> reply =
                            slot.apply(
                                model -> {
                                  version[0] = VERSIONS.get(model);
                                  return model.callAsync(null, List.of(x), null, null);
                                });
                        try (Tensor y = (Tensor) TestSupport.value(reply)) {
                          for (float v : y.toFloatArray()) assertEquals((float) version[0], v);
                        }
                        served[(int) version[0]].incrementAndGet();
                      } else {
                        served[
                            (int)
                                (long)
                                    slot.apply(
                                        model -> {
                                          if (slow) pause();
                                          return check(model, x);
                                        })]
                            .incrementAndGet();
                      }
                    } catch (Throwable e) {
                      failures.add(e);
                      return;
                    }
                  }
                }));
      }
      started.await();
      long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
      long next = 2;
      int swaps = 0;
      while (System.nanoTime() < end) {
        Thread.sleep(200);
        ReplicatedObject version = load(next);
        loaded.add(version);
        slot.swap(version);
        ++swaps;
        next = 3 - next;
      }
      stop.set(true);
      for (Future<?> caller : callers) caller.get(TestSupport.HANG_SECONDS, TimeUnit.SECONDS);
      assertTrue(failures.isEmpty(), "calls failed: " + failures);
      System.out.printf(
          "hot swap: %d swaps, %d calls on version 1, %d on version 2%n",
          swaps, served[1].get(), served[2].get());
      assertTrue(swaps >= 10, "swaps: " + swaps);
      assertTrue(served[1].get() > 0 && served[2].get() > 0, "both versions served");
      // Every version but the current one is closed: no call holds it any more.
      for (int i = 0; i < loaded.size() - 1; ++i) {
        ReplicatedObject old = loaded.get(i);
        TestSupport.await(old::isClosed, "version " + i + " closed once its calls were done");
      }
      assertTrue(!loaded.get(loaded.size() - 1).isClosed());
    } finally {
      threads.shutdown();
    }
    // Closing the slot closed the last one.
    assertTrue(loaded.get(loaded.size() - 1).isClosed());
    loaded.forEach(VERSIONS::remove);
  }

  static void pause() {
    try {
      Thread.sleep(1);
    } catch (InterruptedException e) {
      throw new IllegalStateException(e);
    }
  }

  /** A version that fails to load is never swapped in: the old one serves on. */
  @Test
  void aSwapToAnArchiveThatFailsToLoadLeavesTheOldVersionServing() {
    try (ModelSlot slot = new ModelSlot(load(1));
        Tensor x = Tensor.of(new float[] {0, 0}, 1, 2)) {
      assertThrows(
          NotFoundException.class,
          () -> slot.swap(load(TestSupport.archive("no_such_version.pt"), 3)));
      assertThrows(
          BadArchiveException.class,
          () -> slot.swap(load(TestSupport.archive("malformed/corrupt.pt"), 3)));
      assertThrows(
          BadArchiveException.class,
          () -> slot.swap(load(TestSupport.archive("malformed/not_a_zip.pt"), 3)));
      assertEquals(1L, slot.callMethod("version"));
      assertEquals(1L, (long) slot.apply(model -> check(model, x)));
      slot.swap(load(2));
      assertEquals(2L, slot.callMethod("version"));
      assertEquals(2L, (long) slot.apply(model -> check(model, x)));
    }
  }

  @Test
  void aSlotRefusesWhatItCannotOwn() {
    assertThrows(IllegalArgumentException.class, () -> new ModelSlot(null));
    ReplicatedObject closed = load(1);
    closed.close();
    assertThrows(IllegalStateException.class, () -> new ModelSlot(closed));
    ReplicatedObject v1 = load(1);
    ModelSlot slot = new ModelSlot(v1);
    assertThrows(IllegalArgumentException.class, () -> slot.swap(null));
    assertThrows(IllegalStateException.class, () -> slot.swap(closed));
    slot.close();
    slot.close(); // idempotent
    assertTrue(slot.isClosed());
    assertTrue(v1.isClosed());
    ReplicatedObject v2 = load(2);
    assertThrows(IllegalStateException.class, () -> slot.swap(v2));
    assertTrue(!v2.isClosed(), "a refused swap leaves the object to its caller");
    assertThrows(IllegalStateException.class, () -> slot.callMethod("version"));
    v2.close();
    VERSIONS.clear();
  }

  /** A call running on the old version when the slot closes finishes on it. */
  @Test
  void aSwapOrCloseWaitsForTheCallsOnTheOldVersion() throws Exception {
    ReplicatedObject v1 = load(1);
    ModelSlot slot = new ModelSlot(v1);
    CountDownLatch inside = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    ExecutorService thread = Executors.newSingleThreadExecutor();
    try {
      Future<Object> call =
          thread.submit(
              () ->
                  slot.apply(
                      model -> {
                        inside.countDown();
                        try {
                          release.await();
                        } catch (InterruptedException e) {
                          throw new IllegalStateException(e);
                        }
                        return model.callMethod("version");
                      }));
      inside.await();
      slot.swap(load(2));
      assertTrue(!v1.isClosed(), "version 1 is held by a call");
      assertEquals(2L, slot.callMethod("version"));
      slot.close();
      release.countDown();
      assertEquals(1L, call.get(TestSupport.HANG_SECONDS, TimeUnit.SECONDS));
      assertTrue(v1.isClosed());
    } finally {
      thread.shutdown();
      VERSIONS.clear();
    }
  }
}
