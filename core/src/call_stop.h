// Deadlines and cancel tokens: what bounds a call, and the per-call state
// through which it is told to stop.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "error.h"
#include "interp_api.h"

namespace manypy {

// CLOCK_MONOTONIC in nanoseconds, the clock of deadlines.
int64_t monotonic_ns();

class CancelToken;

// Told when a token it listens to is cancelled. Intrusive, so listening and
// unlistening allocate nothing on the call path.
class CancelListener {
 public:
  virtual void on_cancel() noexcept = 0;

 protected:
  ~CancelListener() = default;

 private:
  friend class CancelToken;
  CancelListener* prev_ = nullptr;
  CancelListener* next_ = nullptr;
};

// A caller's cancel token, shared by any number of calls.
class CancelToken {
 public:
  // Cancels (once) and tells every listener, on this thread, before it
  // returns.
  void cancel() noexcept;
  bool cancelled() const noexcept { return cancelled_.load(std::memory_order_acquire); }
  // Adds `listener`; false (and not added) if the token is already cancelled.
  bool listen(CancelListener* listener);
  // Removes `listener`. When this returns, its on_cancel is not running and
  // will not run.
  void unlisten(CancelListener* listener) noexcept;

 private:
  std::atomic<bool> cancelled_{false};
  std::mutex mu_;  // guards the list; held while listeners are told
  CancelListener* head_ = nullptr;
};

// How a call is bounded (part of its CallOptions). All unset: unbounded.
struct CallLimits {
  int64_t timeout_ns = 0;   // from the call's start; 0: none
  int64_t deadline_ns = 0;  // absolute, CLOCK_MONOTONIC; 0: none
  std::shared_ptr<CancelToken> token;

  bool bounded() const { return timeout_ns != 0 || deadline_ns != 0 || token != nullptr; }
};

// Told when a watched call's stop is set from outside (a token cancelled),
// so that it looks at once instead of at its next deadline: the interpreter's
// watchdog (watchdog.h), which implements it. An interface, so that the stop
// does not depend on the watchdog that depends on it.
class StopObserver {
 public:
  virtual void poke() noexcept = 0;

 protected:
  ~StopObserver() = default;
};

// One bounded call's stop state, on the caller's stack for the call's
// duration. The first stop (its deadline passing, its token being
// cancelled) wins and becomes the call's Error.
class CallStop final : public CancelListener {
 public:
  static constexpr int64_t kNoDeadline = INT64_MAX;

  // How long a stopped call's clean-up may run before the stop escalates,
  // unless the pool says otherwise (interp_api.h, mpi_call_control).
  static constexpr int64_t kDefaultGraceNs = 100 * 1000 * 1000;

  // Starts the clock and listens to the token. Throws the stop's Error if the
  // deadline has already passed or the token is already cancelled.
  explicit CallStop(const CallLimits& limits, int64_t grace_ns = kDefaultGraceNs);
  ~CallStop();
  CallStop(const CallStop&) = delete;
  CallStop& operator=(const CallStop&) = delete;

  int64_t deadline_ns() const { return deadline_ns_; }
  // How long its clean-up may run before the stop escalates.
  int64_t grace_ns() const { return control_.grace_ns; }
  // 0, or MPI_ERR_DEADLINE_EXCEEDED / MPI_ERR_CANCELLED.
  int stop() const { return __atomic_load_n(&control_.stop, __ATOMIC_SEQ_CST); }
  // The stop, after setting it if the deadline has passed at `now_ns`.
  int check(int64_t now_ns);
  // Sets the stop unless one is set. True if this call set it.
  bool set_stop(int code);
  // When the stop came (CLOCK_MONOTONIC): a deadline's, or when the token
  // was cancelled; 0 while there is none.
  int64_t stopped_ns() const;

  // Stops the call as a cancel token would, saying `why` (static storage)
  // in its Error. True if this set the stop. The caller pokes the watchdog.
  bool cancel_because(const char* why);
  // What cancel_because said, or nullptr.
  const char* cancel_reason() const { return cancel_reason_.load(std::memory_order_acquire); }
  // When the call began running in its interpreter, holding the GIL
  // (mpi_call_control.began_ns); 0 if it never did.
  int64_t began_ns() const { return __atomic_load_n(&control_.began_ns, __ATOMIC_ACQUIRE); }

  // The interpreter side's view of this call.
  mpi_call_control* control() { return &control_; }
  // Set by the interpreter side when the call that ended left its
  // interpreter unfit to serve again (mpi_call_control.retire); "" if not.
  std::string retire_reason() const {
    return control_.retire ? std::string(control_.retire_reason) : std::string();
  }

  // Set (seq_cst) just before the call is handed to the interpreter side,
  // which looks at the stop when it begins; so a stop set later is seen
  // either by that look or by the watchdog, which then interrupts.
  std::atomic<bool> in_interpreter{false};

  // The Error this call's stop becomes; `when` says what it was doing, e.g.
  // "before the call started".
  Error error(const std::string& when) const;

  // The watchdog's bookkeeping (watchdog.cpp), guarded by its mutex.
  struct Watch {
    std::atomic<StopObserver*> watchdog{nullptr};  // poked on a cancel; lives forever
    CallStop* prev = nullptr;
    CallStop* next = nullptr;
    void (*wake_waiter)(void*) = nullptr;  // a hand-over waiter to wake on a stop
    void* waiter = nullptr;
    void (*give_up)(void*) = nullptr;  // tells the waiter the call is lost
    bool interrupting = false;
    bool interrupted = false;
    // When to escalate next (Watchdog::run), once interrupted; 0: never.
    int64_t escalate_at_ns = 0;
    // Still running twice its grace period after its stop: its interpreter
    // is lost while it runs (Watchdog::lost).
    bool lost = false;
  } watch;

 private:
  void on_cancel() noexcept override;

  const int64_t deadline_ns_;
  std::atomic<int64_t> cancelled_ns_{0};  // when set_stop(MPI_ERR_CANCELLED) won
  std::atomic<const char*> cancel_reason_{nullptr};
  const std::shared_ptr<CancelToken> token_;
  mpi_call_control control_{};
};

}  // namespace manypy
