#include "watchdog.h"

#include <algorithm>
#include <chrono>

namespace manypy {

Watchdog::Watchdog(std::function<void(CallStop&)> interrupt,
                   std::function<bool(CallStop&)> escalate)
    : interrupt_(std::move(interrupt)), escalate_(std::move(escalate)) {}

void Watchdog::watch(CallStop& stop) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!started_) {
    // Both live as long as the process.
    std::thread([this] { run(); }).detach();
    std::thread([this] { interrupter(); }).detach();
    started_ = true;
  }
  stop.watch.prev = nullptr;
  stop.watch.next = head_;
  if (head_ != nullptr) head_->watch.prev = &stop;
  head_ = &stop;
  stop.watch.watchdog.store(this, std::memory_order_release);
  // Wake the thread only when it would otherwise sleep past this deadline:
  // calls with the same timeout, one after another, mostly do not.
  if (stop.deadline_ns() < wake_at_ || stop.stop() != 0) {
    wake_at_ = stop.deadline_ns();
    lock.unlock();
    cv_.notify_one();
  }
}

void Watchdog::unwatch(CallStop& stop) noexcept {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [&] { return !stop.watch.interrupting; });
  if (stop.watch.prev != nullptr) {
    stop.watch.prev->watch.next = stop.watch.next;
  } else {
    head_ = stop.watch.next;
  }
  if (stop.watch.next != nullptr) stop.watch.next->watch.prev = stop.watch.prev;
  stop.watch.prev = stop.watch.next = nullptr;
  stop.watch.wake_waiter = nullptr;
  stop.watch.give_up = nullptr;
  if (stop.watch.lost) {
    stop.watch.lost = false;
    lost_calls_.fetch_sub(1, std::memory_order_acq_rel);
  }
  stop.watch.watchdog.store(nullptr, std::memory_order_release);
}

void Watchdog::set_waiter(CallStop& stop, void (*wake)(void*), void* waiter,
                          void (*give_up)(void*)) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  stop.watch.wake_waiter = wake;
  stop.watch.waiter = waiter;
  stop.watch.give_up = give_up;
}

void Watchdog::poke() noexcept {
  {
    std::lock_guard<std::mutex> lock(mu_);
    poked_ = true;
  }
  cv_.notify_one();
}

void Watchdog::cancel_all(const char* why) noexcept {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (CallStop* s = head_; s != nullptr; s = s->watch.next) s->cancel_because(why);
    poked_ = true;
  }
  cv_.notify_one();
}

int64_t Watchdog::lost_at(const CallStop& stop) {
  const int64_t stopped = stop.stopped_ns();
  const int64_t wait = stop.grace_ns() > CallStop::kNoDeadline / 4
                           ? CallStop::kNoDeadline / 2
                           : std::max(2 * stop.grace_ns(), kLostAfterAtLeastNs);
  return stopped > CallStop::kNoDeadline - wait ? CallStop::kNoDeadline : stopped + wait;
}

bool Watchdog::check_lost(CallStop& stop, int64_t now) {
  if (stop.watch.lost) return true;
  if (stop.stop() == 0 || !stop.in_interpreter.load(std::memory_order_seq_cst) ||
      now < lost_at(stop)) {
    return false;
  }
  stop.watch.lost = true;
  lost_calls_.fetch_add(1, std::memory_order_acq_rel);
  if (stop.watch.give_up != nullptr) {
    stop.watch.give_up(stop.watch.waiter);
    stop.watch.give_up = nullptr;
  }
  return true;
}

bool Watchdog::lost(std::string* why) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = monotonic_ns();
  for (CallStop* s = head_; s != nullptr; s = s->watch.next) {
    if (!check_lost(*s, now)) continue;
    if (why != nullptr) {
      *why = std::string("it is lost: a call ") +
             (s->stop() == MPI_ERR_CANCELLED ? "cancelled" : "stopped by its deadline") + " " +
             std::to_string((now - s->stopped_ns()) / 1000000) +
             " ms ago still runs in it, past twice its " + std::to_string(s->grace_ns() / 1000000) +
             " ms grace period, and at least 1 s (C code that holds the GIL, or model code that "
             "swallows the stop "
             "where Python cannot raise it); it serves no other call while that runs, and "
             "serves again when it ends unless the stop escalated, which retires it "
             "(docs/serving.md, \"Lost interpreters\")";
    }
    return true;
  }
  return false;
}

void Watchdog::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    poked_ = false;
    const int64_t now = monotonic_ns();
    int64_t next = CallStop::kNoDeadline;
    CallStop* to_interrupt = nullptr;
    CallStop* to_escalate = nullptr;
    for (CallStop* s = head_; s != nullptr; s = s->watch.next) {
      if (s->check(now) == 0) {
        next = std::min(next, s->deadline_ns());
        continue;
      }
      if (s->watch.wake_waiter != nullptr) {
        s->watch.wake_waiter(s->watch.waiter);
        s->watch.wake_waiter = nullptr;
      }
      const bool inside = s->in_interpreter.load(std::memory_order_seq_cst);
      if (!check_lost(*s, now) && inside) next = std::min(next, lost_at(*s));
      if (s->watch.interrupting) continue;  // the interrupter has it
      if (!s->watch.interrupted && inside) {
        if (to_interrupt == nullptr) to_interrupt = s;
      } else if (s->watch.escalate_at_ns != 0) {
        if (now < s->watch.escalate_at_ns) {
          next = std::min(next, s->watch.escalate_at_ns);
        } else if (to_escalate == nullptr) {
          to_escalate = s;
        }
      }
    }
    // One call at a time to the interrupter (every call here is in the
    // same interpreter, behind the same GIL); it pokes this thread when
    // done, which then looks again.
    CallStop* due = to_interrupt != nullptr ? to_interrupt : to_escalate;
    if (due != nullptr && interrupting_ == nullptr) {
      // The call cannot unwatch (and go away) while the interrupter has it.
      due->watch.interrupting = true;
      interrupting_ = due;
      escalating_ = to_interrupt == nullptr;
      interrupter_cv_.notify_one();
    }
    wake_at_ = next;
    if (poked_) continue;
    if (next == CallStop::kNoDeadline) {
      cv_.wait(lock);
    } else {
      cv_.wait_for(lock, std::chrono::nanoseconds(next - now));
    }
  }
}

void Watchdog::interrupter() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    interrupter_cv_.wait(lock, [this] { return interrupting_ != nullptr; });
    CallStop* s = interrupting_;
    const bool escalating = escalating_;
    // Both take the interpreter's GIL: never with the lock held.
    lock.unlock();
    bool runs = true;
    if (escalating) {
      runs = escalate_(*s);
    } else {
      interrupt_(*s);
    }
    const int64_t after = monotonic_ns();
    lock.lock();
    s->watch.interrupting = false;
    s->watch.interrupted = true;
    // The trace has its grace period from the interrupt; after that the
    // stop is re-armed until the call leaves the interpreter.
    const int64_t wait = escalating ? kRearmNs : s->grace_ns();
    s->watch.escalate_at_ns =
        !runs ? 0 : (wait > CallStop::kNoDeadline - after ? CallStop::kNoDeadline : after + wait);
    interrupting_ = nullptr;
    poked_ = true;
    idle_cv_.notify_all();
    cv_.notify_one();
  }
}

}  // namespace manypy
