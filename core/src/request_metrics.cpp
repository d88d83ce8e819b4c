#include "request_metrics.h"

#include <algorithm>
#include <cstdio>

#include "prometheus_text.h"

namespace manypy {

const std::array<double, RequestMetrics::kBuckets>& RequestMetrics::bounds() {
  static const std::array<double, kBuckets> kBounds = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
      0.05,   0.1,     0.25,   0.5,   1.0,    2.5,   5.0,  10.0};
  return kBounds;
}

void RequestMetrics::Histogram::observe(int64_t ns) noexcept {
  if (ns < 0) ns = 0;
  const double seconds = static_cast<double>(ns) * 1e-9;
  const auto& b = bounds();
  const size_t bucket = std::lower_bound(b.begin(), b.end(), seconds) - b.begin();
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(static_cast<uint64_t>(ns), std::memory_order_relaxed);
}

RequestMetrics::Histogram::Snapshot RequestMetrics::Histogram::snapshot() const {
  Snapshot s;
  uint64_t running = 0;
  for (int i = 0; i < kBuckets; ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    s.cumulative[i] = running;
  }
  s.count = running + counts_[kBuckets].load(std::memory_order_relaxed);
  s.sum_seconds = static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) * 1e-9;
  return s;
}

void RequestMetrics::Series::record(int code, int64_t request_ns, int64_t queue_ns) noexcept {
  if (code < 0 || code >= kCodeSlots) code = static_cast<int>(kCodeSlots - 1);
  completed[code].fetch_add(1, std::memory_order_relaxed);
  if (request_ns >= 0) request.observe(request_ns);
  if (queue_ns >= 0) queue.observe(queue_ns);
}

namespace {
std::atomic<uint64_t> g_next_id{1};
}

RequestMetrics::RequestMetrics() : id_(g_next_id.fetch_add(1)) {}

RequestMetrics::Series& RequestMetrics::series(const std::string& model) {
  // Most threads call one model over and over: keep the last one found.
  struct Cache {
    uint64_t owner = 0;
    std::string model;
    Series* series = nullptr;
  };
  thread_local Cache cache;
  if (cache.owner == id_ && cache.model == model) return *cache.series;
  std::lock_guard<std::mutex> lock(mu_);
  Series*& found = by_model_[model];
  if (found == nullptr) {
    series_.push_back(std::make_unique<Series>(model));
    found = series_.back().get();
  }
  cache.owner = id_;
  cache.model = model;
  cache.series = found;
  return *found;
}

std::vector<RequestMetrics::SeriesSnapshot> RequestMetrics::snapshot() const {
  std::vector<SeriesSnapshot> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& s : series_) {
    SeriesSnapshot snap;
    snap.model = s->model;
    for (int c = 0; c < kCodeSlots; ++c)
      snap.completed[c] = s->completed[c].load(std::memory_order_relaxed);
    snap.request = s->request.snapshot();
    snap.queue = s->queue.snapshot();
    out.push_back(std::move(snap));
  }
  return out;
}

std::array<uint64_t, kCodeSlots> RequestMetrics::completed() const {
  std::array<uint64_t, kCodeSlots> total{};
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& s : series_) {
    for (int c = 0; c < kCodeSlots; ++c)
      total[c] += s->completed[c].load(std::memory_order_relaxed);
  }
  return total;
}

namespace {

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", value);
  return text;
}

// `pool` is `pool="name"` or empty; `labels` more of them, or empty.
std::string label_set(const std::string& pool, const std::string& labels) {
  if (pool.empty() && labels.empty()) return "";
  if (pool.empty()) return "{" + labels + "}";
  if (labels.empty()) return "{" + pool + "}";
  return "{" + pool + "," + labels + "}";
}

void histogram(std::string& out, const char* name, const std::string& pool,
               const std::string& model, const RequestMetrics::Histogram::Snapshot& h) {
  const auto& b = RequestMetrics::bounds();
  for (int i = 0; i < RequestMetrics::kBuckets; ++i) {
    out += std::string(name) + "_bucket" + label_set(pool, model + ",le=\"" + number(b[i]) + "\"") +
           " " + std::to_string(h.cumulative[i]) + "\n";
  }
  out += std::string(name) + "_bucket" + label_set(pool, model + ",le=\"+Inf\"") + " " +
         std::to_string(h.count) + "\n";
  out += std::string(name) + "_sum" + label_set(pool, model) + " " + number(h.sum_seconds) + "\n";
  out +=
      std::string(name) + "_count" + label_set(pool, model) + " " + std::to_string(h.count) + "\n";
}

}  // namespace

std::string pool_prometheus_text(const std::vector<RequestMetrics::SeriesSnapshot>& requests,
                                 const PoolGauges& gauges, const std::string& pool_name) {
  const std::string pool =
      pool_name.empty() ? std::string() : "pool=\"" + prometheus_label(pool_name) + "\"";
  std::string out;
  out += "# HELP manypy_requests_total Calls completed or refused, by model and status code.\n";
  out += "# TYPE manypy_requests_total counter\n";
  for (const auto& s : requests) {
    const std::string model = "model=\"" + prometheus_label(s.model) + "\"";
    for (int c = 0; c < kCodeSlots; ++c) {
      if (s.completed[c] == 0) continue;
      out += "manypy_requests_total" + label_set(pool, model + ",code=\"" + code_label(c) + "\"") +
             " " + std::to_string(s.completed[c]) + "\n";
    }
  }
  out += "# HELP manypy_request_duration_seconds Time from admission to completion.\n";
  out += "# TYPE manypy_request_duration_seconds histogram\n";
  for (const auto& s : requests) {
    histogram(out, "manypy_request_duration_seconds", pool,
              "model=\"" + prometheus_label(s.model) + "\"", s.request);
  }
  out +=
      "# HELP manypy_queue_duration_seconds Time from admission until the call began "
      "running in its interpreter.\n";
  out += "# TYPE manypy_queue_duration_seconds histogram\n";
  for (const auto& s : requests) {
    histogram(out, "manypy_queue_duration_seconds", pool,
              "model=\"" + prometheus_label(s.model) + "\"", s.queue);
  }
  out += "# HELP manypy_inflight_requests Calls admitted and not complete.\n";
  out += "# TYPE manypy_inflight_requests gauge\n";
  out += "manypy_inflight_requests" + label_set(pool, "") + " " + std::to_string(gauges.in_flight) +
         "\n";
  out += "# HELP manypy_queued_requests Calls waiting for an interpreter.\n";
  out += "# TYPE manypy_queued_requests gauge\n";
  out +=
      "manypy_queued_requests" + label_set(pool, "") + " " + std::to_string(gauges.queued) + "\n";
  out += "# HELP manypy_interpreters The pool's interpreters by state.\n";
  out += "# TYPE manypy_interpreters gauge\n";
  const std::pair<const char*, size_t> states[] = {{"starting", gauges.starting},
                                                   {"ready", gauges.ready},
                                                   {"busy", gauges.busy},
                                                   {"broken", gauges.broken},
                                                   {"lost", gauges.lost}};
  for (const auto& [state, count] : states) {
    out += "manypy_interpreters" + label_set(pool, std::string("state=\"") + state + "\"") + " " +
           std::to_string(count) + "\n";
  }
  out += "# HELP manypy_draining 1 once the pool drains (manypy_pool_drain).\n";
  out += "# TYPE manypy_draining gauge\n";
  out += "manypy_draining" + label_set(pool, "") + " " + (gauges.draining ? "1" : "0") + "\n";
  out +=
      "# HELP manypy_interpreters_replaced_total Retired interpreters the pool replaced "
      "with new ones.\n";
  out += "# TYPE manypy_interpreters_replaced_total counter\n";
  out += "manypy_interpreters_replaced_total" + label_set(pool, "") + " " +
         std::to_string(gauges.replaced) + "\n";
  out +=
      "# HELP manypy_replacement_no_room 1 while a retired interpreter could not be "
      "replaced for want of room in the process.\n";
  out += "# TYPE manypy_replacement_no_room gauge\n";
  out += "manypy_replacement_no_room" + label_set(pool, "") + " " + (gauges.no_room ? "1" : "0") +
         "\n";
  return out;
}

}  // namespace manypy
