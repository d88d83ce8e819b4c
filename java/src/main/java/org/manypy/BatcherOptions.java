package org.manypy;

import java.time.Duration;
import org.manypy.internal.ManypyNative;

/**
 * Options for {@link ReplicatedObject#batcher(String, BatcherOptions)}; plain Java, checked when
 * the batcher is made. Defaults: batches of at most 8 rows, a wait of 2 ms for a batch to fill,
 * batch dimension 0, and the method's name as the batcher's name. Not thread safe.
 */
public final class BatcherOptions {
  private long maxBatch = 8;
  private Duration maxWait = Duration.ofMillis(2);
  private int batchDim = 0;
  private String name; // null: the method's name

  /**
   * The most rows in a batch, 1 to 65536 ({@link OutOfRangeException} outside, when the batcher is
   * made). A request with more rows runs alone.
   */
  public BatcherOptions maxBatch(long rows) {
    this.maxBatch = rows;
    return this;
  }

  /**
   * How long a batch waits to fill after its first request came, 0 to 60 s, in whole microseconds
   * ({@link OutOfRangeException} outside). {@link Duration#ZERO}: a batch takes only what is
   * already waiting. Null throws IllegalArgumentException.
   */
  public BatcherOptions maxWait(Duration wait) {
    if (wait == null) {
      throw new IllegalArgumentException(
          "manypy: max wait is null (Duration.ZERO waits for nothing)");
    }
    this.maxWait = wait;
    return this;
  }

  /** The dimension requests are stacked along, >= 0; every tensor argument must have it. */
  public BatcherOptions batchDim(int dim) {
    this.batchDim = dim;
    return this;
  }

  /** The batcher's name in the profiler's metrics (the {@code batcher} label). */
  public BatcherOptions name(String name) {
    this.name = name;
    return this;
  }

  /** Native options with these settings (the caller's to free); `options` null: defaults. */
  static long toNative(BatcherOptions options) {
    long made = NativeLibrary.newHandle(ManypyNative::manypy_batcher_options_new);
    if (options == null) return made;
    try {
      Status.check(ManypyNative.manypy_batcher_options_set_max_batch(made, options.maxBatch));
      Status.check(
          ManypyNative.manypy_batcher_options_set_max_wait_us(made, microseconds(options.maxWait)));
      Status.check(ManypyNative.manypy_batcher_options_set_batch_dim(made, options.batchDim));
      if (options.name != null) {
        Status.check(ManypyNative.manypy_batcher_options_set_name(made, options.name));
      }
      return made;
    } catch (RuntimeException | Error e) {
      ManypyNative.manypy_batcher_options_free(made);
      throw e;
    }
  }

  /** Whole microseconds, saturated (the C side refuses what is out of range). */
  private static long microseconds(Duration wait) {
    long nanos = CallOptions.saturatedNanos(wait);
    return nanos / 1000;
  }
}
