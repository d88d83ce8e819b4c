// A pool's request metrics (core/src/request_metrics.h): which histogram
// bucket a duration falls in (on a bound, just above it, past the last),
// counts by code and by model, refusals without durations, and the
// Prometheus text rendered for a known set of records. Needs no
// interpreter: the records are made by hand, as Job::record makes them.
#include "request_metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace manypy {
namespace {

using Histogram = RequestMetrics::Histogram;
constexpr int kBuckets = RequestMetrics::kBuckets;
constexpr int64_t kMs = 1000 * 1000;

// A bound in nanoseconds, exactly (every bound is a whole number of them).
int64_t bound_ns(int i) { return std::llround(RequestMetrics::bounds()[i] * 1e9); }

// The bucket an observation fell in: the first whose cumulative count is
// 1, or kBuckets for +Inf only.
int bucket_of(const Histogram::Snapshot& s) {
  for (int i = 0; i < kBuckets; ++i) {
    if (s.cumulative[i] == 1) return i;
  }
  return kBuckets;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(RequestMetrics, BoundsGoFrom100MicrosecondsTo10Seconds) {
  const auto& b = RequestMetrics::bounds();
  EXPECT_EQ(b.front(), 0.0001);
  EXPECT_EQ(b.back(), 10.0);
  EXPECT_TRUE(std::is_sorted(b.begin(), b.end()));
  EXPECT_EQ(std::set<double>(b.begin(), b.end()).size(), b.size());
}

// Prometheus buckets are "less than or equal": a duration exactly on a
// bound counts in that bound's bucket, one nanosecond more in the next.
TEST(RequestMetrics, ADurationOnABoundIsInItsBucketAndJustAboveInTheNext) {
  for (int i = 0; i < kBuckets; ++i) {
    Histogram on, above;
    on.observe(bound_ns(i));
    above.observe(bound_ns(i) + 1);
    EXPECT_EQ(bucket_of(on.snapshot()), i) << "bound " << RequestMetrics::bounds()[i];
    EXPECT_EQ(bucket_of(above.snapshot()), i + 1) << "bound " << RequestMetrics::bounds()[i];
    EXPECT_EQ(on.snapshot().count, 1u);
    EXPECT_EQ(above.snapshot().count, 1u);
  }
}

TEST(RequestMetrics, PastTheLastBoundOnlyInfCounts) {
  Histogram h;
  h.observe(60LL * 1000 * kMs);
  const Histogram::Snapshot s = h.snapshot();
  for (int i = 0; i < kBuckets; ++i) EXPECT_EQ(s.cumulative[i], 0u) << i;
  EXPECT_EQ(s.count, 1u);
  EXPECT_DOUBLE_EQ(s.sum_seconds, 60.0);
}

TEST(RequestMetrics, BucketsAreCumulativeAndTheSumIsInSeconds) {
  Histogram h;
  h.observe(0);                  // first bucket
  h.observe(-5);                 // a clock step back counts as 0
  h.observe(3 * kMs);            // <= 0.005
  h.observe(3 * kMs);            // again
  h.observe(30LL * 1000 * kMs);  // +Inf
  const Histogram::Snapshot s = h.snapshot();
  EXPECT_EQ(s.cumulative[0], 2u);
  EXPECT_EQ(s.cumulative[4], 2u);  // <= 0.0025
  EXPECT_EQ(s.cumulative[5], 4u);  // <= 0.005
  EXPECT_EQ(s.cumulative[kBuckets - 1], 4u);
  EXPECT_EQ(s.count, 5u);
  EXPECT_NEAR(s.sum_seconds, 30.006, 1e-9);
}

TEST(RequestMetrics, CountsByCodeAndByModel) {
  RequestMetrics metrics;
  RequestMetrics::Series& a = metrics.series("a");
  RequestMetrics::Series& b = metrics.series("b");
  EXPECT_NE(&a, &b);
  EXPECT_EQ(&metrics.series("a"), &a);  // the same series every time
  EXPECT_EQ(a.model, "a");
  a.record(0, kMs, kMs);
  a.record(0, kMs, -1);
  a.record(3, kMs, kMs);
  b.record(3, kMs, kMs);
  b.record(19, 5 * kMs, -1);
  b.record(99, kMs, kMs);  // beyond every code: the last slot
  b.record(-1, kMs, kMs);  // likewise

  const std::vector<RequestMetrics::SeriesSnapshot> snap = metrics.snapshot();
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_EQ(snap[0].model, "a");  // in the order of their first calls
  EXPECT_EQ(snap[1].model, "b");
  EXPECT_EQ(snap[0].completed[0], 2u);
  EXPECT_EQ(snap[0].completed[3], 1u);
  EXPECT_EQ(snap[1].completed[3], 1u);
  EXPECT_EQ(snap[1].completed[19], 1u);
  EXPECT_EQ(snap[1].completed[kCodeSlots - 1], 2u);
  EXPECT_EQ(snap[0].request.count, 3u);
  EXPECT_EQ(snap[0].queue.count, 2u);  // one had no queue time
  EXPECT_EQ(snap[1].request.count, 4u);
  EXPECT_EQ(snap[1].queue.count, 3u);

  const std::array<uint64_t, kCodeSlots> total = metrics.completed();
  EXPECT_EQ(total[0], 2u);
  EXPECT_EQ(total[3], 2u);
  EXPECT_EQ(total[19], 1u);
  EXPECT_EQ(total[kCodeSlots - 1], 2u);
  uint64_t all = 0;
  for (uint64_t n : total) all += n;
  EXPECT_EQ(all, 7u);
}

// A refusal (Job::refused) has a code and no durations.
TEST(RequestMetrics, ARefusalCountsWithoutDurations) {
  RequestMetrics metrics;
  RequestMetrics::Series& s = metrics.series("m");
  s.record(22, -1, -1);
  EXPECT_EQ(s.completed[22], 1u);
  EXPECT_EQ(s.request.snapshot().count, 0u);
  EXPECT_EQ(s.queue.snapshot().count, 0u);
  EXPECT_EQ(s.request.snapshot().sum_seconds, 0.0);
}

// The per-thread cache of series must not hand one pool's series to
// another pool, nor one model's to another.
TEST(RequestMetrics, EachPoolAndModelHasItsOwnSeries) {
  RequestMetrics one, two;
  RequestMetrics::Series& x1 = one.series("x");
  RequestMetrics::Series& x2 = two.series("x");
  EXPECT_NE(&x1, &x2);
  EXPECT_EQ(&one.series("x"), &x1);
  EXPECT_EQ(&two.series("x"), &x2);
  EXPECT_NE(&one.series("y"), &x1);
  EXPECT_EQ(&one.series("x"), &x1);
  // And from another thread, the same series.
  RequestMetrics::Series* seen = nullptr;
  std::thread([&] { seen = &one.series("x"); }).join();
  EXPECT_EQ(seen, &x1);
  EXPECT_EQ(one.snapshot().size(), 2u);
  EXPECT_EQ(two.snapshot().size(), 1u);
}

TEST(RequestMetrics, RendersThePrometheusText) {
  RequestMetrics metrics;
  RequestMetrics::Series& s = metrics.series("resnet");
  s.record(0, 150 * 1000, 50 * 1000);   // 150 us, waited 50 us
  s.record(0, 2 * kMs, -1);             // 2 ms, never waited
  s.record(22, -1, -1);                 // refused: overloaded
  s.record(3, 20LL * 1000 * kMs, kMs);  // 20 s (+Inf), waited 1 ms
  PoolGauges gauges;
  gauges.in_flight = 3;
  gauges.queued = 1;
  gauges.starting = 1;
  gauges.ready = 2;
  gauges.busy = 1;
  gauges.broken = 0;
  gauges.draining = true;
  const std::string text = pool_prometheus_text(metrics.snapshot(), gauges, "p1");
  const std::vector<std::string> lines = lines_of(text);
  const std::set<std::string> have(lines.begin(), lines.end());
  const std::string req = "manypy_request_duration_seconds";
  const std::string queue = "manypy_queue_duration_seconds";
  const std::string at = "{pool=\"p1\",model=\"resnet\"";
  for (const std::string& line : std::vector<std::string>{
           "# TYPE manypy_requests_total counter",
           "manypy_requests_total" + at + ",code=\"ok\"} 2",
           "manypy_requests_total" + at + ",code=\"python\"} 1",
           "manypy_requests_total" + at + ",code=\"overloaded\"} 1",
           "# TYPE " + req + " histogram",
           req + "_bucket" + at + ",le=\"0.0001\"} 0",
           req + "_bucket" + at + ",le=\"0.00025\"} 1",
           req + "_bucket" + at + ",le=\"0.001\"} 1",
           req + "_bucket" + at + ",le=\"0.0025\"} 2",
           req + "_bucket" + at + ",le=\"1\"} 2",
           req + "_bucket" + at + ",le=\"10\"} 2",
           req + "_bucket" + at + ",le=\"+Inf\"} 3",
           req + "_sum" + at + "} 20.00215",
           req + "_count" + at + "} 3",
           "# TYPE " + queue + " histogram",
           queue + "_bucket" + at + ",le=\"0.0001\"} 1",
           queue + "_bucket" + at + ",le=\"0.0005\"} 1",
           queue + "_bucket" + at + ",le=\"0.001\"} 2",
           queue + "_bucket" + at + ",le=\"+Inf\"} 2",
           queue + "_sum" + at + "} 0.00105",
           queue + "_count" + at + "} 2",
           "# TYPE manypy_inflight_requests gauge",
           std::string("manypy_inflight_requests{pool=\"p1\"} 3"),
           std::string("manypy_queued_requests{pool=\"p1\"} 1"),
           std::string("manypy_interpreters{pool=\"p1\",state=\"starting\"} 1"),
           std::string("manypy_interpreters{pool=\"p1\",state=\"ready\"} 2"),
           std::string("manypy_interpreters{pool=\"p1\",state=\"busy\"} 1"),
           std::string("manypy_interpreters{pool=\"p1\",state=\"broken\"} 0"),
           std::string("manypy_interpreters{pool=\"p1\",state=\"lost\"} 0"),
           std::string("manypy_draining{pool=\"p1\"} 1"),
       }) {
    EXPECT_EQ(have.count(line), 1u) << "missing: " << line << "\nin:\n" << text;
  }
  // Codes no call ended with have no line.
  EXPECT_EQ(text.find("code=\"internal\""), std::string::npos);
  // Every bucket of both histograms, + Inf, sum and count; nothing twice.
  const auto count_prefix = [&](const std::string& prefix) {
    return std::count_if(lines.begin(), lines.end(),
                         [&](const std::string& l) { return l.rfind(prefix, 0) == 0; });
  };
  EXPECT_EQ(count_prefix(req + "_bucket"), kBuckets + 1);
  EXPECT_EQ(count_prefix(queue + "_bucket"), kBuckets + 1);
  EXPECT_EQ(count_prefix("manypy_requests_total{"), 3);
  EXPECT_EQ(have.size(), lines.size());
  // Cumulative: the buckets never decrease, in the order of their bounds.
  uint64_t last = 0;
  for (const std::string& l : lines) {
    if (l.rfind(req + "_bucket", 0) != 0) continue;
    const uint64_t n = std::stoull(l.substr(l.rfind(' ') + 1));
    EXPECT_GE(n, last) << l;
    last = n;
  }
  EXPECT_EQ(text.back(), '\n');
}

TEST(RequestMetrics, WithoutAPoolNameAndWithLabelsToEscape) {
  RequestMetrics metrics;
  metrics.series("a\"b\\c\nd").record(0, kMs, kMs);
  const std::string text = pool_prometheus_text(metrics.snapshot(), PoolGauges{}, "");
  const std::vector<std::string> lines = lines_of(text);
  const std::set<std::string> have(lines.begin(), lines.end());
  for (const std::string& line : {
           std::string("manypy_requests_total{model=\"a\\\"b\\\\c\\nd\",code=\"ok\"} 1"),
           std::string("manypy_request_duration_seconds_count{model=\"a\\\"b\\\\c\\nd\"} 1"),
           std::string("manypy_inflight_requests 0"),
           std::string("manypy_interpreters{state=\"ready\"} 0"),
           std::string("manypy_draining 0"),
       }) {
    EXPECT_EQ(have.count(line), 1u) << "missing: " << line << "\nin:\n" << text;
  }
  EXPECT_EQ(text.find("pool="), std::string::npos);

  const std::string named = pool_prometheus_text({}, PoolGauges{}, "my \"pool\"");
  EXPECT_NE(named.find("manypy_inflight_requests{pool=\"my \\\"pool\\\"\"} 0\n"), std::string::npos)
      << named;
  // No model yet: no requests_total line, no histogram line.
  EXPECT_EQ(named.find("manypy_requests_total{"), std::string::npos);
  EXPECT_EQ(named.find("_bucket"), std::string::npos);
}

}  // namespace
}  // namespace manypy
