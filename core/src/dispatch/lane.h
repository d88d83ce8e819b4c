// An interpreter with what runs calls in it: its home thread, the queue in
// front of that thread, and the watchdog that stops its calls. One per
// interpreter, for the life of the process, like the interpreter.
//
// A call reaches the interpreter one of two ways: on the thread that makes
// it (run_here: DIRECT mode), or through the queue on the home thread
// (post: HANDOFF mode, and every asynchronous call).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "dispatch/chooser.h"
#include "dispatch/job.h"
#include "dispatch/work_queue.h"
#include "interpreter.h"
#include "watchdog.h"

namespace manypy::dispatch {

// A MemberHealth (chooser.h) that answers for its interpreter.
class Lane final : public MemberHealth {
 public:
  // The interpreter's arguments (interpreter.h).
  Lane(unsigned slot, const HostServices& host);
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  Interpreter& interpreter() { return interp_; }
  const Interpreter& interpreter() const { return interp_; }
  // Serving: its interpreter is. A lost call (lost()) does not change
  // that: calls that may go anywhere go to less loaded members first, and
  // a pinned call waits behind it, bounded by its own deadline, as behind
  // any call (a lost call may end, as a late torch operator does).
  bool serving() const override { return interp_.serving(); }
  // Why it cannot serve, or why it is lost ("" if neither).
  std::string why_not_serving() const override;
  // Whether a stopped call is lost in it (Watchdog::lost). Lock-free.
  bool lost() const { return watchdog_.any_lost(); }

  // Starts the home thread, which starts the interpreter (so that it is the
  // interpreter's main thread), then serves the queue for the rest of the
  // process. Returns at once; Interpreter::wait_started waits.
  void begin_start();
  // Starts the home thread without starting the interpreter, whose start
  // fails with `why` (Interpreter::fail_start): queued calls then fail.
  void begin_failed_start(const Error& why);

  // Runs `job` on the calling thread now, watched by the watchdog.
  void run_here(Job& job);
  // Queues `job` for the home thread. Its stop covers its time in the
  // queue: stopped there, it completes at once without running.
  void post(std::shared_ptr<Job> job);

  // Cancels every call running or queued here that the watchdog watches
  // (every pool call: job.h), saying `why` (static storage).
  void cancel_calls(const char* why) { watchdog_.cancel_all(why); }

  // Runs `work` on the home thread and waits for it; on one of manypy's own
  // threads, runs it right here instead (threads.h). For the work of leases
  // and clean-ups, which holds no unit of any pool's load. Throws its Error.
  Value run_on_home(const Work& work);

 private:
  // `refusal`: the start's failure, decided before it was tried.
  void home_main(std::optional<Error> refusal);
  // For a job taken from the queue while the interpreter cannot serve:
  // true if it left this lane (moved to another member's, or completed).
  bool moved_elsewhere(std::shared_ptr<Job>& job);

  Interpreter interp_;
  WorkQueue queue_{/*spin=*/true};
  // Mutable: describing a lost call looks under its lock.
  mutable Watchdog watchdog_{[this](CallStop& stop) { interp_.interrupt(stop); },
                             [this](CallStop& stop) { return interp_.escalate(stop); }};
};

}  // namespace manypy::dispatch
