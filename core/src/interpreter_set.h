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
#include "isolation/key_bands.h"
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

  // The most interpreters the process can hold (key bands, namespaces).
  size_t capacity() const;
  // Interpreters created so far (started, starting or broken). Lock-free.
  size_t size() const { return size_.load(std::memory_order_acquire); }

  // Leases `count` idle interpreters that `trust` trusts with what they ran
  // before (TrustHistory), starting new ones (in parallel) when too few
  // are, and begins a lease on each with `settings`. All or nothing: on
  // failure whatever was leased is given back, and the Error says why.
  // Thread safe; `trust`'s verifier may be called, under the set's lock.
  // Each interpreter comes with its lane: the threads that run its calls.
  std::vector<dispatch::Lane*> lease(size_t count, const LeaseSettings& settings,
                                     const ArchiveTrust& trust);

  // Ends the lease on each interpreter and makes it idle again; one whose
  // clean-up fails is never leased again. Never throws. Thread safe.
  void give_back(const std::vector<dispatch::Lane*>& lanes) noexcept;

 private:
  // The pthread-key plan, made at the first need: making it claims most of
  // the host libc's keys, which a process that never leases an interpreter
  // (TorchScript on the host alone) keeps for itself.
  const isolation::KeyBands& key_bands() const;
  // Makes a started interpreter take part in the operator libraries and
  // callbacks registered before it started; retires it if it cannot.
  void join(Interpreter& interp);
  // Starts `missing` new interpreters for a lease (their slots already
  // reserved) without holding mu_; returns those begun.
  std::vector<dispatch::Lane*> start(size_t missing);

  const HostServices host_;
  OperatorLibraries& libraries_;
  OperatorCallbacks& callbacks_;
  mutable std::once_flag key_bands_made_;
  mutable std::unique_ptr<isolation::KeyBands> key_bands_;

  std::mutex mu_;  // guards the members below; never held across a start
  std::vector<std::unique_ptr<dispatch::Lane>> all_;
  std::vector<bool> idle_;
  size_t reserved_ = 0;  // slots promised to leases whose starts are under way
  std::atomic<size_t> size_{0};  // all_.size(), readable without mu_
  // Serializes starts one at a time when static TLS may run out.
  std::mutex sequential_start_mu_;
  // Once a start has failed for want of static TLS, no other is tried: each
  // failed load risks glibc's own consistency (docs/isolation.md).
  std::optional<Error> static_tls_failure_;
};

}  // namespace manypy
