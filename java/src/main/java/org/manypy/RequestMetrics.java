package org.manypy;

import java.util.Collections;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;

/**
 * One model's request metrics in a pool since the pool was created ({@link Pool#requestMetrics()}).
 * Immutable. A call's model is the model id of its context ({@link CallOptions#context(String,
 * String)}), "" for calls without one. Durations are in seconds: a request's from admission to
 * completion, its queue time from admission until it began running in its interpreter (in {@link
 * ThreadMode#DIRECT} mode, until it held the interpreter's GIL). Buckets are cumulative, as
 * Prometheus's: bucket i counts the durations at most {@code bucketBounds().get(i)}; the count is
 * the +Inf bucket.
 *
 * @param model the model id
 * @param completed calls completed by code, refusals included (as {@link PoolStats#completed()});
 *     codes with no call are absent. Unmodifiable.
 * @param bucketBounds the buckets' upper bounds in seconds, ascending. Unmodifiable.
 * @param requestBuckets cumulative counts of request durations, one per bound. Unmodifiable.
 * @param requestCount requests timed (refusals have no duration)
 * @param requestSecondsSum their total duration
 * @param queueBuckets cumulative counts of queue times, one per bound. Unmodifiable.
 * @param queueCount requests whose queue time was measured
 * @param queueSecondsSum their total queue time
 */
public record RequestMetrics(
    String model,
    Map<ErrorCode, Long> completed,
    List<Double> bucketBounds,
    List<Long> requestBuckets,
    long requestCount,
    double requestSecondsSum,
    List<Long> queueBuckets,
    long queueCount,
    double queueSecondsSum) {

  public RequestMetrics {
    completed =
        Collections.unmodifiableMap(
            completed.isEmpty() ? new EnumMap<>(ErrorCode.class) : new EnumMap<>(completed));
    bucketBounds = List.copyOf(bucketBounds);
    requestBuckets = List.copyOf(requestBuckets);
    queueBuckets = List.copyOf(queueBuckets);
  }

  /** Calls of this model completed with `code` (0 if none). */
  public long completed(ErrorCode code) {
    return completed.getOrDefault(code, 0L);
  }

  /**
   * From the glue's arrays (jni_glue.h): counts {num_buckets, request_count, queue_count,
   * completed[MANYPY_CODE_SLOTS], request_buckets[n], queue_buckets[n]} and seconds {request_sum,
   * queue_sum, bounds[n]}.
   */
  static RequestMetrics decode(String model, long[] counts, double[] seconds) {
    int n = (int) counts[0];
    int slots = org.manypy.internal.ManypyNativeConstants.MANYPY_CODE_SLOTS;
    Double[] bounds = new Double[n];
    Long[] request = new Long[n];
    Long[] queue = new Long[n];
    for (int i = 0; i < n; ++i) {
      bounds[i] = seconds[2 + i];
      request[i] = counts[3 + slots + i];
      queue[i] = counts[3 + slots + n + i];
    }
    return new RequestMetrics(
        model,
        PoolStats.completedByCode(counts, 3),
        List.of(bounds),
        List.of(request),
        counts[1],
        seconds[0],
        List.of(queue),
        counts[2],
        seconds[1]);
  }
}
