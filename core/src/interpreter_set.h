// The process-wide set of interpreters that pools lease from.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "interpreter.h"

namespace manypy {

class InterpreterSet {
 public:
  static InterpreterSet& instance();

  // The most interpreters the process can hold (key bands, namespaces).
  size_t capacity() const;
  // Interpreters created so far (started, starting or broken). Lock-free.
  size_t size() const { return size_.load(std::memory_order_acquire); }

  // Leases `count` idle interpreters that `trust` trusts with what they ran
  // before (TrustHistory), starting new ones (in parallel) when too few
  // are, and begins a lease on each with `settings`. All or nothing: on
  // failure whatever was leased is given back, and the Error says why.
  // Thread safe; `trust`'s verifier may be called, under the set's lock.
  std::vector<Interpreter*> lease(size_t count, const LeaseSettings& settings,
                                  const ArchiveTrust& trust);

  // Ends the lease on each interpreter and makes it idle again; one whose
  // clean-up fails is never leased again. Never throws. Thread safe.
  void give_back(const std::vector<Interpreter*>& interpreters) noexcept;

 private:
  InterpreterSet() = default;
  // Starts `missing` new interpreters for a lease (their slots already
  // reserved) without holding mu_; returns those begun.
  std::vector<Interpreter*> start(size_t missing);

  std::mutex mu_;  // guards the members below; never held across a start
  std::vector<std::unique_ptr<Interpreter>> all_;
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
