#include "dispatch/dispatcher.h"

#include "dispatch/threads.h"
#include "stack_headroom.h"

namespace manypy::dispatch {

Dispatcher::Dispatcher(size_t capacity, ThreadMode mode, size_t queue_limit, int64_t stop_grace_ns)
    : mode_(mode), stop_grace_ns_(stop_grace_ns), chooser_(capacity, queue_limit) {}

Lane& Dispatcher::admit(int interpreter, const std::string* model, Job& job) {
  if (model != nullptr) job.measure(&metrics_.series(*model));
  Ticket ticket;
  try {
    ticket = chooser_.admit(interpreter);
  } catch (const Error& e) {
    job.refused(e);
    throw;
  }
  Lane& lane = chooser_.lane(ticket.index());
  // A call that may go anywhere may move to another member if this one
  // stops serving while it waits (Job::move_elsewhere).
  job.hold(std::move(ticket), interpreter == Chooser::kAnyInterpreter);
  return lane;
}

Value Dispatcher::call(int interpreter, const CallLimits& limits, const std::string* model,
                       const Work& work) {
  // On one of manypy's threads (a completion callback's), run right here:
  // manypy's threads never wait for each other (threads.h).
  const bool manypy_thread = on_manypy_thread();
  // While a member starts, a call may be sent to it (pinned, or when none
  // is up yet) and must queue behind its start: DIRECT calls go through
  // the home threads until every member is up.
  if ((mode_ == ThreadMode::kDirect && chooser_.starting() == 0) || manypy_thread) {
    if (!manypy_thread) require_stack_headroom();
    // Never queued, so never shared: it lives on this stack. The stop
    // starts before the wait for the interpreter, which it bounds too.
    SyncJob job(limits, stop_grace_ns_, work);
    Lane& lane = admit(interpreter, model, job);
    // A member that began to start since the check above (a retired one
    // replaced in place) serves only behind its bring-up, on its home
    // thread: this admission is dropped unrun and unrecorded, and the
    // call goes the queued way below.
    if (manypy_thread || chooser_.state(job.index()) != SlotState::kStarting) {
      lane.run_here(job);
      return job.wait();
    }
  }
  auto job = std::make_shared<SyncJob>(limits, stop_grace_ns_, work);
  Lane& lane = admit(interpreter, model, *job);
  lane.post(job);
  return job->wait();
}

void Dispatcher::submit(int interpreter, const std::string* model, std::shared_ptr<Job> job) {
  Lane& lane = admit(interpreter, model, *job);
  lane.post(std::move(job));
}

}  // namespace manypy::dispatch
