// One interpreter's watchdog: a thread that stops the bounded calls running
// in that interpreter when their deadline passes or their token is
// cancelled (docs/threads.md, "Deadlines and cancellation").
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "call_stop.h"

namespace manypy {

class Watchdog final : public StopObserver {
 public:
  // `interrupt` runs on the watchdog's thread for a call whose stop is set
  // while it is in the interpreter (CallStop::in_interpreter).
  explicit Watchdog(std::function<void(CallStop&)> interrupt);
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Watches `stop` until unwatch(stop). The first watch starts the thread,
  // which lives as long as the process (as the interpreter does).
  void watch(CallStop& stop);
  // Stops watching; waits while the watchdog is interrupting this call.
  void unwatch(CallStop& stop) noexcept;
  // A hand-over waiter to wake (wake(waiter)) when `stop` gets a stop;
  // nullptr clears it, after which no wake of it runs.
  void set_waiter(CallStop& stop, void (*wake)(void*), void* waiter) noexcept;
  // Look again now: a token was cancelled.
  void poke() noexcept override;
  // Cancels every call it watches (CallStop::cancel_because(why)), running
  // or queued, as their cancel tokens would: a drain's deadline.
  void cancel_all(const char* why) noexcept;

 private:
  void run();

  const std::function<void(CallStop&)> interrupt_;
  std::mutex mu_;
  std::condition_variable cv_;               // the thread waits on it
  std::condition_variable idle_cv_;          // an interrupt finished
  CallStop* head_ = nullptr;                 // watched calls
  int64_t wake_at_ = CallStop::kNoDeadline;  // when the thread will look next
  bool poked_ = false;
  bool started_ = false;
};

}  // namespace manypy
