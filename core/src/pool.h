// A pool: interpreters leased from the process-wide set, and the choice of
// which one serves each call.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "archive_trust.h"
#include "call_options.h"
#include "interpreter.h"

namespace manypy {

struct PoolOptions {
  size_t interpreters = 1;
  LeaseSettings lease;
  ThreadMode thread_mode = ThreadMode::kDirect;
  ArchiveTrust trust;
  // How long a stopped call's clean-up may run (call_stop.h).
  int64_t stop_grace_ns = CallStop::kDefaultGraceNs;
};

class Pool {
 public:
  static constexpr int kAnyInterpreter = -1;

  explicit Pool(const PoolOptions& options);  // throws Error
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
  // Waits for calls in flight, then gives the interpreters back.
  ~Pool();

  size_t size() const { return slots_.size(); }

  void exec(int interpreter, const std::string& source);
  void exec_all(const std::string& source);
  Value eval(int interpreter, const std::string& expression);
  // The same as an object call takes its options: the interpreter, the
  // context operator callbacks report, and the deadline or cancel token
  // that stops the code (call_stop.h).
  void exec(const CallOptions& options, const std::string& source);
  Value eval(const CallOptions& options, const std::string& expression);

  ThreadMode mode() const { return mode_; }
  // Which archives packages of this pool may come from.
  const ArchiveTrust& trust() const { return trust_; }
  int64_t stop_grace_ns() const { return stop_grace_ns_; }

  // Throws Error(kInterpreterBroken) saying why interpreter `index` cannot
  // serve (it was retired), or kOutOfRange for a bad index.
  void check_interpreter(int index) const;

  // Runs fn(Interpreter&) on interpreter `interpreter` of the pool (or a free
  // or least loaded one for kAnyInterpreter), holding a unit of its load. An
  // Error from fn gets the pool index put before its message.
  template <typename Fn>
  auto with_interpreter(int interpreter, Fn&& fn) {
    Slot& slot = pick(interpreter);
    Lease lease(*this, slot);
    try {
      return fn(*slot.interp);
    } catch (const Error& e) {
      throw e.prefixed("interpreter " + std::to_string(index_of(slot)) + ": ");
    }
  }

  // Every interpreter of the pool, for work that must reach all of them.
  std::vector<Interpreter*> interpreters() const;

  // Calls in flight on interpreter `index` right now (for tests and stats).
  int load(size_t index) const { return slots_.at(index)->load.load(); }

 private:
  struct Slot {
    Interpreter* interp;
    std::atomic<int> load{0};
  };
  // Holds one unit of load on a slot for the duration of one call.
  class Lease {
   public:
    Lease(Pool& pool, Slot& slot) : pool_(pool), slot_(slot) {}
    ~Lease();

   private:
    Pool& pool_;
    Slot& slot_;
  };

  Slot& pick(int interpreter);
  void check_index(int interpreter) const;  // throws kOutOfRange
  size_t index_of(const Slot& slot) const;

  ThreadMode mode_;
  ArchiveTrust trust_;
  int64_t stop_grace_ns_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::atomic<unsigned> next_{0};
  std::mutex idle_mu_;
  std::condition_variable idle_cv_;
  std::atomic<int> in_flight_{0};
};

}  // namespace manypy
