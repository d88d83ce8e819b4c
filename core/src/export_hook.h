// The process-wide export hook: files added to every archive written in the
// process, by the C API (TorchScript saved on the host) and by Python in any
// interpreter (torch.jit.save, torch.package's PackageExporter); the seed's
// SetExportModuleExtraFilesHook producer_info.json example.
#pragma once

#include <cstddef>
#include <functional>

#include "value.h"

namespace manypy::export_hook {

// Returns a dict of name -> bytes or string; anything else adds nothing.
using Hook = std::function<Value()>;

// Replaces the hook (an empty function removes it). Thread safe.
void set(Hook hook);

// Calls the hook and add(ctx, name, data, size) for each file it returns.
// Thread safe; never throws (a failing hook adds nothing).
void collect(void (*add)(void* ctx, const char* name, const void* data, size_t size),
             void* ctx) noexcept;

}  // namespace manypy::export_hook
