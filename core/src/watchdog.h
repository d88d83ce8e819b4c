// One interpreter's watchdog: a thread that stops the bounded calls running
// in that interpreter when their deadline passes or their token is
// cancelled (docs/threads.md, "Deadlines and cancellation"), and gives up
// on those that do not end (lost: docs/serving.md, "Lost interpreters").
//
// Stopping takes the interpreter's GIL, which C code may hold for as long
// as it likes: a second thread, the interrupter, does that work, so that
// the watchdog's own thread always keeps time (it wakes queued calls whose
// stop came, and finds lost calls, while the interrupter waits).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "call_stop.h"

namespace manypy {

class Watchdog final : public StopObserver {
 public:
  // `interrupt` runs on the interrupter thread for a call whose stop is set
  // while it is in the interpreter (CallStop::in_interpreter). `escalate`
  // runs there for an interrupted call that is still watched a grace period
  // later, and again every kRearmNs until the call ends or it returns false
  // (the call left the interpreter): the stop raised where a trace function
  // cannot (Interpreter::escalate), re-armed each time the model swallows it.
  Watchdog(std::function<void(CallStop&)> interrupt, std::function<bool(CallStop&)> escalate);
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Watches `stop` until unwatch(stop). The first watch starts the thread,
  // which lives as long as the process (as the interpreter does).
  void watch(CallStop& stop);
  // Stops watching; waits while the watchdog is interrupting this call.
  void unwatch(CallStop& stop) noexcept;
  // A hand-over waiter to wake (wake(waiter)) when `stop` gets a stop;
  // nullptr clears it, after which no wake of it runs. `give_up`, if not
  // nullptr, runs (give_up(waiter)) once if the call is found lost while it
  // is still watched: its caller may be told its status without waiting.
  // Both run under the watchdog's lock: they must not block.
  void set_waiter(CallStop& stop, void (*wake)(void*), void* waiter,
                  void (*give_up)(void*) = nullptr) noexcept;
  // Look again now: a token was cancelled.
  void poke() noexcept override;
  // Cancels every call it watches (CallStop::cancel_because(why)), running
  // or queued, as their cancel tokens would: a drain's deadline.
  void cancel_all(const char* why) noexcept;

  // Whether a call it watches is lost: stopped, and still running in the
  // interpreter twice its grace period after its stop (so a grace period
  // after escalation began), and at least kLostAfterAtLeastNs after it,
  // which the interpreter then cannot serve another call for. The watchdog's thread marks such
  // calls as their time comes; this looks now too, under the lock. `why`, if not null, gets a
  // sentence about the first lost call.
  bool lost(std::string* why) noexcept;
  // Lock-free: whether a call was seen lost and still runs.
  bool any_lost() const noexcept { return lost_calls_.load(std::memory_order_acquire) != 0; }

 private:
  void run();
  void interrupter();
  // When `stop`, stopped, counts as lost (under mu_).
  static int64_t lost_at(const CallStop& stop);
  // Marks `stop` lost if it is at `now` (under mu_); true if it is lost.
  bool check_lost(CallStop& stop, int64_t now);

  // The least time after its stop before a call counts as lost: a torch
  // operator or a blocking call that ends a few hundred ms late (a module
  // whose import the stop could not cut) is slow, not lost.
  static constexpr int64_t kLostAfterAtLeastNs = 1000 * 1000 * 1000;
  // How often an escalated call that still runs gets its stop again: often
  // enough that a model swallowing it in a loop is caught at a point where
  // it cannot, rarely enough that taking the GIL for it costs little.
  static constexpr int64_t kRearmNs = 5 * 1000 * 1000;

  const std::function<void(CallStop&)> interrupt_;
  const std::function<bool(CallStop&)> escalate_;
  std::mutex mu_;
  std::condition_variable cv_;               // the thread waits on it
  std::condition_variable idle_cv_;          // an interrupt finished
  std::condition_variable interrupter_cv_;   // the interrupter waits on it
  CallStop* interrupting_ = nullptr;         // the interrupter's call
  bool escalating_ = false;                  // escalate (not interrupt) it
  CallStop* head_ = nullptr;                 // watched calls
  int64_t wake_at_ = CallStop::kNoDeadline;  // when the thread will look next
  bool poked_ = false;
  bool started_ = false;
  std::atomic<int> lost_calls_{0};  // watched calls with watch.lost set
};

}  // namespace manypy
