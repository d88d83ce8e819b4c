package org.manypy;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The JVM under load: 8 threads calling the Python-heavy model in both thread modes while the
 * profiler samples operators into Java-visible aggregates, a callback runs Java code on sampled
 * operators, and another thread keeps forcing garbage collections (cleaners freeing result tensors
 * concurrently with calls). Every output is checked. 8 threads x 50 calls per mode: each thread's
 * calls meet many collections (one every 5 ms, each stopping every thread), and more calls only
 * repeat that (150 took three times as long and found nothing more).
 */
// The quick tier leaves it out: 8 threads serving under constant collections (about 20 s).
@Tag("slow")
class StressTest {
  private static final int CALLS_PER_THREAD = 50;

  @Test
  void eightThreadsWithCallbacksAndConstantGarbageCollection() throws Exception {
    for (ThreadMode mode : ThreadMode.values()) run(mode);
  }

  private static void run(ThreadMode mode) throws Exception {
    float[] input = TestSupport.floats("python_heavy.input.bin");
    float[] logits = TestSupport.floats("python_heavy.expected.logits.bin");
    Queue<Throwable> failures = new ConcurrentLinkedQueue<>();
    AtomicBoolean done = new AtomicBoolean();
    Thread collector =
        new Thread(
            () -> {
              while (!done.get()) {
                System.gc();
                try {
                  Thread.sleep(5);
                } catch (InterruptedException e) {
                  return;
                }
              }
            });
    try (Pool pool = Pool.create(new PoolOptions().interpreters(2).threadMode(mode));
        TorchPackage pkg = pool.loadPackage(TestSupport.archive("python_heavy.pt"));
        ReplicatedObject model = pkg.loadPickle("model", "model.pkl");
        Profiler profiler = Profiler.start(0.05);
        OpCallbackRegistration r =
            Manypy.addOpCallbacks(null, e -> e.name().length(), 0.05, true)) {
      collector.start();
      Thread[] threads = new Thread[8];
      for (int t = 0; t < threads.length; ++t) {
        final int index = t;
        threads[t] =
            new Thread(
                () -> {
                  try (CallOptions options =
                      new CallOptions().context("stress", "thread-" + index)) {
                    for (int i = 0; i < CALLS_PER_THREAD; ++i) {
                      // Results are deliberately not closed: the cleaners free them.
                      Map<?, ?> out =
                          (Map<?, ?>)
                              model.call(
                                  null,
                                  List.of(Tensor.of(input, 4, 64)),
                                  Map.of("steps", 5L, "normalize", false),
                                  options);
                      float diff =
                          TestSupport.maxAbsDiff(
                              ((Tensor) out.get("logits")).toFloatArray(), logits);
                      if (diff > 1e-5f) throw new AssertionError("logits differ by " + diff);
                    }
                  } catch (Throwable e) {
                    failures.add(e);
                  }
                });
        threads[t].start();
      }
      for (Thread t : threads) t.join();
      assertTrue(profiler.snapshot().stream().anyMatch(e -> e.modelId().equals("stress")));
    } finally {
      done.set(true);
      collector.join();
    }
    assertTrue(failures.isEmpty(), () -> mode + ": " + failures.peek());
  }
}
