package org.manypy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.junit.jupiter.api.Test;

/**
 * Callbacks on threads the JVM never saw: native threads (java/src/test/native) call a model
 * through the C API, the Java callback runs on them (attached by the glue), and when they exit they
 * are detached again.
 */
class NativeThreadsTest {
  static {
    System.load(
        TestSupport.buildDir().resolve("java-test-lib/libmanypy_java_test_native.so").toString());
  }

  /** Starts `threads` native threads, each calling `model` once, joins them; failures. */
  static native int callFromNewThreads(long model, ByteBuffer input, int threads);

  static long attachedThreads() {
    return Thread.getAllStackTraces().keySet().stream()
        .filter(t -> t.getName().equals("manypy-native"))
        .count();
  }

  @Test
  void nativeThreadsAreAttachedForCallbacksAndDetachedWhenTheyExit() {
    ByteBuffer input = ByteBuffer.allocateDirect(4 * 64 * 4).order(ByteOrder.nativeOrder());
    input.asFloatBuffer().put(TestSupport.floats("python_heavy.input.bin"));
    Queue<String> threadNames = new ConcurrentLinkedQueue<>();
    Queue<Boolean> daemons = new ConcurrentLinkedQueue<>();
    long before = attachedThreads();
    try (Pool pool = Pool.create(1);
        TorchPackage pkg = pool.loadPackage(TestSupport.archive("python_heavy.pt"));
        ReplicatedObject model = pkg.loadPickle("model", "model.pkl");
        OpCallbackRegistration r =
            Manypy.addOpCallbacks(
                e -> {
                  threadNames.add(Thread.currentThread().getName());
                  daemons.add(Thread.currentThread().isDaemon());
                },
                null,
                1.0,
                false)) {
      for (int round = 0; round < 3; ++round) {
        assertEquals(0, callFromNewThreads(model.nativeHandle(), input, 4));
        // pthread_join returned: each thread ran its thread-exit detach.
        assertEquals(before, attachedThreads(), "native threads still attached after exiting");
      }
    }
    assertFalse(threadNames.isEmpty());
    assertTrue(threadNames.stream().allMatch("manypy-native"::equals), threadNames.toString());
    assertTrue(daemons.stream().allMatch(d -> d));
  }
}
