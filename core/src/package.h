// A torch.package archive loaded into a pool, opened lazily in each of the
// pool's interpreters.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "archive.h"
#include "once_per_interpreter.h"
#include "pool.h"

namespace manypy {

class Package {
 public:
  // Checks that the archive is a torch.package (Error kNotAPackage if not).
  Package(std::shared_ptr<Pool> pool, std::shared_ptr<Archive> archive);
  ~Package();
  Package(const Package&) = delete;
  Package& operator=(const Package&) = delete;

  uint64_t id() const { return id_; }
  Pool& pool() const { return *pool_; }
  const Archive& archive() const { return *archive_; }

  // Opens the package in `interp` (once; later calls return at once). Opens
  // in different interpreters run in parallel. `stop` (nullptr: none)
  // bounds it, when a call needs it.
  void ensure_open(Interpreter& interp, CallStop* stop);

 private:
  const uint64_t id_;
  std::shared_ptr<Pool> pool_;
  std::shared_ptr<Archive> archive_;
  std::optional<Sha256> digest_;  // what the pool's trust checked, if it checks
  OncePerInterpreter opened_;
};

}  // namespace manypy
