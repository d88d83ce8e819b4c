package org.manypy;

import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Function;

/**
 * The version of a model that serves now, swapped for a new version while calls run: a hot swap
 * without a failed or mixed call.
 *
 * <pre>{@code
 * ModelSlot ranker = new ModelSlot(load(Path.of("ranker_v1.pt")));
 * // Request threads:
 * Object out = ranker.call(x);
 * // A deployment: load the new version beside the old one, then swap.
 * ranker.swap(load(Path.of("ranker_v2.pt")));   // if load throws, v1 serves on
 * }</pre>
 *
 * <p>Each call runs on the version that was current when it began, from start to end; {@link #swap}
 * makes the new version current at once, and closes the old one when the last call holding it
 * returns (an asynchronous call holds its object until it completes, so the old version's native
 * object goes only after that). Loading the new version beside the old costs the memory of both
 * until the swap.
 *
 * <p>Why not an {@code AtomicReference<ReplicatedObject>} and {@code close()}: a thread that read
 * the old object just before the swap may begin its call just after the close, and the closed
 * object throws {@link IllegalStateException}. The slot counts the calls that hold each version, so
 * a version is closed only once no call can still begin on it.
 *
 * <p>The slot owns the objects it is given: close them through it (by {@link #swap} or {@link
 * #close()}), never directly. Thread safe: calls, swaps and close from any threads.
 */
public final class ModelSlot implements AutoCloseable {
  private final AtomicReference<Version> current;

  /** One version: its object, and the slot's hold plus one per call on it. */
  private static final class Version {
    final ReplicatedObject object;
    final AtomicInteger holders = new AtomicInteger(1);

    Version(ReplicatedObject object) {
      if (object == null) throw new IllegalArgumentException("manypy: a model slot needs a model");
      if (object.isClosed())
        throw new IllegalStateException("manypy: this ReplicatedObject is closed");
      this.object = object;
    }

    /** False once its last holder released it (it is closed, and no longer current). */
    boolean hold() {
      while (true) {
        int n = holders.get();
        if (n == 0) return false;
        if (holders.compareAndSet(n, n + 1)) return true;
      }
    }

    void release() {
      if (holders.decrementAndGet() == 0) object.close();
    }
  }

  /** A slot serving `initial`, which it owns from now on. */
  public ModelSlot(ReplicatedObject initial) {
    this.current = new AtomicReference<>(new Version(initial));
  }

  /**
   * Runs `body` on the current version, which stays open until `body` returns, even if a swap makes
   * another version current meanwhile. `body` must not keep the object after it returns. Throws
   * {@link IllegalStateException} once the slot is closed.
   */
  public <R> R apply(Function<? super ReplicatedObject, ? extends R> body) {
    while (true) {
      Version version = current.get();
      if (version == null) throw new IllegalStateException("manypy: this ModelSlot is closed");
      // Fails only if a swap replaced this version and its last call released it in the
      // meantime: the slot then holds a newer one, read again.
      if (!version.hold()) continue;
      try {
        return body.apply(version.object);
      } finally {
        version.release();
      }
    }
  }

  /** Calls the current version: {@link ReplicatedObject#call(Object...)}. */
  public Object call(Object... args) {
    return apply(model -> model.call(args));
  }

  /** Calls a method of the current version: {@link ReplicatedObject#callMethod}. */
  public Object callMethod(String method, Object... args) {
    return apply(model -> model.callMethod(method, args));
  }

  /**
   * The general call on the current version: {@link ReplicatedObject#call(String, List, Map,
   * CallOptions)}.
   */
  public Object call(String method, List<?> args, Map<String, ?> kwargs, CallOptions options) {
    return apply(model -> model.call(method, args, kwargs, options));
  }

  /**
   * Submits the general call to the current version ({@link ReplicatedObject#callAsync(String,
   * List, Map, CallOptions)}); the call holds that version until it completes, whatever swaps come
   * meanwhile.
   */
  public CompletableFuture<Object> callAsync(
      String method, List<?> args, Map<String, ?> kwargs, CallOptions options) {
    return apply(model -> model.callAsync(method, args, kwargs, options));
  }

  /**
   * Makes `next` the current version, which the slot owns from now on, and closes the old one once
   * the calls holding it return. Load `next` first: if loading throws, nothing is swapped and the
   * old version serves on. Throws {@link IllegalArgumentException} for null, and {@link
   * IllegalStateException} for a closed `next` or a closed slot (the caller then still owns
   * `next`).
   */
  public void swap(ReplicatedObject next) {
    Version replacement = new Version(next);
    while (true) {
      Version old = current.get();
      if (old == null) throw new IllegalStateException("manypy: this ModelSlot is closed");
      if (current.compareAndSet(old, replacement)) {
        old.release();
        return;
      }
    }
  }

  /** Whether {@link #close()} was called. */
  public boolean isClosed() {
    return current.get() == null;
  }

  /**
   * Closes the current version once its calls return; later calls and swaps throw {@link
   * IllegalStateException}. Idempotent.
   */
  @Override
  public void close() {
    Version last = current.getAndSet(null);
    if (last != null) last.release();
  }
}
