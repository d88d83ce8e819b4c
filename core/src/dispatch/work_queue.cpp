#include "dispatch/work_queue.h"

#include "spin.h"

namespace manypy::dispatch {

void WorkQueue::push(std::shared_ptr<Job> job) {
  std::lock_guard<std::mutex> lock(mu_);
  jobs_.push_back(std::move(job));
  size_.fetch_add(1, std::memory_order_release);
  if (sleeping_ > 0) cv_.notify_one();
}

std::shared_ptr<Job> WorkQueue::pop() {
  if (spin_) spin_until([this] { return size_.load(std::memory_order_acquire) > 0; });
  std::unique_lock<std::mutex> lock(mu_);
  ++sleeping_;
  cv_.wait(lock, [this] { return !jobs_.empty(); });
  --sleeping_;
  std::shared_ptr<Job> job = std::move(jobs_.front());
  jobs_.pop_front();
  size_.fetch_sub(1, std::memory_order_relaxed);
  return job;
}

}  // namespace manypy::dispatch
