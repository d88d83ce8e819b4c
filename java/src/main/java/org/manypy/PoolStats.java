package org.manypy;

import java.util.Collections;
import java.util.EnumMap;
import java.util.Map;

/**
 * A pool's health at one moment ({@link Pool#stats()}), for readiness probes, dashboards and
 * autoscalers. Immutable. The counts are read without a lock, so they may be taken a moment apart.
 *
 * @param interpreters the pool's size now ({@link Pool#size()}); the five states (starting, ready,
 *     busy, broken, lost) add up to it
 * @param starting not yet able to serve: starting, or being leased
 * @param ready serving, with no call
 * @param busy serving, with at least one call
 * @param broken failed to start, or retired ({@link Pool#checkInterpreter(int)} says why)
 * @param inFlight calls admitted and not complete, as {@link Pool#inFlight()}
 * @param queued calls waiting for an interpreter, as {@link Pool#queued()}
 * @param draining whether {@link Pool#drain} was called (a pool never stops draining)
 * @param completed calls completed since the pool was created, by code: {@link ErrorCode#OK}
 *     succeeded, {@link ErrorCode#PYTHON} raised, and so on; calls refused at admission ({@link
 *     ErrorCode#OVERLOADED}, {@link ErrorCode#DRAINING}) count too. Codes with no call are absent;
 *     codes newer than this binding add up under {@link ErrorCode#UNKNOWN}. Unmodifiable.
 * @param lost interpreters in which a stopped call still runs twice its grace period (and at least
 *     1 s) after its stop (model code swallowing the stop where Python cannot raise it, or C code
 *     holding the GIL): they serve no other call while it runs ({@link Pool#checkInterpreter(int)}
 *     says why; docs/serving.md, "Lost interpreters"). Since 0.4.
 * @param replaced retired interpreters replaced since the pool was created: a replacement takes the
 *     retired one's index (since 0.4)
 * @param noRoom whether a retired interpreter waits for a replacement the process has no room for
 *     (its interpreters all leased, retired or distrusted); the pool tries again each second (since
 *     0.4)
 */
public record PoolStats(
    int interpreters,
    int starting,
    int ready,
    int busy,
    int broken,
    long inFlight,
    long queued,
    boolean draining,
    Map<ErrorCode, Long> completed,
    int lost,
    long replaced,
    boolean noRoom) {

  public PoolStats {
    completed =
        Collections.unmodifiableMap(
            new EnumMap<>(completed.isEmpty() ? new EnumMap<>(ErrorCode.class) : completed));
  }

  /** Calls completed with `code` (0 if none). */
  public long completed(ErrorCode code) {
    return completed.getOrDefault(code, 0L);
  }

  /** Calls completed with any code, refusals included. */
  public long totalCompleted() {
    return completed.values().stream().mapToLong(Long::longValue).sum();
  }

  /** Whether the pool can serve now: at least one interpreter ready or busy, and not draining. */
  public boolean serving() {
    return servingAtLeast(1);
  }

  /**
   * Whether the pool serves with at least `min` interpreters ready or busy (at least 1 whatever
   * `min`), and is not draining: a readiness probe for a service that needs that capacity, whose
   * pool lost or retired interpreters below it (docs/serving.md, "Readiness, liveness and
   * restarts"). Since 0.4.
   */
  public boolean servingAtLeast(int min) {
    return !draining && ready + busy >= Math.max(1, min);
  }

  /** From manypy_jni_pool_get_stats's array (jni_glue.h). */
  static PoolStats decode(long[] v) {
    int after = 8 + org.manypy.internal.ManypyNativeConstants.MANYPY_CODE_SLOTS;
    return new PoolStats(
        (int) v[1],
        (int) v[2],
        (int) v[3],
        (int) v[4],
        (int) v[5],
        v[6],
        v[7],
        v[0] != 0,
        completedByCode(v, 8),
        (int) v[after],
        v[after + 1],
        v[after + 2] != 0);
  }

  /**
   * The C API's per-code counts (MANYPY_CODE_SLOTS of them from `offset`), by ErrorCode: the codes
   * with a count, slots this binding does not know added up under UNKNOWN.
   */
  static Map<ErrorCode, Long> completedByCode(long[] values, int offset) {
    Map<ErrorCode, Long> out = new EnumMap<>(ErrorCode.class);
    int slots = org.manypy.internal.ManypyNativeConstants.MANYPY_CODE_SLOTS;
    for (int slot = 0; slot < slots; ++slot) {
      long count = values[offset + slot];
      if (count != 0) out.merge(ErrorCode.of(slot), count, Long::sum);
    }
    return out;
  }
}
