#include "pool_members.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "process_exit.h"
#include "runtime.h"

namespace manypy {

// A member's bring-up, the first work in its home thread's queue: calls
// pinned to the member queue behind it.
class PoolMembers::BringUp final : public dispatch::Job {
 public:
  BringUp(PoolMembers& members, size_t index, bool fresh)
      : Job(CallLimits{}, 0), members_(members), index_(index), fresh_(fresh) {}

 protected:
  Value run(Interpreter* interp) override {
    // Joining and beginning the lease run Python in the namespace: not
    // under exit()'s destructors (process_exit.h).
    ProcessExit::Section section;
    if (!section.began()) throw exiting_error();
    Runtime::get().interpreters().bring_up(*interp, fresh_, members_.settings_.lease);
    return Value();
  }
  void succeeded(Value) noexcept override { members_.settled(index_, nullptr); }
  void failed(Error error) noexcept override { members_.settled(index_, &error); }

 private:
  PoolMembers& members_;
  const size_t index_;
  const bool fresh_;
};

PoolMembers::PoolMembers(dispatch::Chooser& chooser, Settings settings)
    : chooser_(chooser),
      settings_(std::move(settings)),
      lanes_(chooser.capacity(), nullptr),
      up_or_failed_(chooser.capacity(), false),
      failures_(chooser.capacity()),
      in_background_(chooser.capacity(), false),
      replace_wanted_(chooser.capacity(), false) {}

PoolMembers::~PoolMembers() {
  close();
  std::vector<dispatch::Lane*> members;
  {
    std::unique_lock<std::mutex> lock(mu_);
    const size_t n = chooser_.size();
    settled_cv_.wait(lock, [&] {
      for (size_t i = 0; i < n; ++i) {
        if (!up_or_failed_[i]) return false;
      }
      return true;
    });
    members.assign(lanes_.begin(), lanes_.begin() + n);
  }
  Runtime::get().interpreters().give_back(members);
}

void PoolMembers::close() noexcept {
  std::vector<std::thread> threads;
  std::thread grower;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
    threads.swap(threads_);
    grower.swap(grower_);
  }
  grow_cv_.notify_all();
  if (grower.joinable()) grower.join();
  for (std::thread& t : threads) t.join();
}

void PoolMembers::in_background(std::function<void()> fn) {
  std::unique_lock<std::mutex> lock(mu_);
  // Once close() took the threads to join, one made now would never be
  // joined: the work runs here instead (a replacement by the maintenance
  // thread, which close() joins).
  if (closing_) {
    lock.unlock();
    fn();
    return;
  }
  threads_.emplace_back(std::move(fn));
}

void PoolMembers::grow(size_t n, Wait wait, bool background) {
  std::lock_guard<std::mutex> change(resize_mu_);
  const size_t old = chooser_.size();
  if (n <= old) return;
  InterpreterSet& set = Runtime::get().interpreters();
  const std::vector<InterpreterSet::Leased> leased = set.lease(n - old, settings_.trust);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t k = 0; k < leased.size(); ++k) {
      lanes_[old + k] = leased[k].lane;
      up_or_failed_[old + k] = false;
      failures_[old + k].reset();
      in_background_[old + k] = background || wait == Wait::kFirst;
    }
  }
  std::vector<dispatch::Lane*> fresh;
  for (size_t k = 0; k < leased.size(); ++k) {
    chooser_.add(old + k, leased[k].lane);
    leased[k].lane->post(std::make_shared<BringUp>(*this, old + k, leased[k].fresh));
    if (leased[k].fresh) fresh.push_back(leased[k].lane);
  }
  chooser_.set_size(n);

  // When the pool serves from its first member, that one starts alone:
  // the others, started beside it, would slow it down on a small machine.
  // Then they start at most one fewer than the machine's cores at a time,
  // so that the requests the first one serves keep a core.
  const bool stagger = wait == Wait::kFirst && fresh.size() == leased.size() && fresh.size() > 1;
  auto start = [&set, fresh, stagger] {
    if (!stagger) {
      for (dispatch::Lane* lane : fresh) set.start(*lane, /*wait=*/false);
      return;
    }
    set.start(*fresh[0], /*wait=*/true);
    const size_t cores = std::max(1u, std::thread::hardware_concurrency());
    const size_t at_once = std::max<size_t>(1, cores - 1);
    for (size_t i = 1; i < fresh.size(); i += at_once) {
      const size_t end = std::min(fresh.size(), i + at_once);
      for (size_t k = i; k < end; ++k) set.start(*fresh[k], /*wait=*/false);
      for (size_t k = i; k < end; ++k) set.start_settled(*fresh[k]);
    }
  };
  if (wait == Wait::kFirst && !fresh.empty()) {
    in_background(start);
  } else {
    start();
  }

  std::unique_lock<std::mutex> lock(mu_);
  if (wait == Wait::kAll) {
    settled_cv_.wait(lock, [&] {
      for (size_t i = old; i < n; ++i) {
        if (!up_or_failed_[i]) return false;
      }
      return true;
    });
    for (size_t i = old; i < n; ++i) {
      if (failures_[i]) throw *failures_[i];
    }
    return;
  }
  bool all_settled = false;
  settled_cv_.wait(lock, [&] {
    all_settled = true;
    for (size_t i = 0; i < n; ++i) {
      if (chooser_.state(i) == dispatch::SlotState::kUp) return true;
      all_settled = all_settled && up_or_failed_[i];
    }
    return all_settled;
  });
  if (!all_settled) return;
  for (size_t i = 0; i < n; ++i) {
    if (chooser_.state(i) == dispatch::SlotState::kUp) return;
  }
  for (size_t i = old; i < n; ++i) {
    if (failures_[i]) throw *failures_[i];
  }
}

void PoolMembers::settled(size_t index, const Error* error) noexcept {
  std::optional<Error> failure;
  bool report = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (error != nullptr) {
      failure = error->prefixed("interpreter " + std::to_string(index) + ": ");
      failures_[index] = failure;
      report = in_background_[index];
    }
    chooser_.set_state(index, error ? dispatch::SlotState::kDown : dispatch::SlotState::kUp);
    up_or_failed_[index] = true;
  }
  settled_cv_.notify_all();
  // A member that could not come up because the process is exiting is not
  // the host's to hear about: its callback would run among exit()'s
  // destructors.
  if (report && settings_.on_failed && !ProcessExit::exiting()) {
    settings_.on_failed(static_cast<int>(index), *failure);
  }
}

void PoolMembers::resize(size_t n) {
  const size_t limit = chooser_.capacity();
  if (n == 0 || n > limit) {
    throw Error(Code::kOutOfRange, "a pool needs 1 to " + std::to_string(limit) +
                                       " interpreters on this platform, not " + std::to_string(n));
  }
  if (n > chooser_.size()) {
    grow(n, Wait::kAll, /*background=*/false);
    return;
  }
  std::lock_guard<std::mutex> change(resize_mu_);
  shrink(n);
}

void PoolMembers::shrink(size_t n) {
  const size_t old = chooser_.size();
  if (n >= old) return;
  std::vector<dispatch::Lane*> leaving;
  {
    // A member still coming up leaves once it has.
    std::unique_lock<std::mutex> lock(mu_);
    settled_cv_.wait(lock, [&] {
      for (size_t i = n; i < old; ++i) {
        if (!up_or_failed_[i]) return false;
      }
      return true;
    });
    leaving.assign(lanes_.begin() + n, lanes_.begin() + old);
  }
  for (size_t i = n; i < old; ++i) chooser_.set_state(i, dispatch::SlotState::kLeaving);
  chooser_.set_size(n);
  for (size_t i = n; i < old; ++i) chooser_.wait_slot_idle(i);
  Runtime::get().interpreters().give_back(leaving);
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = n; i < old; ++i) {
    chooser_.set_state(i, dispatch::SlotState::kAbsent);
    lanes_[i] = nullptr;
  }
}

void PoolMembers::on_wait(int64_t waited_ns) {
  if (waited_ns < settings_.grow_after_ns || chooser_.size() >= settings_.max) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (closing_ || grow_wanted_ || monotonic_ns() < next_growth_ns_) return;
  grow_wanted_ = true;
  wake_maintainer();
}

void PoolMembers::wake_maintainer() {
  if (grower_.joinable()) {
    grow_cv_.notify_one();
  } else {
    grower_ = std::thread([this] { maintain(); });
  }
}

void PoolMembers::on_retired(size_t index) noexcept {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closing_ || replace_wanted_[index]) return;
    replace_wanted_[index] = true;
    replacing_ = true;
  }
  // At once when no membership change is under way: a caller told of the
  // retirement (the call that retired it) then finds its replacement
  // starting, and calls that may go anywhere queue behind its start
  // instead of failing in a pool with no other member.
  {
    std::unique_lock<std::mutex> change(resize_mu_, std::try_to_lock);
    if (change.owns_lock() && replace(index)) return;
  }
  try {
    std::lock_guard<std::mutex> lock(mu_);
    if (!closing_) wake_maintainer();
  } catch (...) {
    // No thread could be made: the next retirement or long wait tries again.
  }
}

bool PoolMembers::replace(size_t index) noexcept {
  dispatch::Lane* old = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closing_ || !replace_wanted_[index]) return true;
    old = lanes_[index];
  }
  const auto done = [this, index] {
    std::lock_guard<std::mutex> lock(mu_);
    replace_wanted_[index] = false;
    replacing_ =
        std::find(replace_wanted_.begin(), replace_wanted_.end(), true) != replace_wanted_.end();
    if (!replacing_ && no_room_) {
      no_room_ = false;
      chooser_.set_not_replaced("");
    }
  };
  // Still a retired member: not shrunk away or replaced meanwhile.
  if (index >= chooser_.size() || old == nullptr ||
      chooser_.state(index) != dispatch::SlotState::kUp || old->interpreter().serving()) {
    done();
    return true;
  }
  InterpreterSet& set = Runtime::get().interpreters();
  dispatch::Lane* lane = nullptr;
  bool fresh = false;
  try {
    const std::vector<InterpreterSet::Leased> leased = set.lease(1, settings_.trust);
    lane = leased.at(0).lane;
    fresh = leased.at(0).fresh;
  } catch (const std::exception& e) {
    const Error* error = dynamic_cast<const Error*>(&e);
    const std::string why = error != nullptr ? error->message() : std::string("out of memory");
    try {
      chooser_.set_not_replaced("interpreter " + std::to_string(index) +
                                " was retired and could not be replaced: " + why);
    } catch (...) {
      // The stats still say so.
    }
    std::lock_guard<std::mutex> lock(mu_);
    no_room_ = true;
    next_replace_ns_ = monotonic_ns() + 1000 * 1000 * 1000;
    return false;
  }
  // The retired interpreter is not given back: it never serves again, and
  // keeps its namespace (the calls still queued there, pinned to it, fail
  // with its status). Its slot takes the new one, which comes up as a
  // member that grew the pool does.
  std::shared_ptr<BringUp> bring_up;
  try {
    bring_up = std::make_shared<BringUp>(*this, index, fresh);
  } catch (...) {
    // Without it the new member never comes up: below, it is down.
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    lanes_[index] = lane;
    up_or_failed_[index] = false;
    failures_[index].reset();
    in_background_[index] = true;
    ++replaced_;
    // The slot is live: its bring-up goes first in the new lane's queue,
    // before any call can be sent there, and under mu_, which its
    // settled() takes, so that it marks the member up only after add()
    // marked it starting.
    bool posted = false;
    if (bring_up) {
      try {
        lane->post(bring_up);
        posted = true;
      } catch (...) {
      }
    }
    chooser_.add(index, lane);
    if (!posted) {
      failures_[index] =
          Error(Code::kResourceExhausted, "interpreter " + std::to_string(index) +
                                              ": out of memory as its replacement came up");
      up_or_failed_[index] = true;
      chooser_.set_state(index, dispatch::SlotState::kDown);
    }
  }
  settled_cv_.notify_all();
  done();
  if (fresh) {
    try {
      in_background([&set, lane] { set.start(*lane, /*wait=*/false); });
    } catch (...) {
      set.start(*lane, /*wait=*/false);
    }
  }
  return true;
}

bool PoolMembers::replace_waiting() noexcept {
  std::vector<size_t> wanted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < replace_wanted_.size(); ++i) {
      if (replace_wanted_[i]) wanted.push_back(i);
    }
  }
  for (size_t index : wanted) {
    if (!replace(index)) return false;  // no room: the next would fail alike
  }
  return true;
}

uint64_t PoolMembers::replaced() const {
  std::lock_guard<std::mutex> lock(mu_);
  return replaced_;
}

bool PoolMembers::no_room() const {
  std::lock_guard<std::mutex> lock(mu_);
  return no_room_;
}

void PoolMembers::maintain() noexcept {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    const auto replace_due = [this] { return replacing_ && monotonic_ns() >= next_replace_ns_; };
    while (!closing_ && !grow_wanted_ && !replace_due()) {
      if (replacing_) {
        const int64_t left = std::max<int64_t>(next_replace_ns_ - monotonic_ns(), 1);
        grow_cv_.wait_for(lock, std::chrono::nanoseconds(left));
      } else {
        grow_cv_.wait(lock);
      }
    }
    if (closing_) return;
    if (replace_due()) {
      lock.unlock();
      {
        std::lock_guard<std::mutex> change(resize_mu_);
        replace_waiting();
      }
      lock.lock();
      continue;
    }
    lock.unlock();
    bool failed = false;
    try {
      // One at a time: each new member takes a share of the waits, and a
      // wait that is still long after it asks for the next.
      if (chooser_.size() < settings_.max)
        grow(chooser_.size() + 1, Wait::kAll, /*background=*/true);
    } catch (...) {
      // A member that failed was reported (settled); a lease the process
      // could not give is tried again a second later.
      failed = true;
    }
    lock.lock();
    if (failed) next_growth_ns_ = monotonic_ns() + 1000 * 1000 * 1000;
    grow_wanted_ = false;
  }
}

std::vector<Interpreter*> PoolMembers::interpreters() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Interpreter*> all;
  for (size_t i = 0; i < chooser_.size(); ++i) all.push_back(&lanes_[i]->interpreter());
  return all;
}

std::vector<dispatch::Lane*> PoolMembers::lanes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::vector<dispatch::Lane*>(lanes_.begin(), lanes_.begin() + chooser_.size());
}

dispatch::Lane* PoolMembers::lane_of(const Interpreter& interp) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < chooser_.size(); ++i) {
    if (&lanes_[i]->interpreter() == &interp) return lanes_[i];
  }
  return nullptr;
}

}  // namespace manypy
