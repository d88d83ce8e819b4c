#include "watchdog.h"

#include <chrono>

namespace manypy {

Watchdog::Watchdog(std::function<void(CallStop&)> interrupt) : interrupt_(std::move(interrupt)) {}

void Watchdog::watch(CallStop& stop) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!started_) {
    std::thread([this] { run(); }).detach();  // lives as long as the process
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
  stop.watch.watchdog.store(nullptr, std::memory_order_release);
}

void Watchdog::set_waiter(CallStop& stop, void (*wake)(void*), void* waiter) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  stop.watch.wake_waiter = wake;
  stop.watch.waiter = waiter;
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

void Watchdog::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    poked_ = false;
    const int64_t now = monotonic_ns();
    int64_t next = CallStop::kNoDeadline;
    CallStop* to_interrupt = nullptr;
    for (CallStop* s = head_; s != nullptr; s = s->watch.next) {
      if (s->check(now) == 0) {
        next = std::min(next, s->deadline_ns());
        continue;
      }
      if (s->watch.wake_waiter != nullptr) {
        s->watch.wake_waiter(s->watch.waiter);
        s->watch.wake_waiter = nullptr;
      }
      if (!s->watch.interrupted && to_interrupt == nullptr &&
          s->in_interpreter.load(std::memory_order_seq_cst)) {
        to_interrupt = s;
      }
    }
    if (to_interrupt != nullptr) {
      // Interrupting takes the interpreter's GIL: never with the lock held,
      // and the call cannot unwatch (and go away) meanwhile.
      to_interrupt->watch.interrupting = true;
      lock.unlock();
      interrupt_(*to_interrupt);
      lock.lock();
      to_interrupt->watch.interrupting = false;
      to_interrupt->watch.interrupted = true;
      idle_cv_.notify_all();
      continue;  // look again: time passed, others may be due
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

}  // namespace manypy
