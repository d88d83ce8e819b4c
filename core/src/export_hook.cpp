#include "export_hook.h"

#include <torch/csrc/jit/serialization/export.h>

#include <mutex>

namespace manypy::export_hook {

namespace {

struct Registry {
  std::mutex mu;
  Hook hook;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: see api_usage.cpp
  return *r;
}

void add_to_map(void* ctx, const char* name, const void* data, size_t size) {
  (*static_cast<torch::jit::ExtraFilesMap*>(ctx))[name] =
      std::string(static_cast<const char*>(data), size);
}

// TorchScript saved by the host's own libtorch gets the files too.
const bool g_host_hook_installed = [] {
  torch::jit::SetExportModuleExtraFilesHook([](const torch::jit::Module&) {
    torch::jit::ExtraFilesMap files;
    collect(add_to_map, &files);
    return files;
  });
  return true;
}();

}  // namespace

void set(Hook hook) {
  Registry& r = registry();
  Hook old;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    old = std::move(r.hook);
    r.hook = std::move(hook);
  }
  // `old` (and the user data it owns) is released here, outside the lock.
}

void collect(void (*add)(void* ctx, const char* name, const void* data, size_t size),
             void* ctx) noexcept {
  try {
    Registry& r = registry();
    Value files;
    {
      std::lock_guard<std::mutex> lock(r.mu);
      if (!r.hook) return;
      files = r.hook();
    }
    if (files.kind != ValueKind::kDict) return;
    for (size_t k = 0; k < files.items.size(); ++k) {
      const Value& file = files.items[k];
      if (file.kind == ValueKind::kBytes || file.kind == ValueKind::kString) {
        add(ctx, files.keys[k].c_str(), file.s.data(), file.s.size());
      }
    }
  } catch (...) {
    // A hook that fails adds nothing; saving goes on.
  }
}

}  // namespace manypy::export_hook
