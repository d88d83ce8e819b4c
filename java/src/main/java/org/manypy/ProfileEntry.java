package org.manypy;

/**
 * The profiler's aggregate for one (model id, operator) pair.
 *
 * @param modelId "" for operators run without a context
 * @param operator e.g. "aten::addmm"
 * @param count sampled calls
 * @param totalNanos their total time
 * @param p50Nanos median over the latest 4096 samples
 * @param p99Nanos 99th percentile over the latest 4096 samples
 */
public record ProfileEntry(
    String modelId, String operator, long count, long totalNanos, long p50Nanos, long p99Nanos) {}
