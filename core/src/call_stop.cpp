#include "call_stop.h"

#include <time.h>

namespace manypy {

int64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void CancelToken::cancel() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  if (cancelled_.exchange(true, std::memory_order_acq_rel)) return;
  for (CancelListener* l = head_; l != nullptr; l = l->next_) l->on_cancel();
}

bool CancelToken::listen(CancelListener* listener) {
  std::lock_guard<std::mutex> lock(mu_);
  if (cancelled_.load(std::memory_order_acquire)) return false;
  listener->prev_ = nullptr;
  listener->next_ = head_;
  if (head_ != nullptr) head_->prev_ = listener;
  head_ = listener;
  return true;
}

void CancelToken::unlisten(CancelListener* listener) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  if (listener->prev_ != nullptr) {
    listener->prev_->next_ = listener->next_;
  } else if (head_ == listener) {
    head_ = listener->next_;
  } else {
    return;  // never added
  }
  if (listener->next_ != nullptr) listener->next_->prev_ = listener->prev_;
  listener->prev_ = listener->next_ = nullptr;
}

namespace {

int64_t deadline_of(const CallLimits& limits) {
  int64_t deadline = CallStop::kNoDeadline;
  if (limits.deadline_ns > 0) deadline = limits.deadline_ns;
  if (limits.timeout_ns > 0) {
    int64_t now = monotonic_ns();
    deadline = limits.timeout_ns > CallStop::kNoDeadline - now ? CallStop::kNoDeadline
                                                               : now + limits.timeout_ns;
  }
  return deadline;
}

}  // namespace

CallStop::CallStop(const CallLimits& limits, int64_t grace_ns)
    : deadline_ns_(deadline_of(limits)), token_(limits.token) {
  control_.deadline_ns = deadline_ns_;
  control_.grace_ns = grace_ns;
  if (token_ != nullptr && !token_->listen(this)) set_stop(MPI_ERR_CANCELLED);
  if (check(deadline_ns_ == kNoDeadline ? 0 : monotonic_ns()) != 0) {
    Error e = error("before the call started");
    if (token_ != nullptr) token_->unlisten(this);
    throw e;
  }
}

CallStop::~CallStop() {
  if (token_ != nullptr) token_->unlisten(this);
}

bool CallStop::set_stop(int code) {
  int none = 0;
  const bool set = __atomic_compare_exchange_n(&control_.stop, &none, code, false, __ATOMIC_SEQ_CST,
                                               __ATOMIC_SEQ_CST);
  if (set && code == MPI_ERR_CANCELLED)
    cancelled_ns_.store(monotonic_ns(), std::memory_order_release);
  return set;
}

int64_t CallStop::stopped_ns() const {
  // A deadline's stop may be set by the interpreter side too (stop.c): its
  // time is the deadline's.
  switch (stop()) {
    case MPI_ERR_DEADLINE_EXCEEDED:
      return deadline_ns_;
    case MPI_ERR_CANCELLED: {
      const int64_t t = cancelled_ns_.load(std::memory_order_acquire);
      return t != 0 ? t : monotonic_ns();  // a moment before its time is stored
    }
    default:
      return 0;
  }
}

int CallStop::check(int64_t now_ns) {
  if (now_ns >= deadline_ns_) set_stop(MPI_ERR_DEADLINE_EXCEEDED);
  return stop();
}

void CallStop::on_cancel() noexcept {
  set_stop(MPI_ERR_CANCELLED);
  if (StopObserver* w = watch.watchdog.load(std::memory_order_acquire)) w->poke();
}

bool CallStop::cancel_because(const char* why) {
  if (!set_stop(MPI_ERR_CANCELLED)) return false;
  cancel_reason_.store(why, std::memory_order_release);
  return true;
}

Error CallStop::error(const std::string& when) const {
  if (stop() == MPI_ERR_CANCELLED) {
    if (const char* why = cancel_reason_.load(std::memory_order_acquire)) {
      return Error(Code::kCancelled, "cancelled " + when + ": " + why);
    }
    return Error(Code::kCancelled, "cancelled " + when + ": the call's cancel token was cancelled");
  }
  return Error(Code::kDeadlineExceeded, "deadline exceeded " + when);
}

}  // namespace manypy
