package org.manypy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** Closing in any order, closing under load, and garbage collection. */
// The quick tier leaves it out: closes under load and garbage collections (about 45 s).
@Tag("slow")
class LifecycleTest {
  @Test
  void closeInAnyOrder() {
    Pool pool = Pool.create(1);
    TorchPackage pkg = pool.loadPackage(TestSupport.archive("identity.pt"));
    ReplicatedObject model = pkg.loadPickle("model", "model.pkl");
    CallOptions options = new CallOptions().interpreter(0);
    // The object keeps its package and pool alive: closing them first is fine.
    pool.close();
    pkg.close();
    assertEquals(5L, model.call(null, List.of(5L), null, options));
    options.close();
    assertThrows(IllegalStateException.class, () -> model.call(null, List.of(5L), null, options));
    model.close();
    model.close(); // idempotent
    assertThrows(IllegalStateException.class, () -> model.call(1L));
    assertThrows(IllegalStateException.class, () -> pool.exec(0, "x = 1"));
    assertThrows(IllegalStateException.class, pkg::listFiles);
    assertTrue(pool.isClosed() && pkg.isClosed() && model.isClosed());
  }

  @Test
  void closingWhileOtherThreadsCall() throws Exception {
    Pool pool = Pool.create(2);
    TorchPackage pkg = pool.loadPackage(TestSupport.archive("identity.pt"));
    ReplicatedObject model = pkg.loadPickle("model", "model.pkl");
    AtomicLong calls = new AtomicLong();
    Queue<Throwable> unexpected = new ConcurrentLinkedQueue<>();
    List<Thread> threads = new ArrayList<>();
    for (int t = 0; t < 4; ++t) {
      Thread thread =
          new Thread(
              () -> {
                try (Tensor x = Tensor.of(new float[] {1, 2, 3})) {
                  while (true) {
                    ((Tensor) model.call(x)).close();
                    calls.incrementAndGet();
                  }
                } catch (IllegalStateException closed) {
                  // the expected end: the object was closed
                } catch (Throwable e) {
                  unexpected.add(e);
                }
              });
      threads.add(thread);
      thread.start();
    }
    while (calls.get() < 200) Thread.sleep(5);
    model.close();
    pkg.close();
    pool.close();
    for (Thread t : threads) t.join(60_000);
    assertTrue(unexpected.isEmpty(), () -> "unexpected: " + unexpected.peek());
    assertTrue(threads.stream().noneMatch(Thread::isAlive));
  }

  /**
   * Pools, packages, objects and tensors that are never closed are freed by the garbage collector:
   * otherwise 30 pools of 3 interpreters would run out of the process's 15 by the sixth.
   * (Pool.create collects and retries when interpreters run out.)
   */
  @Test
  void garbageCollectionFreesWhatIsNotClosed() {
    for (int round = 0; round < 30; ++round) {
      Pool pool = Pool.create(3);
      ReplicatedObject model =
          pool.loadPackage(TestSupport.archive("identity.pt")).loadPickle("model", "model.pkl");
      Tensor result = (Tensor) model.call(Tensor.of(new float[] {round}));
      assertEquals(round, result.toFloatArray()[0]);
    }
  }
}
