// The queue of jobs in front of the threads that run them (an interpreter's
// home thread, the host workers): first in, first out.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>

#include "dispatch/job.h"

namespace manypy::dispatch {

class WorkQueue {
 public:
  // With `spin`, a thread that finds the queue empty polls it briefly before
  // it sleeps: a caller that finds it awake needs no wake-up (spin.h). For
  // a single consumer that usually has the next job coming.
  explicit WorkQueue(bool spin) : spin_(spin) {}
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void push(std::shared_ptr<Job> job);
  // Waits for the next job.
  std::shared_ptr<Job> pop();

 private:
  const bool spin_;
  std::mutex mu_;
  std::condition_variable cv_;  // only consumers wait on it
  std::deque<std::shared_ptr<Job>> jobs_;
  std::atomic<int> size_{0};  // jobs_.size(), polled without mu_
  int sleeping_ = 0;          // under mu_: consumers waiting on cv_
};

}  // namespace manypy::dispatch
