package org.manypy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.FunctionTimer;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tag;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.manypy.micrometer.ManypyMetrics;

/**
 * org.manypy.micrometer.ManypyMetrics: the meters, their values against the pool's stats and
 * request metrics, their Prometheus names, and series that appear after binding.
 */
class ManypyMetricsTest {
  static void exec(Pool pool, String model, String source) {
    try (CallOptions options = new CallOptions().context(model, "r")) {
      pool.exec(source, options);
    }
  }

  static void fail(Pool pool, String model) {
    assertThrows(PythonException.class, () -> exec(pool, model, "raise ValueError('no')"));
  }

  static double counter(MeterRegistry registry, String model, String code) {
    FunctionCounter c =
        registry.find("manypy.requests").tags("model", model, "code", code).functionCounter();
    return c == null ? -1 : c.count();
  }

  static double gauge(MeterRegistry registry, String name, String... tags) {
    Gauge g = registry.find(name).tags(tags).gauge();
    if (g == null) throw new AssertionError("no gauge " + name + " " + List.of(tags));
    return g.value();
  }

  static FunctionTimer timer(MeterRegistry registry, String name, String model) {
    FunctionTimer t = registry.find(name).tags("model", model).functionTimer();
    if (t == null) throw new AssertionError("no timer " + name + " for " + model);
    return t;
  }

  static boolean hasLine(String text, String line) {
    return text.lines().anyMatch(line::equals);
  }

  @Test
  void theMetersReportThePoolUnderTheirPrometheusNames() throws Exception {
    try (Pool pool = Pool.create(new PoolOptions().name("svc"))) {
      exec(pool, "m1", "x = 1");
      exec(pool, "m1", "x = 2");
      fail(pool, "m1");
      SimpleMeterRegistry simple = new SimpleMeterRegistry();
      PrometheusMeterRegistry prometheus = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
      ManypyMetrics metrics = new ManypyMetrics(pool);
      metrics.bindTo(simple);
      metrics.bindTo(prometheus);

      // Every meter carries the pool's name.
      for (Meter meter : simple.getMeters()) {
        assertEquals("svc", meter.getId().getTag("pool"), meter.getId().toString());
      }
      assertEquals(2.0, counter(simple, "m1", "ok"));
      assertEquals(1.0, counter(simple, "m1", "python"));
      assertEquals(
          -1, counter(simple, "m1", "deadline_exceeded"), "codes with no call have no meter");
      RequestMetrics m1 = pool.requestMetrics().get(0);
      FunctionTimer requests = timer(simple, "manypy.request.duration", "m1");
      assertEquals(3.0, requests.count());
      assertEquals(m1.requestSecondsSum(), requests.totalTime(TimeUnit.SECONDS), 1e-9);
      FunctionTimer queue = timer(simple, "manypy.queue.duration", "m1");
      assertEquals(3.0, queue.count());
      assertEquals(m1.queueSecondsSum(), queue.totalTime(TimeUnit.SECONDS), 1e-9);
      assertEquals(0.0, gauge(simple, "manypy.inflight.requests"));
      assertEquals(0.0, gauge(simple, "manypy.queued.requests"));
      assertEquals(1.0, gauge(simple, "manypy.interpreters", "state", "ready"));
      for (String state : List.of("starting", "busy", "broken", "lost")) {
        assertEquals(0.0, gauge(simple, "manypy.interpreters", "state", state), state);
      }
      assertEquals(0.0, gauge(simple, "manypy.draining"));
      assertEquals(0.0, gauge(simple, "manypy.replacement.no_room"));

      String text = prometheus.scrape();
      for (String line :
          List.of(
              "# TYPE manypy_requests_total counter",
              "manypy_requests_total{code=\"ok\",model=\"m1\",pool=\"svc\"} 2.0",
              "manypy_requests_total{code=\"python\",model=\"m1\",pool=\"svc\"} 1.0",
              "# TYPE manypy_request_duration_seconds summary", // count and sum, no buckets
              "manypy_request_duration_seconds_count{model=\"m1\",pool=\"svc\"} 3",
              "manypy_queue_duration_seconds_count{model=\"m1\",pool=\"svc\"} 3",
              "manypy_inflight_requests{pool=\"svc\"} 0.0",
              "manypy_queued_requests{pool=\"svc\"} 0.0",
              "manypy_interpreters{pool=\"svc\",state=\"ready\"} 1.0",
              "manypy_interpreters{pool=\"svc\",state=\"broken\"} 0.0",
              "manypy_draining{pool=\"svc\"} 0.0",
              "manypy_interpreters_replaced_total{pool=\"svc\"} 0.0",
              "manypy_replacement_no_room{pool=\"svc\"} 0.0")) {
        assertTrue(hasLine(text, line), line + " in\n" + text);
      }
      assertTrue(
          text.contains("manypy_request_duration_seconds_sum{model=\"m1\",pool=\"svc\"} "), text);

      // A model and a code that appear after binding are picked up by the reads themselves
      // (registered just after the read that first sees them).
      exec(pool, "m2", "y = 1");
      assertThrows(
          OutOfRangeException.class,
          () -> {
            try (CallOptions pinned = new CallOptions().context("m1", "").interpreter(5)) {
              pool.exec("x = 1", pinned);
            }
          });
      TestSupport.await(
          () -> {
            String scraped = prometheus.scrape();
            return hasLine(
                    scraped, "manypy_requests_total{code=\"ok\",model=\"m2\",pool=\"svc\"} 1.0")
                && hasLine(
                    scraped,
                    "manypy_requests_total{code=\"out_of_range\",model=\"m1\",pool=\"svc\"} 1.0")
                && hasLine(
                    scraped, "manypy_request_duration_seconds_count{model=\"m2\",pool=\"svc\"} 1");
          },
          "m2 and m1's out_of_range in the scrape");
      TestSupport.await(() -> counter(simple, "m2", "ok") == 1.0, "m2 in the other registry too");

      // refresh() registers at once; a call without a context is model "".
      exec(pool, "", "z = 1");
      exec(pool, "m3", "z = 1");
      metrics.refresh();
      assertEquals(1.0, counter(simple, "", "ok"));
      assertEquals(1.0, counter(simple, "m3", "ok"));
      assertTrue(
          hasLine(
              prometheus.scrape(),
              "manypy_requests_total{code=\"ok\",model=\"\",pool=\"svc\"} 1.0"),
          prometheus.scrape());

      // The gauges follow the load.
      ExecutorService thread = Executors.newSingleThreadExecutor();
      try {
        Future<?> sleeping = thread.submit(() -> exec(pool, "m1", "import time\ntime.sleep(0.5)"));
        TestSupport.await(() -> pool.inFlight() == 1, "a call in flight");
        metrics.refresh();
        assertEquals(1.0, gauge(simple, "manypy.inflight.requests"));
        assertEquals(1.0, gauge(simple, "manypy.interpreters", "state", "busy"));
        assertEquals(0.0, gauge(simple, "manypy.interpreters", "state", "ready"));
        sleeping.get(TestSupport.HANG_SECONDS, TimeUnit.SECONDS);
      } finally {
        thread.shutdown();
      }
      pool.drain();
      metrics.refresh();
      assertEquals(1.0, gauge(simple, "manypy.draining"));
      assertEquals(0.0, gauge(simple, "manypy.inflight.requests"));
      assertThrows(DrainingException.class, () -> exec(pool, "m1", "x = 1"));
      metrics.refresh();
      assertEquals(1.0, counter(simple, "m1", "draining"));
      assertEquals(3.0, counter(simple, "m1", "ok"));

      // Closed: the gauges read NaN, the counters keep their last values.
      pool.close();
      metrics.refresh();
      assertTrue(Double.isNaN(gauge(simple, "manypy.inflight.requests")));
      assertTrue(Double.isNaN(gauge(simple, "manypy.interpreters", "state", "ready")));
      assertEquals(3.0, counter(simple, "m1", "ok"));
      assertEquals(2.0, timer(simple, "manypy.request.duration", "m2").count() + 1);
      prometheus.scrape(); // still scrapes
    }
  }

  @Test
  void tagsAreTheCallersAndTheNameIsOptional() {
    try (Pool unnamed = Pool.create(1)) {
      exec(unnamed, "m", "x = 1");
      SimpleMeterRegistry registry = new SimpleMeterRegistry();
      new ManypyMetrics(unnamed, Tags.of("service", "ranker")).bindTo(registry);
      for (Meter meter : registry.getMeters()) {
        assertNull(meter.getId().getTag("pool"), meter.getId().toString());
        assertEquals("ranker", meter.getId().getTag("service"), meter.getId().toString());
      }
      assertEquals(1.0, counter(registry, "m", "ok"));
    }
    try (Pool named = Pool.create(new PoolOptions().name("a"))) {
      SimpleMeterRegistry registry = new SimpleMeterRegistry();
      new ManypyMetrics(named, List.of(Tag.of("pool", "b"))).bindTo(registry);
      assertFalse(registry.getMeters().isEmpty());
      for (Meter meter : registry.getMeters()) {
        assertEquals("b", meter.getId().getTag("pool"), "the caller's pool tag wins");
      }
    }
    assertThrows(IllegalArgumentException.class, () -> new ManypyMetrics(null));
  }
}
