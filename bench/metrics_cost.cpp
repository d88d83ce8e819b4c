// manypy_bench_metrics_cost: what recording one request in the pool's
// request metrics costs (docs/metrics.md): the work Dispatcher::admit and
// Job::record add to every call, in a loop, on 1 thread and on 2 threads
// recording into the same model's series (the cache lines they share
// bounce between cores), in CPU time per call, so that other work on the
// machine does not count. Compare with a whole call (bench/peers' identity
// p50, docs/performance.md).
//
// Usage: manypy_bench_metrics_cost [calls per thread, default 5,000,000]
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "request_metrics.h"

namespace {

// The core's monotonic_ns (call_stop.cpp), without linking what it lives with.
int64_t monotonic_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

// One request as the call path records it: the series found at admission,
// the admission's clock, the end of the wait (read anyway by the
// interpreter side's deadline check, so not counted here), and the
// completion's clock and record.
void record_calls(manypy::RequestMetrics& metrics, const std::string& model, long calls) {
  for (long i = 0; i < calls; ++i) {
    manypy::RequestMetrics::Series& series = metrics.series(model);
    const int64_t admitted = monotonic_ns();
    const int64_t began = admitted + 1000;
    series.record(0, monotonic_ns() - admitted, began - admitted);
  }
}

// The CPU time of the calling thread: what the recording costs the caller,
// whatever else the machine runs meanwhile.
double thread_cpu_ns() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

// CPU nanoseconds per call, averaged over `threads` threads recording into
// one model's series at once.
double ns_per_call(int threads, long calls) {
  manypy::RequestMetrics metrics;
  const std::string model = "resnet18";
  record_calls(metrics, model, calls / 10);  // warm-up
  std::vector<double> spent(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      const double t0 = thread_cpu_ns();
      record_calls(metrics, model, calls);
      spent[t] = thread_cpu_ns() - t0;
    });
  }
  for (std::thread& t : pool) t.join();
  const auto snapshot = metrics.snapshot();
  const uint64_t want = static_cast<uint64_t>(calls) * threads + calls / 10;
  if (snapshot.size() != 1 || snapshot[0].completed[0] != want ||
      snapshot[0].request.count != want) {
    std::fprintf(stderr, "manypy_bench_metrics_cost: recorded %llu calls, expected %llu\n",
                 static_cast<unsigned long long>(snapshot[0].completed[0]),
                 static_cast<unsigned long long>(want));
    std::exit(1);
  }
  double total = 0;
  for (double ns : spent) total += ns;
  return total / static_cast<double>(calls) / threads;
}

}  // namespace

int main(int argc, char** argv) {
  const long calls = argc > 1 ? std::atol(argv[1]) : 5000000;
  if (calls < 10) {
    std::fprintf(stderr, "usage: manypy_bench_metrics_cost [calls per thread >= 10]\n");
    return 2;
  }
  std::printf("request metrics: what one call's recording costs (%ld calls per thread)\n", calls);
  std::printf("%-46s %10.1f ns of CPU\n", "1 thread", ns_per_call(1, calls));
  std::printf("%-46s %10.1f ns of CPU\n", "2 threads at once, one model", ns_per_call(2, calls));
  return 0;
}
