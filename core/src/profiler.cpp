#include "profiler.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "batch_sizes.h"
#include "prometheus_text.h"

namespace manypy {

namespace {

int64_t percentile(std::vector<int64_t> samples, double q) {
  if (samples.empty()) return 0;
  size_t k = static_cast<size_t>(q * double(samples.size() - 1) + 0.5);
  std::nth_element(samples.begin(), samples.begin() + k, samples.end());
  return samples[k];
}

std::string seconds(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", double(ns) * 1e-9);
  return buf;
}

}  // namespace

Profiler::Profiler(OperatorCallbacks& callbacks, double sampling_probability)
    : callbacks_(callbacks) {
  OperatorCallbacks::Options options;
  options.sampling_probability = sampling_probability;
  registration_ = callbacks_.add(
      [this](int phase, const mph_op_event& event) {
        if (phase == 1) record(event);
      },
      options);
}

Profiler::~Profiler() {
  try {
    callbacks_.remove(registration_);
  } catch (...) {
    // The registration is ours and live; nothing to do if it were not.
  }
}

void Profiler::record(const mph_op_event& e) {
  const int64_t duration = e.end_ns - e.start_ns;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = stats_.find(KeyView(e.model_id, e.name));
  if (it == stats_.end()) it = stats_.emplace(Key(e.model_id, e.name), Stats()).first;
  Stats& s = it->second;
  s.count++;
  s.total_ns += duration;
  if (s.samples.size() < kSamplesPerKey) {
    s.samples.push_back(duration);
  } else {
    s.samples[s.next] = duration;
    s.next = (s.next + 1) % kSamplesPerKey;
  }
  if (trace_.size() < kTraceEvents) trace_.emplace_back();
  TraceEvent& t = trace_[trace_next_];
  trace_next_ = (trace_next_ + 1) % kTraceEvents;
  t.name.assign(e.name);
  t.model_id.assign(e.model_id);
  t.request_id.assign(e.request_id);
  t.thread_id = e.thread_id;
  t.interpreter = e.interpreter;
  t.start_ns = e.start_ns;
  t.end_ns = e.end_ns;
}

std::vector<Profiler::Entry> Profiler::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Entry> entries;
  for (const auto& [key, s] : stats_) {
    entries.push_back({key.first, key.second, s.count, s.total_ns, percentile(s.samples, 0.5),
                       percentile(s.samples, 0.99)});
  }
  return entries;
}

std::string Profiler::prometheus_text() const {
  std::string out =
      "# HELP manypy_operator_duration_seconds Sampled durations of torch operators, by "
      "model id and operator.\n"
      "# TYPE manypy_operator_duration_seconds summary\n";
  for (const Entry& e : snapshot()) {
    std::string labels = "model=\"" + prometheus_label(e.model_id) + "\",operator=\"" +
                         prometheus_label(e.op_name) + "\"";
    out += "manypy_operator_duration_seconds{" + labels + ",quantile=\"0.5\"} " +
           seconds(e.p50_ns) + "\n";
    out += "manypy_operator_duration_seconds{" + labels + ",quantile=\"0.99\"} " +
           seconds(e.p99_ns) + "\n";
    out += "manypy_operator_duration_seconds_sum{" + labels + "} " + seconds(e.total_ns) + "\n";
    out +=
        "manypy_operator_duration_seconds_count{" + labels + "} " + std::to_string(e.count) + "\n";
  }
  // The batch sizes dynamic batchers formed, beside the operators.
  out += BatchSizes::get().prometheus_text();
  return out;
}

std::string Profiler::chrome_trace_json() const {
  // Written one event at a time. Building the whole document as one
  // nlohmann::json first took about 300 MB for the 15 MB text of 100,000
  // events, and the host's malloc kept that memory after it was freed
  // (docs/memory.md). The text is the same: nlohmann writes an object's keys
  // in sorted order, so "displayTimeUnit" comes before "traceEvents".
  std::string out = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[";
  {
    std::lock_guard<std::mutex> lock(mu_);
    out.reserve(out.size() + trace_.size() * 256);
    // Oldest first: from the next slot to overwrite, around the ring.
    for (size_t k = 0; k < trace_.size(); ++k) {
      const TraceEvent& t = trace_[(trace_next_ + k) % trace_.size()];
      const nlohmann::json event = {{"name", t.name},
                                    {"cat", "operator"},
                                    {"ph", "X"},
                                    {"ts", double(t.start_ns) / 1000.0},
                                    {"dur", double(t.end_ns - t.start_ns) / 1000.0},
                                    {"pid", int(getpid())},
                                    {"tid", t.thread_id},
                                    {"args",
                                     {{"model_id", t.model_id},
                                      {"request_id", t.request_id},
                                      {"interpreter", t.interpreter}}}};
      if (k > 0) out += ',';
      // Invalid UTF-8 in a name is replaced rather than failing the export.
      out += event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
  }
  out += "]}";
  return out;
}

}  // namespace manypy
