#include "dispatch/completer.h"

#include <condition_variable>
#include <deque>
#include <mutex>

#include "dispatch/threads.h"

namespace manypy::dispatch {

namespace {

class Completer {
 public:
  // Leaves `task` as it was if it throws.
  void post(std::function<void()>& task) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!started_) {
      start_detached([this] { run(); });  // lives as long as the process
      started_ = true;
    }
    tasks_.push_back(std::move(task));
    lock.unlock();
    cv_.notify_one();
  }

 private:
  void run() {
    set_this_thread_kind(ThreadKind::kCompleter);
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return !tasks_.empty(); });
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool started_ = false;
};

// Never destroyed: tasks may be posted while the process exits.
Completer& completer() {
  static Completer* c = new Completer();
  return *c;
}

}  // namespace

void complete_later(std::function<void()> task) noexcept {
  try {
    completer().post(task);
  } catch (...) {
    task();
  }
}

}  // namespace manypy::dispatch
