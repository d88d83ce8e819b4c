// Which interpreter of a pool serves a call, as torch::deploy's
// LoadBalancer chooses: a free one if there is one (claimed atomically, so
// two callers never take the same free one), else the least loaded; never
// one that cannot serve. It also keeps the pool's load: the calls admitted
// and not complete, and among them those waiting for their interpreter,
// which admission control bounds (manypy_pool_options_set_queue_limit).
//
// Lock-free: choosing, admitting and refusing cost a few atomic operations
// per interpreter, whatever the load.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace manypy {
class Interpreter;
}

namespace manypy::dispatch {

class Lane;
class Chooser;

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

 private:
  Chooser* chooser_ = nullptr;
  size_t index_ = 0;
};

class Chooser {
 public:
  static constexpr int kAnyInterpreter = -1;

  // `queue_limit`: the most calls that may wait at once (0: no limit).
  Chooser(std::vector<Lane*> lanes, size_t queue_limit);
  Chooser(const Chooser&) = delete;
  Chooser& operator=(const Chooser&) = delete;

  size_t size() const { return slots_.size(); }
  Lane& lane(size_t index) const { return *slots_[index]->lane; }

  // Admits a call for interpreter `interpreter` (an index, or
  // kAnyInterpreter). Throws Error: kOutOfRange for a bad index,
  // kInterpreterBroken when the pinned interpreter (or every one) cannot
  // serve, kOverloaded when the call would wait and the queue is full.
  Ticket admit(int interpreter);

  // Throws Error(kOutOfRange) for an index outside the pool.
  void check_index(int interpreter) const;

  size_t queued() const { return queued_.load(std::memory_order_relaxed); }
  // Whether a call that would wait is refused right now.
  bool at_queue_limit() const { return queue_limit_ != 0 && queued() >= queue_limit_; }
  size_t queue_limit() const { return queue_limit_; }
  size_t in_flight() const { return in_flight_.load(std::memory_order_relaxed); }
  // Calls admitted on interpreter `index` and not complete.
  int load(size_t index) const { return slots_.at(index)->load.load(); }
  // Waits until no call is in flight.
  void wait_idle();

 private:
  friend class Ticket;
  struct Slot {
    Lane* lane;
    std::atomic<int> load{0};
  };

  // Takes one unit of load on `index`, counting a wait when it was busy;
  // refuses (and gives the unit back) past the queue limit.
  Ticket take(size_t index);
  void release(size_t index) noexcept;
  [[noreturn]] void throw_none_can_serve() const;

  std::vector<std::unique_ptr<Slot>> slots_;
  const size_t queue_limit_;
  std::atomic<unsigned> next_{0};
  // Sum over slots of max(0, load - 1): the calls that wait.
  std::atomic<size_t> queued_{0};
  std::atomic<size_t> in_flight_{0};
  std::mutex idle_mu_;
  std::condition_variable idle_cv_;
};

}  // namespace manypy::dispatch
