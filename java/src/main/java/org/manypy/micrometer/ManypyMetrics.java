package org.manypy.micrometer;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.FunctionTimer;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tag;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.binder.MeterBinder;
import java.lang.ref.WeakReference;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.ToDoubleFunction;
import org.manypy.ErrorCode;
import org.manypy.Pool;
import org.manypy.PoolStats;
import org.manypy.RequestMetrics;

/**
 * A Micrometer {@link MeterBinder} for one {@link Pool}: its request counts, durations and load as
 * meters of whatever registry a service publishes (Prometheus, OTLP, StatsD, ...).
 *
 * <pre>{@code
 * new ManypyMetrics(pool).bindTo(registry);
 * }</pre>
 *
 * <table>
 *   <caption>Meters (Prometheus names as the Prometheus registry writes them)</caption>
 *   <tr><th>meter</th><th>type</th><th>tags</th><th>Prometheus</th></tr>
 *   <tr><td>manypy.requests</td><td>FunctionCounter</td><td>model, code</td>
 *       <td>manypy_requests_total</td></tr>
 *   <tr><td>manypy.request.duration</td><td>FunctionTimer</td><td>model</td>
 *       <td>manypy_request_duration_seconds_count, _sum</td></tr>
 *   <tr><td>manypy.queue.duration</td><td>FunctionTimer</td><td>model</td>
 *       <td>manypy_queue_duration_seconds_count, _sum</td></tr>
 *   <tr><td>manypy.inflight.requests</td><td>Gauge</td><td></td>
 *       <td>manypy_inflight_requests</td></tr>
 *   <tr><td>manypy.queued.requests</td><td>Gauge</td><td></td>
 *       <td>manypy_queued_requests</td></tr>
 *   <tr><td>manypy.interpreters</td><td>Gauge</td><td>state: starting, ready, busy,
 *       broken, lost</td><td>manypy_interpreters</td></tr>
 *   <tr><td>manypy.draining</td><td>Gauge</td><td></td><td>manypy_draining (0 or 1)</td></tr>
 *   <tr><td>manypy.interpreters.replaced</td><td>FunctionCounter</td><td></td>
 *       <td>manypy_interpreters_replaced_total</td></tr>
 *   <tr><td>manypy.replacement.no_room</td><td>Gauge</td><td></td>
 *       <td>manypy_replacement_no_room (0 or 1)</td></tr>
 * </table>
 *
 * <p>Every meter also carries {@code pool=<name>} when the pool has a name ({@link
 * org.manypy.PoolOptions#name(String)}), and the tags given to the constructor. {@code model} is
 * the model id of the calls' context ("" for calls without one); {@code code} is the lower-case
 * {@link ErrorCode} ({@code ok}, {@code python}, {@code deadline_exceeded}, ...), as in {@link
 * Pool#prometheusText()}.
 *
 * <p>The durations are the count and total of the pool's histograms: Micrometer cannot take a
 * histogram whose buckets were counted elsewhere, so the buckets themselves are in {@link
 * Pool#prometheusText()} ({@code manypy_request_duration_seconds_bucket}), for a service that
 * serves that text beside its registry's.
 *
 * <p>Values are read from the pool when the registry reads its meters (a scrape, a publish), at
 * most once per 100 ms, so one scrape sees one moment of the pool. Models and codes that appear
 * after binding are registered when a read first sees them, just after it (never inside a
 * registry's own read), and reported from the next read on; {@link #refresh()} registers them at
 * once. The meters hold the pool weakly, as Micrometer's do: once the pool is collected they read
 * NaN, and once it is closed the gauges read NaN and the counters and timers keep their last
 * values.
 */
public final class ManypyMetrics implements MeterBinder {
  /** How long one reading of the pool serves the meters. */
  private static final long MAX_AGE_NANOS = TimeUnit.MILLISECONDS.toNanos(100);

  private final WeakReference<Pool> pool;
  private final Tags tags;
  private final List<MeterRegistry> registries = new CopyOnWriteArrayList<>();
  // The series given meters so far: models (timers) and "model\0code" (counters).
  private final Set<String> models = ConcurrentHashMap.newKeySet();
  private final Set<String> counters = ConcurrentHashMap.newKeySet();
  private final AtomicBoolean registrationPending = new AtomicBoolean();
  private final Object readLock = new Object();
  // Stale from the start (nanoTime differences only: its values may be negative).
  private volatile Reading reading =
      new Reading(null, Map.of(), System.nanoTime() - 2 * MAX_AGE_NANOS);

  /** One reading of the pool: stats null when it could not be read (closed). */
  private record Reading(PoolStats stats, Map<String, RequestMetrics> byModel, long takenAt) {}

  /** Meters for `pool`, tagged with its name if it has one. */
  public ManypyMetrics(Pool pool) {
    this(pool, Tags.empty());
  }

  /** Meters for `pool`, with `tags` on each, and its name as {@code pool} unless `tags` has one. */
  public ManypyMetrics(Pool pool, Iterable<Tag> tags) {
    if (pool == null) throw new IllegalArgumentException("manypy: ManypyMetrics needs a pool");
    Tags all = Tags.of(tags);
    if (!pool.name().isEmpty() && all.stream().noneMatch(t -> t.getKey().equals("pool"))) {
      all = all.and("pool", pool.name());
    }
    this.pool = new WeakReference<>(pool);
    this.tags = all;
  }

  @Override
  public synchronized void bindTo(MeterRegistry registry) {
    registries.add(registry);
    Pool p = pool.get();
    if (p == null) return;
    gauge(
        registry,
        p,
        "manypy.inflight.requests",
        "Calls admitted and not complete.",
        s -> s.inFlight(),
        Tags.empty());
    gauge(
        registry,
        p,
        "manypy.queued.requests",
        "Calls waiting for an interpreter.",
        s -> s.queued(),
        Tags.empty());
    gauge(
        registry,
        p,
        "manypy.interpreters",
        "The pool's interpreters by state.",
        s -> s.starting(),
        Tags.of("state", "starting"));
    gauge(
        registry,
        p,
        "manypy.interpreters",
        "The pool's interpreters by state.",
        s -> s.ready(),
        Tags.of("state", "ready"));
    gauge(
        registry,
        p,
        "manypy.interpreters",
        "The pool's interpreters by state.",
        s -> s.busy(),
        Tags.of("state", "busy"));
    gauge(
        registry,
        p,
        "manypy.interpreters",
        "The pool's interpreters by state.",
        s -> s.broken(),
        Tags.of("state", "broken"));
    gauge(
        registry,
        p,
        "manypy.interpreters",
        "The pool's interpreters by state.",
        s -> s.lost(),
        Tags.of("state", "lost"));
    gauge(
        registry,
        p,
        "manypy.draining",
        "1 once the pool drains (Pool.drain).",
        s -> s.draining() ? 1 : 0,
        Tags.empty());
    FunctionCounter.builder(
            "manypy.interpreters.replaced",
            p,
            held -> {
              PoolStats stats = current(held).stats();
              return stats == null ? Double.NaN : stats.replaced();
            })
        .description("Retired interpreters the pool replaced with new ones.")
        .tags(tags)
        .register(registry);
    gauge(
        registry,
        p,
        "manypy.replacement.no_room",
        "1 while a retired interpreter could not be replaced for want of room in the process.",
        s -> s.noRoom() ? 1 : 0,
        Tags.empty());
    Reading now = read(p, true);
    for (String model : models) registerModel(registry, p, model);
    for (String counter : counters) {
      int at = counter.indexOf('\0');
      registerCounter(registry, p, counter.substring(0, at), counter.substring(at + 1));
    }
    registerNew(now);
  }

  /**
   * Reads the pool now and registers meters, in every registry bound, for the models and codes that
   * appeared since the last read. Meters of a series that already had them are untouched.
   */
  public void refresh() {
    Pool p = pool.get();
    if (p != null) registerNew(read(p, true));
  }

  private void gauge(
      MeterRegistry registry,
      Pool p,
      String name,
      String description,
      ToDoubleFunction<PoolStats> value,
      Tags more) {
    Gauge.builder(
            name,
            p,
            held -> {
              PoolStats stats = current(held).stats();
              return stats == null ? Double.NaN : value.applyAsDouble(stats);
            })
        .description(description)
        .tags(tags)
        .tags(more)
        .register(registry);
  }

  private void registerModel(MeterRegistry registry, Pool p, String model) {
    FunctionTimer.builder(
            "manypy.request.duration",
            p,
            held -> metrics(held, model).map(RequestMetrics::requestCount).orElse(0L),
            held -> metrics(held, model).map(RequestMetrics::requestSecondsSum).orElse(0.0),
            TimeUnit.SECONDS)
        .description("Time from admission to completion (buckets: Pool.prometheusText()).")
        .tags(tags)
        .tag("model", model)
        .register(registry);
    FunctionTimer.builder(
            "manypy.queue.duration",
            p,
            held -> metrics(held, model).map(RequestMetrics::queueCount).orElse(0L),
            held -> metrics(held, model).map(RequestMetrics::queueSecondsSum).orElse(0.0),
            TimeUnit.SECONDS)
        .description(
            "Time from admission until the call began running in its interpreter "
                + "(buckets: Pool.prometheusText()).")
        .tags(tags)
        .tag("model", model)
        .register(registry);
  }

  private void registerCounter(MeterRegistry registry, Pool p, String model, String code) {
    ErrorCode errorCode = ErrorCode.valueOf(code.toUpperCase(Locale.ROOT));
    FunctionCounter.builder(
            "manypy.requests",
            p,
            held -> metrics(held, model).map(m -> (double) m.completed(errorCode)).orElse(0.0))
        .description("Calls completed or refused, by model and status code.")
        .tags(tags)
        .tag("model", model)
        .tag("code", code)
        .register(registry);
  }

  private java.util.Optional<RequestMetrics> metrics(Pool held, String model) {
    return java.util.Optional.ofNullable(current(held).byModel().get(model));
  }

  /**
   * The latest reading, read again if older than MAX_AGE_NANOS. Called from the registry's reads:
   * series seen for the first time are registered afterwards, on another thread.
   */
  private Reading current(Pool p) {
    Reading last = reading;
    if (System.nanoTime() - last.takenAt() < MAX_AGE_NANOS) return last;
    Reading now = read(p, false);
    if (hasNew(now) && registrationPending.compareAndSet(false, true)) {
      CompletableFuture.runAsync(
          () -> {
            registrationPending.set(false);
            registerNew(reading);
          });
    }
    return now;
  }

  /** Reads the pool (once for concurrent readers, unless `now`). */
  private Reading read(Pool p, boolean now) {
    synchronized (readLock) {
      Reading last = reading;
      if (!now && System.nanoTime() - last.takenAt() < MAX_AGE_NANOS) return last;
      Reading next;
      try {
        PoolStats stats = p.stats();
        Map<String, RequestMetrics> byModel = new LinkedHashMap<>();
        for (RequestMetrics m : p.requestMetrics()) byModel.put(m.model(), m);
        next = new Reading(stats, byModel, System.nanoTime());
      } catch (IllegalStateException closed) {
        // Closed: gauges read NaN, counters and timers keep their last values.
        next = new Reading(null, last.byModel(), System.nanoTime());
      }
      reading = next;
      return next;
    }
  }

  private boolean hasNew(Reading r) {
    for (RequestMetrics m : r.byModel().values()) {
      if (!models.contains(m.model())) return true;
      for (ErrorCode code : m.completed().keySet()) {
        if (!counters.contains(counterKey(m.model(), code))) return true;
      }
    }
    return false;
  }

  private static String counterKey(String model, ErrorCode code) {
    return model + '\0' + code.name().toLowerCase(Locale.ROOT);
  }

  /** Registers, in every registry bound, meters for the series of `r` that have none yet. */
  private synchronized void registerNew(Reading r) {
    Pool p = pool.get();
    if (p == null) return;
    for (RequestMetrics m : r.byModel().values()) {
      if (models.add(m.model())) {
        for (MeterRegistry registry : registries) registerModel(registry, p, m.model());
      }
      for (ErrorCode code : m.completed().keySet()) {
        String key = counterKey(m.model(), code);
        if (counters.add(key)) {
          String label = key.substring(key.indexOf('\0') + 1);
          for (MeterRegistry registry : registries) registerCounter(registry, p, m.model(), label);
        }
      }
    }
  }
}
