// The process-wide set of interpreters that pools lease from.
#pragma once

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

  // Leases `count` idle interpreters, starting new ones (in parallel) when
  // too few are idle, and begins a lease on each with `settings`. All or
  // nothing: on failure whatever was leased is given back, and the Error
  // says why. Thread safe.
  std::vector<Interpreter*> lease(size_t count, const LeaseSettings& settings);

  // Ends the lease on each interpreter and makes it idle again; one whose
  // clean-up fails is never leased again. Never throws. Thread safe.
  void give_back(const std::vector<Interpreter*>& interpreters) noexcept;

 private:
  InterpreterSet() = default;
  std::mutex mu_;  // guards the two vectors, and serializes starts
  std::vector<std::unique_ptr<Interpreter>> all_;
  std::vector<bool> idle_;
  // Once a start has failed for want of static TLS, no other is tried: each
  // failed load risks glibc's own consistency (docs/isolation.md).
  std::optional<Error> static_tls_failure_;
};

}  // namespace manypy
