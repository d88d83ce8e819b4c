package org.manypy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The two sample models served to 8 Java threads from a pool of 2 interpreters, every output
 * checked against eager Python's (written by samples/models/make_archives.py), and ResNet-18 from
 * TorchScript on the host.
 */
class ServingTest {
  static final int THREADS = 8;
  static Pool pool;
  static ExecutorService threads;

  @BeforeAll
  static void start() {
    pool = Pool.create(2);
    threads = Executors.newFixedThreadPool(THREADS);
  }

  @AfterAll
  static void stop() {
    threads.shutdownNow();
    pool.close();
  }

  /** Runs `work(thread index)` on 8 threads at once and waits for all. */
  static <T> List<T> onAllThreads(java.util.function.IntFunction<T> work) throws Exception {
    List<Future<T>> futures = new ArrayList<>();
    for (int t = 0; t < THREADS; ++t) {
      final int index = t;
      futures.add(threads.submit((Callable<T>) () -> work.apply(index)));
    }
    List<T> results = new ArrayList<>();
    for (Future<T> f : futures) results.add(f.get());
    return results;
  }

  @Test
  void pythonHeavyFromEightThreadsMatchesEagerPython() throws Exception {
    float[] input = TestSupport.floats("python_heavy.input.bin");
    float[] logits = TestSupport.floats("python_heavy.expected.logits.bin");
    float[] norm = TestSupport.floats("python_heavy.expected.norm.bin");
    Set<Long> interpretersSeen = ConcurrentHashMap.newKeySet();
    try (TorchPackage pkg = pool.loadPackage(TestSupport.archive("python_heavy.pt"));
        ReplicatedObject model = pkg.loadPickle("model", "model.pkl")) {
      onAllThreads(
          t -> {
            // Half the threads pin an interpreter, half let the pool choose.
            try (CallOptions options =
                    new CallOptions().interpreter(t < 4 ? t % 2 : Pool.ANY_INTERPRETER);
                Tensor x = Tensor.of(input, 4, 64)) {
              for (int i = 0; i < 25; ++i) {
                Object result =
                    model.call(null, List.of(x), Map.of("steps", 5L, "normalize", false), options);
                Map<?, ?> out = (Map<?, ?>) result;
                try (Tensor l = (Tensor) out.get("logits");
                    Tensor n = (Tensor) out.get("norm")) {
                  assertEquals(List.of(4L, 10L), List.of(l.shape()[0], l.shape()[1]));
                  assertTrue(
                      TestSupport.maxAbsDiff(l.toFloatArray(), logits) <= 1e-5f, "logits differ");
                  assertTrue(
                      TestSupport.maxAbsDiff(n.toFloatArray(), norm) <= 1e-5f, "norm differs");
                }
                assertEquals(5L, out.get("steps"));
              }
              if (t < 4) interpretersSeen.add((long) (t % 2));
            }
            return null;
          });
    }
    assertEquals(Set.of(0L, 1L), interpretersSeen);
  }

  @Test
  void resnet18FromEightThreadsMatchesEagerPython() throws Exception {
    float[] input = TestSupport.floats("resnet18.input.bin");
    float[] expected = TestSupport.floats("resnet18.expected.out.bin");
    try (TorchPackage pkg = pool.loadPackage(TestSupport.archive("resnet18.pt"));
        ReplicatedObject model = pkg.loadPickle("model", "model.pkl")) {
      List<Float> diffs =
          onAllThreads(
              t -> {
                // Zero copy in: a direct buffer the tensor is a view of.
                ByteBuffer buffer =
                    ByteBuffer.allocateDirect(input.length * 4).order(ByteOrder.nativeOrder());
                buffer.asFloatBuffer().put(input);
                Tensor x = Tensor.fromBuffer(buffer, DType.FLOAT32, 1, 3, 224, 224);
                float worst = 0;
                for (int i = 0; i < 3; ++i) {
                  try (Tensor y = (Tensor) model.call(x)) {
                    assertEquals(List.of(1L, 1000L), List.of(y.shape()[0], y.shape()[1]));
                    worst = Math.max(worst, TestSupport.maxAbsDiff(y.toFloatArray(), expected));
                  }
                }
                return worst;
              });
      for (float d : diffs) assertTrue(d <= 1e-4f, "resnet18 output differs by " + d);
    }
  }

  @Test
  void resnet18TorchScriptOnTheHostFromEightThreads() throws Exception {
    float[] input = TestSupport.floats("resnet18.input.bin");
    float[] expected = TestSupport.floats("resnet18.expected.out.bin");
    try (ScriptModule module = ScriptModule.load(TestSupport.archive("resnet18_script.pt"))) {
      List<Float> diffs =
          onAllThreads(
              t -> {
                try (Tensor x = Tensor.of(input, 1, 3, 224, 224);
                    Tensor y = (Tensor) module.call(x)) {
                  return TestSupport.maxAbsDiff(y.toFloatArray(), expected);
                }
              });
      for (float d : diffs) assertTrue(d <= 1e-4f, "TorchScript output differs by " + d);
    }
  }
}
