// One call for an interpreter (or for a host worker): the work, the stop that
// bounds it, the load it holds, and where its outcome goes. Synchronous and
// asynchronous calls are both jobs; a synchronous call is a job whose
// completion wakes the caller waiting for it (SyncJob).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "call_stop.h"
#include "dispatch/chooser.h"
#include "error.h"
#include "request_metrics.h"
#include "value.h"

namespace manypy {
class Interpreter;
class Watchdog;
}  // namespace manypy

namespace manypy::dispatch {

// Where an asynchronous call's outcome goes: exactly one of `value` and
// `error` is not null. Called exactly once; must not throw.
using Done = std::function<void(Value* value, Error* error)>;

// A job that is queued is owned through shared_ptrs (its queue, the thread
// that runs it, the completion thread); one run on the calling thread
// (Lane::run_here) may live on that thread's stack.
class Job : public std::enable_shared_from_this<Job> {
 public:
  // Starts the stop's clock when `limits` bound the call; throws the
  // stop's Error if its deadline has passed or its token is cancelled.
  // Every job has a stop, bounded or not, so that a drain can cancel it
  // (manypy_pool_drain) and its start in the interpreter is timed.
  Job(const CallLimits& limits, int64_t grace_ns);
  virtual ~Job() = default;
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  CallStop* stop() { return &stop_; }

  // Records the call in `series` when it completes (request_metrics.h):
  // its code, its time from now to completion, and its wait until it began
  // running in its interpreter. Before admission, so that a refusal is
  // recorded too (refused()).
  void measure(RequestMetrics::Series* series);
  // Records a refusal at admission (the job never runs).
  void refused(const Error& error) noexcept;

  // What dispatch does with it (lane.h, host_workers.h, dispatcher.h).
  // The load it holds until it completes, and the index it reports errors
  // under ("interpreter 1: ..."). `movable`: admitted for any interpreter,
  // so it may move to another member if the one it waits for stops
  // serving before its turn (move_elsewhere).
  void hold(Ticket ticket, bool movable = false) {
    ticket_ = std::move(ticket);
    movable_ = movable;
  }
  // The member whose load it holds now (after a move, the new one).
  size_t index() const { return ticket_.index(); }
  Chooser* chooser() const { return ticket_.chooser(); }

  // What move_elsewhere did with a queued job whose interpreter cannot
  // serve. kStay: nothing (it is pinned, or holds no load): run it where it
  // is, to fail with that interpreter's precise status. kMoved: it holds
  // load on another member now (index()), unwatched: post it to that
  // member's lane. kDone: it completed here, or a stop completes it (no
  // member can serve, its stop came first): drop it.
  enum class Move { kStay, kMoved, kDone };
  // For a job just taken from the queue of an interpreter that cannot
  // serve (retired, or failed to start, while the job waited): a job
  // admitted for any interpreter moves to another member, as the chooser
  // would have sent it there had it been admitted now (Chooser::readmit:
  // not refused for the queue limit or a drain, since it was admitted
  // already). Never throws.
  Move move_elsewhere() noexcept;
  // Has `watchdog` watch its stop until it completes (a call of a pool's,
  // or a bounded one; see job.cpp); with
  // `queued`, a stop while it waits completes it at once, unrun, with the
  // stop's Error saying `waiting_for` ("the interpreter"), and a call lost
  // while it runs (Watchdog::lost) completes at once with the stop's
  // Error, while its interpreter's thread still runs it: its caller (not
  // on that thread) gets its status in time.
  void watch(Watchdog& watchdog, bool queued, const char* waiting_for);
  // For a queued job: true if this thread is to run it, false if a stop
  // took it first.
  bool claim_to_run();
  // Runs it on this thread in `interp` (nullptr on a host worker), then
  // completes it.
  void execute(Interpreter* interp) noexcept;

 protected:
  // The work: throws Error.
  virtual Value run(Interpreter* interp) = 0;
  // The outcome, exactly once. Must not throw. After it returns, dispatch
  // touches the job only to drop its reference.
  virtual void succeeded(Value value) noexcept = 0;
  virtual void failed(Error error) noexcept = 0;

 private:
  // kMoving: between two members' queues (move_elsewhere), watched by
  // neither. kReleased: lost while it ran, and completed then
  // (lost_while_running); when its run ends, it only lets go of the
  // watchdog and the load.
  enum State : int { kWaiting, kRunning, kStopped, kMoving, kReleased };
  // The watchdog's wake-up for a queued job whose stop was set: runs under
  // the watchdog's lock, so the completion is left to the completion thread.
  static void stopped_while_queued(void* job);
  // The watchdog's word that the job, running, is lost: also under its
  // lock, and the job's own thread is still in it.
  static void lost_while_running(void* job);
  // Lets go of the watchdog and the load, then reports.
  void complete(std::optional<Value> value, std::optional<Error> error) noexcept;

  // Records the outcome in series_ (measure()), and a long wait with the
  // chooser.
  void record(const Error* error) noexcept;

  CallStop stop_;
  const bool bounded_;
  Ticket ticket_;
  bool movable_ = false;
  // Its error is the chooser's, about the whole pool: no "interpreter N: ".
  bool pool_error_ = false;
  RequestMetrics::Series* series_ = nullptr;
  int64_t admitted_ns_ = 0;
  Watchdog* watchdog_ = nullptr;
  const char* waiting_for_ = "";
  std::atomic<int> state_{kWaiting};
};

// The work of a synchronous call: runs in `interp` (nullptr on a host
// worker) within `stop` (nullptr: unbounded).
using Work = std::function<Value(Interpreter* interp, CallStop* stop)>;

// A synchronous call: runs the caller's `work` and hands the outcome to the
// caller waiting in wait(). `work` outlives the wait; a job left in a queue
// after its caller stopped waiting never calls it.
class SyncJob final : public Job {
 public:
  SyncJob(const CallLimits& limits, int64_t grace_ns, const Work& work)
      : Job(limits, grace_ns), work_(work) {}

  // Waits for completion (returns at once if the job ran on this thread),
  // then returns the result or throws the Error.
  Value wait();

 protected:
  Value run(Interpreter* interp) override { return work_(interp, stop()); }
  void succeeded(Value value) noexcept override;
  void failed(Error error) noexcept override;

 private:
  void finish() noexcept;

  const Work& work_;
  std::optional<Value> value_;
  std::optional<Error> error_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> done_{false};  // set under mu_, also polled without it
  bool sleeping_ = false;          // under mu_: the caller waits on cv_
};

}  // namespace manypy::dispatch
