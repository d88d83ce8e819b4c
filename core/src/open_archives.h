// The archives of the open packages, by package id: where an interpreter
// unpickling a package reads its tensor records (mpi_host_api's
// package_record). One per process, the Runtime's (runtime.h).
#pragma once

#include <dlpack/dlpack.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "archive.h"

namespace manypy {

class OpenArchives {
 public:
  OpenArchives() = default;
  OpenArchives(const OpenArchives&) = delete;
  OpenArchives& operator=(const OpenArchives&) = delete;

  // A package id no other package of the process has. Thread safe.
  uint64_t new_id() { return next_id_.fetch_add(1, std::memory_order_relaxed); }
  // `archive` is readable by `package_id` until remove(package_id), or
  // until the archive is gone (it is held weakly). Thread safe.
  void add(uint64_t package_id, const std::shared_ptr<Archive>& archive);
  void remove(uint64_t package_id) noexcept;

  // mpi_host_api.package_record: a view of `record`'s first `nbytes` bytes
  // in package `package_id`'s archive. Called by interpreters, from C, with
  // their GIL held: returns an MPI_* code, with the message in `error`, and
  // never throws.
  int read_record(uint64_t package_id, const char* record, uint64_t nbytes, DLManagedTensor** out,
                  char* error, size_t error_size) noexcept;

 private:
  std::mutex mu_;
  std::map<uint64_t, std::weak_ptr<Archive>> archives_;
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace manypy
