#include "dispatch/dispatcher.h"

#include "dispatch/threads.h"
#include "stack_headroom.h"

namespace manypy::dispatch {

Dispatcher::Dispatcher(std::vector<Lane*> lanes, ThreadMode mode, size_t queue_limit,
                       int64_t stop_grace_ns)
    : mode_(mode), stop_grace_ns_(stop_grace_ns), chooser_(std::move(lanes), queue_limit) {}

Value Dispatcher::call(int interpreter, const CallLimits& limits, const Work& work) {
  // On one of manypy's threads (a completion callback's), run right here:
  // manypy's threads never wait for each other (threads.h).
  const bool manypy_thread = on_manypy_thread();
  if (mode_ == ThreadMode::kDirect || manypy_thread) {
    if (!manypy_thread) require_stack_headroom();
    // Never queued, so never shared: it lives on this stack. The stop
    // starts before the wait for the interpreter, which it bounds too.
    SyncJob job(limits, stop_grace_ns_, work);
    Ticket ticket = chooser_.admit(interpreter);
    Lane& lane = chooser_.lane(ticket.index());
    job.hold(std::move(ticket));
    lane.run_here(job);
    return job.wait();
  }
  auto job = std::make_shared<SyncJob>(limits, stop_grace_ns_, work);
  Ticket ticket = chooser_.admit(interpreter);
  Lane& lane = chooser_.lane(ticket.index());
  job->hold(std::move(ticket));
  lane.post(job);
  return job->wait();
}

void Dispatcher::submit(int interpreter, std::shared_ptr<Job> job) {
  Ticket ticket = chooser_.admit(interpreter);
  Lane& lane = chooser_.lane(ticket.index());
  job->hold(std::move(ticket));
  lane.post(std::move(job));
}

}  // namespace manypy::dispatch
