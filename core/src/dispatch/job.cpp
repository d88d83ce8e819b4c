#include "dispatch/job.h"

#include "dispatch/completer.h"
#include "spin.h"
#include "watchdog.h"

namespace manypy::dispatch {

Job::Job(const CallLimits& limits, int64_t grace_ns)
    : stop_(limits, grace_ns), bounded_(limits.bounded()) {}

void Job::measure(RequestMetrics::Series* series) {
  series_ = series;
  admitted_ns_ = monotonic_ns();
}

void Job::refused(const Error& error) noexcept {
  if (series_ != nullptr) series_->record(static_cast<int>(error.code()), -1, -1);
}

void Job::record(const Error* error) noexcept {
  const int64_t began = stop_.began_ns();
  const int64_t waited = began != 0 ? began - admitted_ns_ : -1;
  if (series_ != nullptr) {
    series_->record(error ? static_cast<int>(error->code()) : 0, monotonic_ns() - admitted_ns_,
                    waited);
  }
  if (ticket_.held() && waited > 0) ticket_.chooser()->waited(waited);
}

void Job::watch(Watchdog& watchdog, bool queued, const char* waiting_for) {
  // A pool's call is watched even when unbounded: a drain may cancel it.
  // Work that is no call (a lease, a clean-up) only when bounded: nothing
  // may cancel it half-done.
  if (!bounded_ && !ticket_.held()) return;
  watchdog_ = &watchdog;
  waiting_for_ = waiting_for;
  watchdog.watch(stop_);
  // A job run on its caller's thread (DIRECT) cannot give its caller up:
  // that thread is the one running it.
  if (queued) {
    watchdog.set_waiter(stop_, &Job::stopped_while_queued, this, &Job::lost_while_running);
  }
}

void Job::stopped_while_queued(void* raw) {
  Job* job = static_cast<Job*>(raw);
  // Whoever holds the job now (its queue, or the thread that took it from
  // the queue) holds it at least until the claim below is decided.
  std::shared_ptr<Job> self = job->shared_from_this();
  int expected = kWaiting;
  if (!job->state_.compare_exchange_strong(expected, kStopped, std::memory_order_acq_rel)) {
    return;  // it runs: the watchdog interrupts it instead
  }
  complete_later([self] {
    self->complete(std::nullopt,
                   self->stop_.error(std::string("while waiting for ") + self->waiting_for_ +
                                     " (busy with earlier calls)"));
  });
}

void Job::lost_while_running(void* raw) {
  Job* job = static_cast<Job*>(raw);
  std::shared_ptr<Job> self = job->shared_from_this();
  int expected = kRunning;
  if (!job->state_.compare_exchange_strong(expected, kReleased, std::memory_order_acq_rel)) {
    return;
  }
  // Read now: the job's own thread lets go of the load only after the
  // watchdog let go of the job (complete(), unwatch).
  const bool indexed = job->ticket_.held();
  const size_t index = job->ticket_.index();
  // The caller may now go, while the job's thread still runs its work:
  // the job itself lives on (that thread holds it), and the work read what
  // it needed of the caller's (arguments, source, names) before it entered
  // Python, which copied, converted or compiled it there.
  complete_later([self, indexed, index] {
    Error e = self->stop_.error(
        "and the call did not end: it still runs in its interpreter twice its grace period "
        "(and at least 1 s) after the stop, and its caller is told now; the interpreter is lost, "
        "serving nothing "
        "else, until the call ends (docs/serving.md, \"Lost interpreters\")");
    if (self->series_ != nullptr) {
      const int64_t began = self->stop_.began_ns();
      self->series_->record(static_cast<int>(e.code()), monotonic_ns() - self->admitted_ns_,
                            began != 0 ? began - self->admitted_ns_ : -1);
    }
    self->failed(indexed ? e.prefixed("interpreter " + std::to_string(index) + ": ") : e);
  });
}

bool Job::claim_to_run() {
  int expected = kWaiting;
  return state_.compare_exchange_strong(expected, kRunning, std::memory_order_acq_rel);
}

Job::Move Job::move_elsewhere() noexcept {
  // movable_ is set at admission, with the ticket; the ticket itself is
  // read only once the job is ours (a stop that took it first releases it
  // on the completion thread).
  if (!movable_) return Move::kStay;
  // Taken from the queue like a claim, so that a stop arriving now leaves
  // it to us (stopped_while_queued sees it is not waiting).
  int expected = kWaiting;
  if (!state_.compare_exchange_strong(expected, kMoving, std::memory_order_acq_rel)) {
    return Move::kDone;  // a stop took it first: the completion thread completes it
  }
  // Out of the old interpreter's watchdog (no wake-up of it runs after
  // this); the new member's lane watches it again as it queues it there.
  if (watchdog_ != nullptr) watchdog_->unwatch(stop_);
  watchdog_ = nullptr;
  state_.store(kWaiting, std::memory_order_release);
  // A stop that came while it waited, seen by nobody yet: it ends here, as
  // it would have in the queue.
  if (stop_.check(monotonic_ns()) != 0) {
    complete(std::nullopt, stop_.error(std::string("while waiting for ") + waiting_for_ +
                                       " (busy with earlier calls)"));
    return Move::kDone;
  }
  Ticket next;
  try {
    next = ticket_.chooser()->readmit();
  } catch (const Error& e) {
    // No member can serve: the chooser's error says why, for each one.
    pool_error_ = true;
    complete(std::nullopt, e);
    return Move::kDone;
  } catch (...) {
    complete(std::nullopt, Error(Code::kResourceExhausted, "out of memory"));
    return Move::kDone;
  }
  // The new load is taken before the old is given back: the pool never
  // looks idle while the job is between members.
  ticket_ = std::move(next);
  return Move::kMoved;
}

void Job::execute(Interpreter* interp) noexcept {
  state_.store(kRunning, std::memory_order_relaxed);
  std::optional<Value> value;
  std::optional<Error> error;
  try {
    value = run(interp);
  } catch (const Error& e) {
    error = e;
  } catch (const std::bad_alloc&) {
    error.emplace(Code::kResourceExhausted, "out of memory");
  } catch (const std::exception& e) {
    error.emplace(Code::kInternal, std::string("internal error: ") + e.what());
  } catch (...) {
    error.emplace(Code::kInternal, "internal error: unknown exception");
  }
  complete(std::move(value), std::move(error));
}

void Job::complete(std::optional<Value> value, std::optional<Error> error) noexcept {
  if (watchdog_ != nullptr) watchdog_->unwatch(stop_);
  // After unwatch, no give-up can come: the state is final. A job given up
  // on has had its outcome, and counted in the metrics.
  if (state_.load(std::memory_order_acquire) == kReleased) {
    ticket_.release();
    return;
  }
  // A stop the interpreter side reported does not know who cancelled.
  const char* reason = stop_.cancel_reason();
  if (error && reason != nullptr && error->code() == Code::kCancelled &&
      error->message().find(reason) == std::string::npos) {
    error.emplace(error->code(), error->message() + " (" + reason + ")", error->python_type(),
                  error->traceback());
  }
  if (series_ != nullptr || ticket_.held()) record(error ? &*error : nullptr);
  // Only a drain's deadline cancels with a reason (Lane::cancel_calls).
  if (error && reason != nullptr && error->code() == Code::kCancelled && ticket_.held()) {
    ticket_.chooser()->count_drain_cancelled();
  }
  // A call that ended on a retired interpreter (it retired it, or queued
  // there pinned) tells the pool, which replaces it: before the load goes,
  // so that the pool is alive, and before the outcome is reported, so that
  // a caller told of the retirement finds the replacement under way.
  if (ticket_.held()) ticket_.chooser()->completed_on(ticket_.index());
  const bool indexed = ticket_.held() && !pool_error_;
  const size_t index = ticket_.index();
  // Before the outcome is reported: its receiver may free the pool.
  ticket_.release();
  if (error) {
    if (indexed) {
      failed(error->prefixed("interpreter " + std::to_string(index) + ": "));
    } else {
      failed(std::move(*error));
    }
  } else {
    succeeded(std::move(*value));
  }
}

void SyncJob::succeeded(Value value) noexcept {
  value_.emplace(std::move(value));
  finish();
}

void SyncJob::failed(Error error) noexcept {
  error_.emplace(std::move(error));
  finish();
}

void SyncJob::finish() noexcept {
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_.store(true, std::memory_order_release);
    wake = sleeping_;
  }
  if (wake) cv_.notify_all();
}

Value SyncJob::wait() {
  // A short call is done before a sleep would even begin.
  if (!done_.load(std::memory_order_acquire)) {
    spin_until([this] { return done_.load(std::memory_order_acquire); });
    std::unique_lock<std::mutex> lock(mu_);
    sleeping_ = true;
    cv_.wait(lock, [this] { return done_.load(std::memory_order_acquire); });
  }
  if (error_) throw *error_;
  return std::move(*value_);
}

}  // namespace manypy::dispatch
