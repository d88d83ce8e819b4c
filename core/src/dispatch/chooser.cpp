#include "dispatch/chooser.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "call_stop.h"
#include "dispatch/lane.h"
#include "error.h"

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

Chooser::Chooser(size_t capacity, size_t queue_limit) : queue_limit_(queue_limit) {
  for (size_t i = 0; i < capacity; ++i) slots_.push_back(std::make_unique<Slot>());
}

void Chooser::add(size_t index, Lane* lane) { add(index, lane, lane); }

void Chooser::add(size_t index, Lane* lane, const MemberHealth* health) {
  // The state first: a slot may be live (a retired member replaced in
  // place), and a caller that sees the new member's health must not take
  // it for up (admit() checks the state again after claiming).
  set_state(index, SlotState::kStarting);
  slots_.at(index)->lane.store(lane, std::memory_order_release);
  slots_.at(index)->health.store(health, std::memory_order_release);
}

void Chooser::set_state(size_t index, SlotState state) {
  const int before = slots_.at(index)->state.exchange(static_cast<int>(state));
  const int starting = static_cast<int>(SlotState::kStarting);
  if (before == starting && state != SlotState::kStarting) starting_.fetch_sub(1);
  if (before != starting && state == SlotState::kStarting) starting_.fetch_add(1);
}

void Chooser::set_size(size_t size) { size_.store(size, std::memory_order_release); }

void Chooser::wait_slot_idle(size_t index) {
  std::unique_lock<std::mutex> lock(idle_mu_);
  idle_cv_.wait(lock, [&] { return slots_[index]->load.load() == 0; });
}

void Chooser::check_index(int interpreter) const {
  const size_t n = size();
  if (interpreter < 0 || static_cast<size_t>(interpreter) >= n) {
    throw Error(Code::kOutOfRange, "interpreter index " + std::to_string(interpreter) +
                                       " is out of range: the pool has " + std::to_string(n) +
                                       " (valid: 0.." + std::to_string(n - 1) +
                                       " or MANYPY_ANY_INTERPRETER)");
  }
}

bool Chooser::up(size_t index) const {
  return state(index) == SlotState::kUp && health(index).serving();
}

void Chooser::throw_draining() const {
  throw Error(Code::kDraining,
              "the pool is draining (manypy_pool_drain): it finishes the calls it has and takes "
              "no new ones; the call was refused without running");
}

Ticket Chooser::take(size_t index) {
  Slot& slot = *slots_[index];
  in_flight_.fetch_add(1, std::memory_order_seq_cst);
  // Exactly what release undoes, so the count of waiting calls never drifts
  // however takes and releases interleave.
  if (slot.load.fetch_add(1, std::memory_order_seq_cst) >= 1) {
    const size_t waiting = queued_.fetch_add(1, std::memory_order_acq_rel);
    if (queue_limit_ != 0 && waiting >= queue_limit_) {
      release(index);
      throw Error(Code::kOverloaded,
                  "the pool is overloaded: " + std::to_string(queue_limit_) +
                      " calls already wait for an interpreter (its queue limit); the call was "
                      "refused without running");
    }
  }
  return admitted(index);
}

Ticket Chooser::admitted(size_t index) {
  Ticket ticket(this, index);
  // After counting itself in flight and on its slot: drain() sets the flag
  // and then reads the count, and a shrink marks the slot leaving and then
  // waits for its load, so a call either sees the change here or is
  // counted there. Seen late, the slot may be empty already (the shrink
  // found no load, gave its interpreter back and marked it absent): that
  // is refused too, or the call would run in an interpreter the pool no
  // longer has.
  if (draining_.load(std::memory_order_seq_cst)) throw_draining();
  if (left(index)) throw_left(index);
  return ticket;
}

bool Chooser::left(size_t index) const {
  const SlotState now = state(index);
  return now == SlotState::kLeaving || now == SlotState::kAbsent;
}

void Chooser::throw_left(size_t index) const {
  throw Error(Code::kOutOfRange, "interpreter " + std::to_string(index) +
                                     " left the pool as the call was admitted "
                                     "(manypy_pool_resize); the pool now has " +
                                     std::to_string(size()));
}

void Chooser::release(size_t index) noexcept {
  Slot& slot = *slots_[index];
  const int before = slot.load.fetch_sub(1, std::memory_order_acq_rel);
  if (before >= 2) queued_.fetch_sub(1, std::memory_order_acq_rel);
  const bool pool_idle = in_flight_.fetch_sub(1, std::memory_order_seq_cst) == 1;
  const bool slot_left = before == 1 && slot.state.load() == static_cast<int>(SlotState::kLeaving);
  if (pool_idle || slot_left) {
    std::lock_guard<std::mutex> lock(idle_mu_);
    idle_cv_.notify_all();
  }
}

Ticket Chooser::admit(int interpreter) {
  if (draining_.load(std::memory_order_relaxed)) throw_draining();
  if (interpreter != kAnyInterpreter) {
    check_index(interpreter);
    const size_t index = static_cast<size_t>(interpreter);
    // A shrink marks a member leaving before it lowers size(): refused as
    // out of range, as it is once size() says so (not as broken).
    if (left(index)) throw_left(index);
    // A member still starting takes the call: it queues behind the start.
    if (state(index) != SlotState::kStarting) {
      const MemberHealth& member = health(index);
      if (state(index) != SlotState::kUp || !member.serving()) {
        const std::string note = not_replaced();
        throw Error(Code::kInterpreterBroken, "interpreter " + std::to_string(interpreter) +
                                                  ": cannot run code: " + member.why_not_serving() +
                                                  (note.empty() ? "" : "; " + note));
      }
    }
    return take(index);
  }
  const size_t n = size();
  // A free interpreter, claimed by moving its load from 0 to 1. The scan
  // starts at a rotating index to spread calls.
  const size_t start = next_.fetch_add(1, std::memory_order_relaxed) % n;
  for (size_t k = 0; k < n; ++k) {
    const size_t index = (start + k) % n;
    Slot& slot = *slots_[index];
    if (!up(index)) continue;
    int expected = 0;
    if (slot.load.compare_exchange_strong(expected, 1, std::memory_order_seq_cst)) {
      in_flight_.fetch_add(1, std::memory_order_seq_cst);
      // Replaced in place meanwhile (add()): its new member is still
      // starting, and takes calls only behind its bring-up. (A member
      // leaving is refused by admitted(), as before.)
      if (state(index) == SlotState::kStarting) {
        release(index);
        continue;
      }
      return admitted(index);
    }
  }
  // All busy: the least loaded, where the call waits its turn; if none is
  // up yet, the least loaded of those starting.
  for (const bool starting : {false, true}) {
    size_t least = n;
    for (size_t k = 0; k < n; ++k) {
      const size_t index = (start + k) % n;
      if (starting ? state(index) != SlotState::kStarting : !up(index)) continue;
      if (least == n || slots_[index]->load.load(std::memory_order_relaxed) <
                            slots_[least]->load.load(std::memory_order_relaxed)) {
        least = index;
      }
    }
    if (least != n) return take(least);
  }
  throw_none_can_serve(n);
}

bool Chooser::take_moved(size_t index) {
  Slot& slot = *slots_[index];
  in_flight_.fetch_add(1, std::memory_order_seq_cst);
  if (slot.load.fetch_add(1, std::memory_order_seq_cst) >= 1) {
    queued_.fetch_add(1, std::memory_order_acq_rel);
  }
  // As in admitted(): a shrink that marked the slot leaving either sees
  // this load or is seen here.
  if (left(index)) {
    release(index);
    return false;
  }
  return true;
}

Ticket Chooser::readmit() {
  const size_t n = size();
  std::vector<bool> tried(n, false);
  const size_t start = next_.fetch_add(1, std::memory_order_relaxed) % std::max<size_t>(n, 1);
  // Up members first, the least loaded of them (a free one has load 0);
  // then members still starting. A member found leaving is passed over.
  for (const bool starting : {false, true}) {
    for (;;) {
      size_t least = n;
      for (size_t k = 0; k < n; ++k) {
        const size_t index = (start + k) % n;
        if (tried[index]) continue;
        if (starting ? state(index) != SlotState::kStarting : !up(index)) continue;
        if (least == n || slots_[index]->load.load(std::memory_order_relaxed) <
                              slots_[least]->load.load(std::memory_order_relaxed)) {
          least = index;
        }
      }
      if (least == n) break;
      tried[least] = true;
      if (take_moved(least)) return Ticket(this, least);
    }
  }
  throw_none_can_serve(n);
}

void Chooser::throw_none_can_serve(size_t n) const {
  std::string why;
  for (size_t k = 0; k < n; ++k) {
    why += (k ? "; " : "") + std::string("interpreter ") + std::to_string(k) + ": " +
           health(k).why_not_serving();
  }
  const std::string note = not_replaced();
  throw Error(Code::kInterpreterBroken, "no interpreter of this pool can serve (" + why + ")" +
                                            (note.empty() ? "" : "; " + note));
}

void Chooser::set_not_replaced(std::string why) {
  std::lock_guard<std::mutex> lock(not_replaced_mu_);
  not_replaced_ = std::move(why);
}

std::string Chooser::not_replaced() const {
  std::lock_guard<std::mutex> lock(not_replaced_mu_);
  return not_replaced_;
}

size_t Chooser::drain() {
  draining_.store(true, std::memory_order_seq_cst);
  return in_flight_.load(std::memory_order_seq_cst);
}

bool Chooser::wait_idle(int64_t deadline_ns) {
  std::unique_lock<std::mutex> lock(idle_mu_);
  const auto idle = [this] { return in_flight_.load() == 0; };
  if (deadline_ns == 0) {
    idle_cv_.wait(lock, idle);
    return true;
  }
  while (!idle()) {
    const int64_t left = deadline_ns - monotonic_ns();
    if (left <= 0) return false;
    idle_cv_.wait_for(lock, std::chrono::nanoseconds(left));
  }
  return true;
}

}  // namespace manypy::dispatch
