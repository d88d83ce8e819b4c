// The process-wide export hook: files added to every archive written in the
// process, by the C API (TorchScript saved on the host) and by Python in any
// interpreter (torch.jit.save, torch.package's PackageExporter); the seed's
// SetExportModuleExtraFilesHook producer_info.json example. One per
// process, the Runtime's (runtime.h).
#pragma once

#include <cstddef>
#include <functional>
#include <mutex>

#include "archive.h"
#include "value.h"

namespace manypy {

class ExportHook {
 public:
  // Returns a dict of name -> bytes or string; anything else adds nothing.
  using Hook = std::function<Value()>;
  using AddFn = void (*)(void* ctx, const char* name, const void* data, size_t size);

  // TorchScript saved by the host's own libtorch gets the files too, from
  // now on.
  ExportHook();
  ExportHook(const ExportHook&) = delete;
  ExportHook& operator=(const ExportHook&) = delete;

  // Replaces the hook (an empty function removes it). Thread safe.
  void set(Hook hook);

  // Calls the hook and add(ctx, name, data, size) for each file it returns.
  // Thread safe; never throws (a failing hook adds nothing).
  void collect(AddFn add, void* ctx) noexcept;
  // Appends the hook's files to `files`, except those whose names are
  // already there: the caller's files win. Never throws.
  void add_to(ExtraFiles* files) noexcept;

 private:
  std::mutex mu_;
  Hook hook_;
};

}  // namespace manypy
