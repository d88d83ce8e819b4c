package org.manypy;

import java.lang.ref.Cleaner;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.LongConsumer;
import java.util.function.LongFunction;
import java.util.function.LongUnaryOperator;

/**
 * A Java object that owns one native manypy handle.
 *
 * <p>The handle is freed exactly once: by {@link #close()}, or by a {@link Cleaner} when the object
 * becomes unreachable without being closed. Calls hold the handle for their duration ({@link
 * #acquire()} / {@link #release()}), so a close or a collection racing a call on another thread
 * frees it only when the last call returns: no call ever sees a freed handle, and calls that start
 * after close fail with IllegalStateException. The C API keeps parents alive from their children
 * (an object keeps its package and pool), so resources can be closed in any order.
 *
 * <p>A handle freed on a thread that is running a pool's interpreter-failed callback ({@link
 * PoolOptions#onInterpreterFailed}) is freed on another thread instead: that thread belongs to the
 * pool, and the last handle of a pool destroys it, which waits for the pool's own threads (the C
 * API forbids manypy_pool_destroy there). The callback may close the pool, or a package or object
 * that is the pool's last holder, so this stays needed whoever owns the callback.
 */
abstract class NativeResource implements AutoCloseable {
  private static final Cleaner CLEANER =
      Cleaner.create(
          runnable -> {
            Thread thread = new Thread(runnable, "manypy-cleaner");
            thread.setDaemon(true);
            return thread;
          });

  private final Handle handle;
  private final Cleaner.Cleanable cleanable;

  /** Takes ownership of `address`, freed by `free` (which must not refer to this object). */
  NativeResource(long address, LongConsumer free, String kind) {
    this.handle = new Handle(address, free, kind);
    this.cleanable = CLEANER.register(this, handle);
  }

  /** The handle, held until {@link #release()}; throws IllegalStateException once closed. */
  final long acquire() {
    return handle.acquire();
  }

  final void release() {
    handle.release();
  }

  /**
   * Runs `call`, a C function that returns a manypy_status*, on the handle, held for the call, and
   * throws the status's exception if it failed.
   */
  final void check(LongUnaryOperator call) {
    with(
        held -> {
          Status.check(call.applyAsLong(held));
          return null;
        });
  }

  /** Runs `body` on the handle, held for its duration, and returns what it returns. */
  final <T> T with(LongFunction<T> body) {
    long held = acquire();
    try {
      return body.apply(held);
    } finally {
      release();
    }
  }

  /**
   * A handle a C constructor returned, for one that signals running out of native memory with NULL
   * (0).
   */
  static long allocated(long handle) {
    if (handle == 0) throw new OutOfMemoryError("manypy: native memory exhausted");
    return handle;
  }

  /** Whether close() was called (or the object was collected). */
  public final boolean isClosed() {
    return handle.closed;
  }

  /** Frees the native handle (after calls in flight return). Idempotent. */
  @Override
  public void close() {
    cleanable.clean();
  }

  /** The state the Cleaner keeps: it must not reach the owning object. */
  private static final class Handle implements Runnable {
    private final long address;
    private final LongConsumer free;
    private final String kind;
    // 1 for the owner, plus one per call in flight; the native handle is
    // freed when it drops to 0.
    private final AtomicInteger holders = new AtomicInteger(1);
    private volatile boolean closed;

    Handle(long address, LongConsumer free, String kind) {
      this.address = address;
      this.free = free;
      this.kind = kind;
    }

    long acquire() {
      while (true) {
        int n = holders.get();
        if (closed || n == 0)
          throw new IllegalStateException("manypy: this " + kind + " is closed");
        if (holders.compareAndSet(n, n + 1)) return address;
      }
    }

    void release() {
      if (holders.decrementAndGet() != 0) return;
      if (CallbackDispatch.inPoolCallback()) {
        Deferred.FREES.execute(() -> free.accept(address));
      } else {
        free.accept(address);
      }
    }

    /** close() or collection: runs at most once (Cleaner's guarantee). */
    @Override
    public void run() {
      closed = true;
      release();
    }
  }

  /** The thread that frees handles released inside a pool's callback, made on first use. */
  private static final class Deferred {
    static final ExecutorService FREES =
        Executors.newSingleThreadExecutor(
            runnable -> {
              Thread thread = new Thread(runnable, "manypy-deferred-free");
              thread.setDaemon(true);
              return thread;
            });
  }
}
