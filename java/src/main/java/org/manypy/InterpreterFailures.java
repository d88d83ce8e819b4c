package org.manypy;

import java.lang.ref.Cleaner;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The interpreter-failed callbacks of pools, by the id the native side holds
 * (jni_serving.cpp). The native side holds a number, not a JNI reference: the
 * C API does not say when a pool's last holder is gone (its handle, packages,
 * objects and calls each keep it), so a reference could never be released.
 * Instead a pool and everything loaded from it keep their {@link Registration}
 * reachable until their native handles are freed; once none is left, the
 * Cleaner drops the callback, and a later report finds nothing.
 */
final class InterpreterFailures {
  private static final AtomicLong NEXT_ID = new AtomicLong();
  private static final Map<Long, InterpreterFailedCallback> CALLBACKS = new ConcurrentHashMap<>();

  private InterpreterFailures() {}

  /** One pool's callback, registered until unreachable or {@link #unregister()}. */
  static final class Registration {
    final long id;
    private final Cleaner.Cleanable cleanable;

    Registration(InterpreterFailedCallback callback) {
      long key = NEXT_ID.incrementAndGet();
      this.id = key;
      CALLBACKS.put(key, callback);
      // The action must not reach this object, or it would never be unreachable.
      this.cleanable = NativeResource.cleaner().register(this, () -> CALLBACKS.remove(key));
    }

    /** At once: the pool was never made. Idempotent. */
    void unregister() {
      cleanable.clean();
    }
  }

  /** The callback of `id`; null once its pool and descendants are gone. */
  static InterpreterFailedCallback lookup(long id) {
    return CALLBACKS.get(id);
  }

  /** Callbacks registered now. For the tests. */
  static int registered() {
    return CALLBACKS.size();
  }
}
