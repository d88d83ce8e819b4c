// The built-in sampled profiler, on top of the operator callbacks: per model
// id and operator, count, total time, p50 and p99; Prometheus text
// exposition; Chrome trace-event JSON of the latest sampled events.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "hooks_api.h"
#include "operator_callbacks.h"

namespace manypy {

class Profiler {
 public:
  struct Entry {
    std::string model_id, op_name;
    uint64_t count = 0;
    int64_t total_ns = 0, p50_ns = 0, p99_ns = 0;
  };

  // Registers exit callbacks in `callbacks` (which outlives it), sampled
  // with `sampling_probability`.
  Profiler(OperatorCallbacks& callbacks, double sampling_probability);
  // Unregisters; no event arrives afterwards.
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  std::vector<Entry> snapshot() const;
  std::string prometheus_text() const;
  std::string chrome_trace_json() const;

  // Kept per (model, operator) for percentiles, and for the trace.
  static constexpr size_t kSamplesPerKey = 4096;
  static constexpr size_t kTraceEvents = 100000;

 private:
  struct Stats {
    uint64_t count = 0;
    int64_t total_ns = 0;
    std::vector<int64_t> samples;  // a ring of the latest durations
    size_t next = 0;
  };
  struct TraceEvent {
    std::string name, model_id, request_id;
    uint64_t thread_id;
    int32_t interpreter;
    int64_t start_ns, end_ns;
  };
  // (model id, operator). Looked up by string_views, so recording an event
  // allocates nothing once its pair has been seen.
  using Key = std::pair<std::string, std::string>;
  using KeyView = std::pair<std::string_view, std::string_view>;
  struct KeyLess {
    using is_transparent = void;
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return std::tie(a.first, a.second) < std::tie(b.first, b.second);
    }
  };
  void record(const mph_op_event& event);

  OperatorCallbacks& callbacks_;
  uint64_t registration_ = 0;
  mutable std::mutex mu_;
  std::map<Key, Stats, KeyLess> stats_;
  // A ring of the latest events: slots (and their strings' buffers) are
  // reused, so a full ring allocates nothing more.
  std::vector<TraceEvent> trace_;
  size_t trace_next_ = 0;
};

}  // namespace manypy
