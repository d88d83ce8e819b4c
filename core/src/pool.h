// A pool: interpreters leased from the process-wide set, and the dispatcher
// that admits each call and runs it on one of them (dispatch/).
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "archive_trust.h"
#include "call_options.h"
#include "dispatch/dispatcher.h"
#include "interpreter.h"
#include "pool_members.h"
#include "request_metrics.h"

namespace manypy {

struct PoolOptions {
  size_t interpreters = 1;
  LeaseSettings lease;
  ThreadMode thread_mode = ThreadMode::kDirect;
  ArchiveTrust trust;
  // How long a stopped call's clean-up may run (call_stop.h).
  int64_t stop_grace_ns = CallStop::kDefaultGraceNs;
  // The most calls that may wait for an interpreter (0: no limit).
  size_t queue_limit = 0;
  // Return from the constructor once one interpreter serves; the others
  // come up in the background (pool_members.h).
  bool serve_early = false;
  // Growth on long waits: up to `max_interpreters` (0: `interpreters`),
  // when a call waited longer than `grow_after_ns`.
  size_t max_interpreters = 0;
  int64_t grow_after_ns = 20 * 1000 * 1000;
  std::function<void(int index, const Error& why)> on_interpreter_failed;
  // The `pool` label of its metrics ("": none).
  std::string name;
};

// A pool's health (manypy_pool_stats): the gauges its metrics expose, the
// members in all, and the calls completed by code.
struct PoolStats : PoolGauges {
  size_t interpreters = 0;
  std::array<uint64_t, kCodeSlots> completed{};
};

// What a drain saw (manypy_pool_drain).
struct DrainResult {
  size_t finished = 0, cancelled = 0;
};

class Pool {
 public:
  static constexpr int kAnyInterpreter = dispatch::Chooser::kAnyInterpreter;

  explicit Pool(const PoolOptions& options);  // throws Error
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
  // Waits for calls in flight, then gives the interpreters back.
  ~Pool();

  // Members now: it changes with resize() and growth.
  size_t size() const { return dispatcher_.chooser().size(); }
  // Grows or shrinks to `interpreters` (PoolMembers::resize). Throws Error;
  // kDraining while draining.
  void resize(size_t interpreters);
  PoolStats stats() const;
  // Refuses new calls from now on; waits for those in flight until
  // `deadline_ns` (absolute, CLOCK_MONOTONIC; 0: none), then cancels the
  // rest and waits for them for twice the stop grace.
  DrainResult drain(int64_t deadline_ns);
  std::string prometheus_text() const;
  const RequestMetrics& metrics() const { return dispatcher_.metrics(); }

  void exec(int interpreter, const std::string& source);
  void exec_all(const std::string& source);
  Value eval(int interpreter, const std::string& expression);
  // The same as an object call takes its options: the interpreter, the
  // context operator callbacks report, and the deadline or cancel token
  // that stops the code (call_stop.h).
  void exec(const CallOptions& options, const std::string& source);
  Value eval(const CallOptions& options, const std::string& expression);

  ThreadMode mode() const { return dispatcher_.mode(); }
  // Which archives packages of this pool may come from.
  const ArchiveTrust& trust() const { return trust_; }
  dispatch::Dispatcher& dispatcher() { return dispatcher_; }

  // Throws Error(kInterpreterBroken) saying why interpreter `index` cannot
  // serve (it was retired), or kOutOfRange for a bad index.
  void check_interpreter(int index) const;

  // Runs a clean-up step (closing a package, dropping an object) in
  // `interp`, one of the pool's, on its home thread, and waits for it.
  // Never throws: clean-up has nothing a caller could act on.
  void clean_up(Interpreter& interp, const std::function<void(Interpreter&)>& step) noexcept;

  // Every interpreter of the pool now, for work that must reach all of them.
  std::vector<Interpreter*> interpreters() const { return members_.interpreters(); }

  // Calls in flight on interpreter `index` right now (for tests and stats).
  int load(size_t index) const { return dispatcher_.chooser().load(index); }
  // Calls waiting for an interpreter, and calls admitted and not complete.
  size_t queued() const { return dispatcher_.chooser().queued(); }
  size_t in_flight() const { return dispatcher_.chooser().in_flight(); }

 private:
  ArchiveTrust trust_;
  const std::string name_;
  dispatch::Dispatcher dispatcher_;
  // After the dispatcher: its members are given back before the chooser
  // that knows them goes.
  PoolMembers members_;
};

}  // namespace manypy
