// Which interpreter of a pool serves a call, as torch::deploy's
// LoadBalancer chooses: a free one if there is one (claimed atomically, so
// two callers never take the same free one), else the least loaded; never
// one that cannot serve. It also keeps the pool's load: the calls admitted
// and not complete, and among them those waiting for their interpreter,
// which admission control bounds (manypy_pool_options_set_queue_limit).
//
// The pool's members change (pools that grow, resize, interpreters that
// start in the background): the chooser has a slot for every interpreter
// the process can hold, and the pool says which are members and in what
// state. Choosing, admitting and refusing stay lock-free: a few atomic
// operations per slot, whatever the load.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace manypy::dispatch {

class Lane;
class Chooser;

// What the chooser asks of a member's interpreter: whether it serves, and
// why not. A Lane answers for its Interpreter. An interface, not the Lane,
// so that the chooser's choices can be tested without starting an
// interpreter (tests/core/dispatch_chooser_test.cpp); the chooser itself
// never touches the Lane, which only the dispatcher runs calls on.
class MemberHealth {
 public:
  // Lock-free: asked on every call that may go anywhere.
  virtual bool serving() const = 0;
  // Why it cannot serve ("" while it can).
  virtual std::string why_not_serving() const = 0;

 protected:
  ~MemberHealth() = default;
};

// One unit of load on one interpreter, held from admission to completion.
// Movable; releasing twice is harmless.
class Ticket {
 public:
  Ticket() = default;
  Ticket(Chooser* chooser, size_t index) : chooser_(chooser), index_(index) {}
  Ticket(Ticket&& other) noexcept { *this = std::move(other); }
  Ticket& operator=(Ticket&& other) noexcept;
  ~Ticket() { release(); }
  void release() noexcept;
  // The interpreter's index in its pool.
  size_t index() const { return index_; }
  bool held() const { return chooser_ != nullptr; }
  Chooser* chooser() const { return chooser_; }

 private:
  Chooser* chooser_ = nullptr;
  size_t index_ = 0;
};

// A member's state. kStarting: its interpreter starts, or its lease
// begins, in the background; calls pinned to it queue behind that. kUp:
// serving, unless its interpreter was retired. kDown: it failed to come up
// (its interpreter says why). kLeaving: out of the pool, its calls
// finishing. kAbsent: no interpreter.
enum class SlotState : int { kAbsent, kStarting, kUp, kDown, kLeaving };

class Chooser {
 public:
  static constexpr int kAnyInterpreter = -1;

  // `capacity`: the most members the pool can ever have. `queue_limit`:
  // the most calls that may wait at once (0: no limit).
  Chooser(size_t capacity, size_t queue_limit);
  Chooser(const Chooser&) = delete;
  Chooser& operator=(const Chooser&) = delete;

  // Members: indices [0, size()). Lock-free.
  size_t size() const { return size_.load(std::memory_order_acquire); }
  size_t capacity() const { return slots_.size(); }
  Lane& lane(size_t index) const { return *slots_[index]->lane.load(std::memory_order_acquire); }
  SlotState state(size_t index) const {
    return static_cast<SlotState>(slots_[index]->state.load(std::memory_order_acquire));
  }

  // Membership, changed by the pool only, one change at a time.
  // Gives slot `index` its interpreter, in state kStarting; the lane
  // answers for its health.
  void add(size_t index, Lane* lane);
  // The same with the member's health told apart from its lane (which may
  // then be null, for a test that runs no call on it). `health` must live
  // as long as the chooser may ask it.
  void add(size_t index, Lane* lane, const MemberHealth* health);
  void set_state(size_t index, SlotState state);
  void set_size(size_t size);
  // Members in state kStarting. Lock-free.
  int starting() const { return starting_.load(std::memory_order_acquire); }
  // Waits until no call holds load on slot `index`.
  void wait_slot_idle(size_t index);

  // Admits a call for interpreter `interpreter` (an index, or
  // kAnyInterpreter). Throws Error: kDraining once drain() was called,
  // kOutOfRange for a bad index or a member leaving the pool,
  // kInterpreterBroken when the pinned interpreter (or every one) cannot
  // serve, kOverloaded when the call would wait and the queue is full. A
  // call that may go anywhere goes to a member still starting only when no
  // member is up.
  Ticket admit(int interpreter);

  // Admits again a call that was admitted for any interpreter and waited
  // for one that stopped serving before its turn (Job::move_elsewhere): a
  // member as admit() would choose (a free one, else the least loaded; one
  // still starting only when none is up). Not refused for the queue limit
  // or a drain: the call was admitted already, and a drain finishes the
  // calls it has. Throws Error(kInterpreterBroken) when no member can serve
  // (saying why for each). The caller gives back its old ticket after.
  Ticket readmit();

  // Throws Error(kOutOfRange) for an index outside the pool.
  void check_index(int interpreter) const;

  // From now on admit() refuses with kDraining. Returns the calls in flight
  // at that moment (none can be admitted after it).
  size_t drain();
  bool draining() const { return draining_.load(std::memory_order_seq_cst); }
  // Calls that ended cancelled by a drain's deadline (Job::complete counts
  // them before they let go of their load), so that each drain can tell
  // how many of its calls it cancelled, however drains overlap.
  void count_drain_cancelled() noexcept {
    drain_cancelled_.fetch_add(1, std::memory_order_seq_cst);
  }
  uint64_t drain_cancelled() const { return drain_cancelled_.load(std::memory_order_seq_cst); }

  size_t queued() const { return queued_.load(std::memory_order_relaxed); }
  // Whether a call that would wait is refused right now.
  bool at_queue_limit() const { return queue_limit_ != 0 && queued() >= queue_limit_; }
  size_t queue_limit() const { return queue_limit_; }
  size_t in_flight() const { return in_flight_.load(std::memory_order_seq_cst); }
  // Calls admitted on interpreter `index` and not complete.
  int load(size_t index) const { return slots_.at(index)->load.load(); }
  // Waits until no call is in flight, or until `deadline_ns` (absolute,
  // CLOCK_MONOTONIC; 0: none). True if none is.
  bool wait_idle(int64_t deadline_ns = 0);

  // Called (on the thread that began it) when a call began running after
  // waiting `waited_ns` for its interpreter: the pool grows on long waits.
  void set_wait_observer(std::function<void(int64_t waited_ns)> observer) {
    wait_observer_ = std::move(observer);
  }
  void waited(int64_t waited_ns) const {
    if (wait_observer_) wait_observer_(waited_ns);
  }

  // Called with a member's index when a call that held load on it ends and
  // the member is up but no longer serves: its interpreter was retired (by
  // that call, or meanwhile). The pool replaces it (pool_members.h). Runs
  // on the thread that completes the call, before the call lets go of its
  // load and before its outcome is reported; must not throw. Set before
  // any call is admitted.
  void set_retire_observer(std::function<void(size_t index)> observer) {
    retire_observer_ = std::move(observer);
  }
  // A call on `index` ends: tells the retire observer if the member is
  // retired. Two atomic loads when it is not.
  void completed_on(size_t index) const {
    if (retire_observer_ && state(index) == SlotState::kUp && !health(index).serving()) {
      retire_observer_(index);
    }
  }
  // Why the pool could not replace a retired member ("" once it could, or
  // while it did not have to): added to the error of a call that no member
  // can serve, so that the caller learns the pool is out of room.
  void set_not_replaced(std::string why);
  std::string not_replaced() const;

 private:
  friend class Ticket;
  struct Slot {
    std::atomic<Lane*> lane{nullptr};
    std::atomic<const MemberHealth*> health{nullptr};
    std::atomic<int> state{static_cast<int>(SlotState::kAbsent)};
    std::atomic<int> load{0};
  };

  const MemberHealth& health(size_t index) const {
    return *slots_[index]->health.load(std::memory_order_acquire);
  }
  // Whether the member at `index` takes calls that may go anywhere.
  bool up(size_t index) const;
  // Takes one unit of load on `index`, counting a wait when it was busy;
  // refuses (and gives the unit back) past the queue limit or once the
  // pool drains.
  Ticket take(size_t index);
  // The ticket of a call counted on `index`, unless the pool began to
  // drain or the slot to leave meanwhile (then it gives the unit back and
  // throws).
  Ticket admitted(size_t index);
  // readmit's unit of load on `index` (no limit, no drain), unless the
  // slot is leaving (then it gives the unit back).
  bool take_moved(size_t index);
  // Whether the slot is leaving the pool or has left it.
  bool left(size_t index) const;
  [[noreturn]] void throw_left(size_t index) const;
  void release(size_t index) noexcept;
  [[noreturn]] void throw_draining() const;
  [[noreturn]] void throw_none_can_serve(size_t n) const;

  std::vector<std::unique_ptr<Slot>> slots_;
  std::atomic<size_t> size_{0};
  std::atomic<int> starting_{0};
  const size_t queue_limit_;
  std::atomic<unsigned> next_{0};
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> drain_cancelled_{0};
  // Sum over slots of max(0, load - 1): the calls that wait.
  std::atomic<size_t> queued_{0};
  std::atomic<size_t> in_flight_{0};
  std::mutex idle_mu_;
  std::condition_variable idle_cv_;
  std::function<void(int64_t)> wait_observer_;
  std::function<void(size_t)> retire_observer_;
  mutable std::mutex not_replaced_mu_;
  std::string not_replaced_;  // under not_replaced_mu_
};

}  // namespace manypy::dispatch
