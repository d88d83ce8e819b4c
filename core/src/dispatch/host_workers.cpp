#include "dispatch/host_workers.h"

#include <algorithm>
#include <mutex>
#include <thread>

#include "dispatch/threads.h"
#include "dispatch/work_queue.h"
#include "watchdog.h"

namespace manypy::dispatch {

namespace {

class HostWorkers {
 public:
  void post(std::shared_ptr<Job> job) {
    std::call_once(started_, [this] {
      const unsigned n = std::max(1u, std::thread::hardware_concurrency());
      for (unsigned k = 0; k < n; ++k) {
        start_detached([this] { serve(); });  // live as long as the process
      }
    });
    job->watch(watchdog_, /*queued=*/true, "a host worker");
    queue_.push(std::move(job));
  }

 private:
  void serve() {
    set_this_thread_kind(ThreadKind::kWorker);
    for (;;) {
      std::shared_ptr<Job> job = queue_.pop();
      if (job->claim_to_run()) job->execute(nullptr);
    }
  }

  std::once_flag started_;
  WorkQueue queue_{/*spin=*/false};
  // Completes calls stopped in the queue; a running TorchScript call stops
  // itself, so there is nothing to interrupt or escalate (and it is never
  // in an interpreter, so never lost).
  Watchdog watchdog_{[](CallStop&) {}, [](CallStop&) { return false; }};
};

}  // namespace

void run_on_host_worker(std::shared_ptr<Job> job) {
  static HostWorkers* workers = new HostWorkers();  // never destroyed, as its threads
  workers->post(std::move(job));
}

}  // namespace manypy::dispatch
