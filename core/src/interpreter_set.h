// The interpreters that pools lease from: started on demand, each joined to
// the process's operator libraries and callbacks, and kept for the life of
// the process. One per process, the Runtime's (runtime.h).
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "dispatch/lane.h"
#include "interpreter.h"
#include "isolation/namespace.h"
#include "operator_callbacks.h"
#include "operator_libraries.h"

namespace manypy {

class InterpreterSet {
 public:
  // Interpreters get `host`, and join `libraries` and `callbacks` once
  // started. The last two outlive the set.
  InterpreterSet(const HostServices& host, OperatorLibraries& libraries,
                 OperatorCallbacks& callbacks);
  InterpreterSet(const InterpreterSet&) = delete;
  InterpreterSet& operator=(const InterpreterSet&) = delete;

  // The most interpreters the process can hold: glibc's namespaces.
  size_t capacity() const;
  // Interpreters created so far (started, starting or broken). Lock-free.
  size_t size() const { return size_.load(std::memory_order_acquire); }

  // A lease's interpreter: an idle one, or a fresh one (made for the
  // lease, not started yet: start() starts it).
  struct Leased {
    dispatch::Lane* lane;
    bool fresh;
  };

  // Leases `count` interpreters: idle ones that `trust` trusts with what
  // they ran before (TrustHistory), and fresh ones for the rest. All or
  // nothing: throws Error (kOutOfRange, kResourceExhausted naming the
  // process's limit, a past static TLS failure) and leases none. Thread
  // safe; `trust`'s verifier may be called, under the set's lock. Each
  // interpreter comes with its lane: the threads that run its calls. The
  // caller brings each one up (bring_up) on its home thread.
  std::vector<Leased> lease(size_t count, const ArchiveTrust& trust);

  // Starts a fresh lane's interpreter on its home thread. Starts run in
  // parallel when static TLS was raised, and then this returns at once
  // unless `wait`; otherwise they run one at a time, process-wide, and
  // this waits. Once a start has failed for want of static TLS, later ones
  // are not tried: they fail with that error. Never throws: a failure is
  // the interpreter's (Interpreter::wait_started).
  void start(dispatch::Lane& lane, bool wait) noexcept;
  // Waits until a lane start() began has started or failed. Never throws:
  // the failure is the interpreter's.
  void start_settled(dispatch::Lane& lane) noexcept;
  // Whether starts run in parallel (static TLS was raised).
  bool parallel_starts() const;

  // Makes a leased interpreter ready for its pool, on its home thread,
  // after its start: a fresh one joins the operator libraries and
  // callbacks, and the lease begins with `settings`. Throws Error: the
  // start's failure, or the join's or the lease's (the interpreter is then
  // retired).
  void bring_up(Interpreter& interp, bool fresh, const LeaseSettings& settings);

  // Ends the lease on each interpreter and makes it idle again; one whose
  // clean-up fails (a setting that could not be put back) is retired, with
  // the reason, and never leased again. Never throws. Thread safe.
  void give_back(const std::vector<dispatch::Lane*>& lanes) noexcept;

 private:
  // Makes a started interpreter take part in the operator libraries and
  // callbacks registered before it started; retires it if it cannot.
  void join(Interpreter& interp);
  const HostServices host_;
  OperatorLibraries& libraries_;
  OperatorCallbacks& callbacks_;

  std::mutex mu_;  // guards the members below; never held across a start
  std::vector<std::unique_ptr<dispatch::Lane>> all_;
  std::vector<bool> idle_;
  std::atomic<size_t> size_{0};  // all_.size(), readable without mu_
  // Serializes starts one at a time when static TLS may run out.
  std::mutex sequential_start_mu_;
  // Once a start has failed for want of static TLS, no other is tried: each
  // failed load risks glibc's own consistency (docs/isolation.md).
  std::optional<Error> static_tls_failure_;
};

}  // namespace manypy
