#include "dispatch/lane.h"

#include "dispatch/threads.h"
#include "process_exit.h"

namespace manypy::dispatch {

Lane::Lane(unsigned slot, const HostServices& host) : interp_(slot, host) {}

std::string Lane::why_not_serving() const {
  std::string why = interp_.why_not_serving();
  std::string lost;
  if (watchdog_.lost(&lost)) why = why.empty() ? lost : why + "; " + lost;
  return why;
}

void Lane::begin_start() {
  start_detached([this] { home_main(std::nullopt); });  // lives as long as the process
}

void Lane::begin_failed_start(const Error& why) {
  start_detached([this, why] { home_main(why); });
}

void Lane::home_main(std::optional<Error> refusal) {
  set_this_thread_kind(ThreadKind::kHome);
  if (refusal) {
    interp_.fail_start(*refusal);
  } else {
    // The start runs `import torch` in a new namespace: exit() must not run
    // the namespaces' destructors under it (process_exit.h).
    ProcessExit::Section section;
    if (section.began()) {
      interp_.start();
    } else {
      interp_.fail_start(exiting_error());
    }
  }
  // Serve queued calls for the rest of the process. The queue polls briefly
  // before sleeping: a caller that finds the home thread awake needs no
  // wake-up (docs/threads.md, "The two modes").
  for (;;) {
    std::shared_ptr<Job> job = queue_.pop();
    // Retired (or failed to start) while the job waited: a call that may
    // go anywhere goes to a member that serves instead of failing here.
    if (!interp_.serving() && moved_elsewhere(job)) continue;
    if (job->claim_to_run()) job->execute(&interp_);
  }
}

bool Lane::moved_elsewhere(std::shared_ptr<Job>& job) {
  switch (job->move_elsewhere()) {
    case Job::Move::kStay:
      return false;
    case Job::Move::kMoved:
      job->chooser()->lane(job->index()).post(std::move(job));
      return true;
    case Job::Move::kDone:
      return true;
  }
  return false;
}

void Lane::run_here(Job& job) {
  job.watch(watchdog_, /*queued=*/false, "the interpreter");
  job.execute(&interp_);
}

void Lane::post(std::shared_ptr<Job> job) {
  job->watch(watchdog_, /*queued=*/true, "the interpreter");
  queue_.push(std::move(job));
}

Value Lane::run_on_home(const Work& work) {
  if (on_manypy_thread()) {
    SyncJob job(CallLimits{}, 0, work);
    run_here(job);
    return job.wait();
  }
  auto job = std::make_shared<SyncJob>(CallLimits{}, 0, work);
  post(job);
  return job->wait();
}

}  // namespace manypy::dispatch
