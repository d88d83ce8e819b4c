// A pool's request metrics: calls counted by model and status code, and the
// durations of their requests and of their waits, as Prometheus histograms
// (docs/metrics.md). Recording costs a few relaxed atomic additions; the
// series of a model is found through a per-thread cache.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "code_names.h"

namespace manypy {

class RequestMetrics {
 public:
  static constexpr int kBuckets = 16;
  // Upper bounds in seconds, 100 us to 10 s: calls of microseconds to
  // seconds, and waits of any length a deadline would allow.
  static const std::array<double, kBuckets>& bounds();

  class Histogram {
   public:
    struct Snapshot {
      std::array<uint64_t, kBuckets> cumulative{};  // <= bounds()[i]
      uint64_t count = 0;
      double sum_seconds = 0;
    };
    void observe(int64_t ns) noexcept;
    Snapshot snapshot() const;

   private:
    std::array<std::atomic<uint64_t>, kBuckets + 1> counts_{};  // the last: +Inf
    std::atomic<uint64_t> sum_ns_{0};
  };

  // One model's series. Lives as long as the RequestMetrics.
  struct Series {
    explicit Series(std::string model_name) : model(std::move(model_name)) {}
    const std::string model;
    std::array<std::atomic<uint64_t>, kCodeSlots> completed{};
    Histogram request, queue;

    // A call that completed with `code`; `request_ns` and `queue_ns` are its
    // durations, negative for none (a refusal has neither; a call stopped
    // while it waited has no queue time that ended in a start).
    void record(int code, int64_t request_ns, int64_t queue_ns) noexcept;
  };

  struct SeriesSnapshot {
    std::string model;
    std::array<uint64_t, kCodeSlots> completed{};
    Histogram::Snapshot request, queue;
  };

  RequestMetrics();
  RequestMetrics(const RequestMetrics&) = delete;
  RequestMetrics& operator=(const RequestMetrics&) = delete;

  // The series of `model`, made at its first call. Thread safe.
  Series& series(const std::string& model);

  std::vector<SeriesSnapshot> snapshot() const;
  // Calls completed by code, over every model.
  std::array<uint64_t, kCodeSlots> completed() const;

 private:
  const uint64_t id_;  // tells the per-thread cache's owners apart
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Series>> series_;
  std::unordered_map<std::string, Series*> by_model_;
};

// What a pool's exposition says beside its request metrics (the gauges of
// its stats, pool.h's PoolStats).
struct PoolGauges {
  size_t in_flight = 0, queued = 0;
  // The members by state; they add up to the pool's size. `lost`: a
  // stopped call still runs in it, past twice its grace period
  // (dispatch::Lane::lost); `broken`: failed to start, or retired.
  size_t starting = 0, ready = 0, busy = 0, broken = 0, lost = 0;
  bool draining = false;
  // Interpreters replaced since the pool was created, and whether a
  // retired one waits for a replacement the process has no room for
  // (PoolMembers::on_retired).
  uint64_t replaced = 0;
  bool no_room = false;
};

// The Prometheus text exposition of a pool's metrics; every series gets
// pool="<pool_name>" unless it is empty.
std::string pool_prometheus_text(const std::vector<RequestMetrics::SeriesSnapshot>& requests,
                                 const PoolGauges& gauges, const std::string& pool_name);

}  // namespace manypy
