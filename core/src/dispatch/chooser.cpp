#include "dispatch/chooser.h"

#include <string>

#include "dispatch/lane.h"
#include "error.h"
#include "interpreter.h"

namespace manypy::dispatch {

Ticket& Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    release();
    chooser_ = other.chooser_;
    index_ = other.index_;
    other.chooser_ = nullptr;
  }
  return *this;
}

void Ticket::release() noexcept {
  if (chooser_ != nullptr) {
    Chooser* chooser = chooser_;
    chooser_ = nullptr;
    chooser->release(index_);
  }
}

Chooser::Chooser(std::vector<Lane*> lanes, size_t queue_limit) : queue_limit_(queue_limit) {
  for (Lane* lane : lanes) {
    slots_.push_back(std::make_unique<Slot>());
    slots_.back()->lane = lane;
  }
}

void Chooser::check_index(int interpreter) const {
  const size_t n = slots_.size();
  if (interpreter < 0 || static_cast<size_t>(interpreter) >= n) {
    throw Error(Code::kOutOfRange, "interpreter index " + std::to_string(interpreter) +
                                       " is out of range: the pool has " + std::to_string(n) +
                                       " (valid: 0.." + std::to_string(n - 1) +
                                       " or MANYPY_ANY_INTERPRETER)");
  }
}

Ticket Chooser::take(size_t index) {
  Slot& slot = *slots_[index];
  in_flight_.fetch_add(1, std::memory_order_acq_rel);
  // Exactly what release undoes, so the count of waiting calls never drifts
  // however takes and releases interleave.
  if (slot.load.fetch_add(1, std::memory_order_acq_rel) >= 1) {
    const size_t waiting = queued_.fetch_add(1, std::memory_order_acq_rel);
    if (queue_limit_ != 0 && waiting >= queue_limit_) {
      release(index);
      throw Error(Code::kOverloaded,
                  "the pool is overloaded: " + std::to_string(queue_limit_) +
                      " calls already wait for an interpreter (its queue limit); the call was "
                      "refused without running");
    }
  }
  return Ticket(this, index);
}

void Chooser::release(size_t index) noexcept {
  if (slots_[index]->load.fetch_sub(1, std::memory_order_acq_rel) >= 2) {
    queued_.fetch_sub(1, std::memory_order_acq_rel);
  }
  if (in_flight_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    std::lock_guard<std::mutex> lock(idle_mu_);
    idle_cv_.notify_all();
  }
}

Ticket Chooser::admit(int interpreter) {
  const size_t n = slots_.size();
  if (interpreter != kAnyInterpreter) {
    check_index(interpreter);
    const Interpreter& interp = slots_[interpreter]->lane->interpreter();
    if (!interp.serving()) {
      throw Error(Code::kInterpreterBroken, "interpreter " + std::to_string(interpreter) +
                                                ": cannot run code: " + interp.why_not_serving());
    }
    return take(static_cast<size_t>(interpreter));
  }
  // A free interpreter, claimed by moving its load from 0 to 1. The scan
  // starts at a rotating index to spread calls.
  const size_t start = next_.fetch_add(1, std::memory_order_relaxed) % n;
  for (size_t k = 0; k < n; ++k) {
    const size_t index = (start + k) % n;
    Slot& slot = *slots_[index];
    if (!slot.lane->interpreter().serving()) continue;
    int expected = 0;
    if (slot.load.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
      in_flight_.fetch_add(1, std::memory_order_acq_rel);
      return Ticket(this, index);
    }
  }
  // All busy: the least loaded, where the call waits its turn.
  size_t least = n;
  for (size_t k = 0; k < n; ++k) {
    const size_t index = (start + k) % n;
    if (!slots_[index]->lane->interpreter().serving()) continue;
    if (least == n || slots_[index]->load.load(std::memory_order_relaxed) <
                          slots_[least]->load.load(std::memory_order_relaxed)) {
      least = index;
    }
  }
  if (least == n) throw_none_can_serve();
  return take(least);
}

void Chooser::throw_none_can_serve() const {
  std::string why;
  for (size_t k = 0; k < slots_.size(); ++k) {
    why += (k ? "; " : "") + std::string("interpreter ") + std::to_string(k) + ": " +
           slots_[k]->lane->interpreter().why_not_serving();
  }
  throw Error(Code::kInterpreterBroken, "no interpreter of this pool can serve (" + why + ")");
}

void Chooser::wait_idle() {
  std::unique_lock<std::mutex> lock(idle_mu_);
  idle_cv_.wait(lock, [this] { return in_flight_.load() == 0; });
}

}  // namespace manypy::dispatch
