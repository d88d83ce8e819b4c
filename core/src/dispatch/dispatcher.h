// A pool's one path for calls: admission (chooser.h), then the thread that
// runs the call: the caller's own (DIRECT mode, synchronous) or the chosen
// interpreter's home thread (HANDOFF mode, and every asynchronous call). A
// synchronous call is an asynchronous one whose caller waits for it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "call_options.h"
#include "dispatch/chooser.h"
#include "dispatch/job.h"
#include "dispatch/lane.h"
#include "request_metrics.h"

namespace manypy {

enum class ThreadMode { kDirect = 0, kHandoff = 1 };

namespace dispatch {

class Dispatcher {
 public:
  // `capacity`: the most interpreters the pool can have (chooser.h).
  Dispatcher(size_t capacity, ThreadMode mode, size_t queue_limit, int64_t stop_grace_ns);
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  ThreadMode mode() const { return mode_; }
  int64_t stop_grace_ns() const { return stop_grace_ns_; }
  Chooser& chooser() { return chooser_; }
  const Chooser& chooser() const { return chooser_; }

  RequestMetrics& metrics() { return metrics_; }
  const RequestMetrics& metrics() const { return metrics_; }

  // Runs `work` on interpreter `interpreter` (an index, or
  // Chooser::kAnyInterpreter) within `limits`, and waits for it. Returns
  // its result; throws its Error, or the admission's. A call with a
  // `model` (nullptr: not a request, e.g. a load) is a request of that
  // model in the metrics, refused or not.
  Value call(int interpreter, const CallLimits& limits, const std::string* model, const Work& work);

  // Admits `job` for interpreter `interpreter` and queues it for that
  // interpreter's home thread; it completes there (or, stopped while
  // queued, on the completion thread). Throws the admission's Error, and
  // then the job never completes. `model` as for call().
  void submit(int interpreter, const std::string* model, std::shared_ptr<Job> job);

 private:
  // Admits `job`, recording a refusal; returns the lane to run it on.
  Lane& admit(int interpreter, const std::string* model, Job& job);

  const ThreadMode mode_;
  const int64_t stop_grace_ns_;
  Chooser chooser_;
  RequestMetrics metrics_;
};

}  // namespace dispatch
}  // namespace manypy
