// A pool: interpreters leased from the process-wide set, and the choice of
// which one serves each call.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "interpreter.h"

namespace manypy {

struct PoolOptions {
  size_t interpreters = 1;
  LeaseSettings lease;
  ThreadMode thread_mode = ThreadMode::kDirect;
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

  // Calls in flight on interpreter `index` right now (for tests and stats).
  int load(size_t index) const { return slots_.at(index)->load.load(); }

 private:
  struct Slot {
    Interpreter* interp;
    std::atomic<int> load{0};
  };
  class Lease;  // RAII: one call's hold on a slot

  Slot& pick(int interpreter);
  template <typename Fn>
  auto with_interpreter(int interpreter, Fn&& fn);

  ThreadMode mode_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::atomic<unsigned> next_{0};
  std::mutex idle_mu_;
  std::condition_variable idle_cv_;
  std::atomic<int> in_flight_{0};
};

}  // namespace manypy
