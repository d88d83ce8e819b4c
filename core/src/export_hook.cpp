#include "export_hook.h"

#include <torch/csrc/jit/serialization/export.h>

namespace manypy {

namespace {

void add_to_map(void* ctx, const char* name, const void* data, size_t size) {
  (*static_cast<torch::jit::ExtraFilesMap*>(ctx))[name] =
      std::string(static_cast<const char*>(data), size);
}

}  // namespace

ExportHook::ExportHook() {
  torch::jit::SetExportModuleExtraFilesHook([this](const torch::jit::Module&) {
    torch::jit::ExtraFilesMap files;
    collect(add_to_map, &files);
    return files;
  });
}

void ExportHook::set(Hook hook) {
  Hook old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    old = std::move(hook_);
    hook_ = std::move(hook);
  }
  // `old` (and the user data it owns) is released here, outside the lock.
}

void ExportHook::collect(AddFn add, void* ctx) noexcept {
  try {
    Value files;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!hook_) return;
      files = hook_();
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

void ExportHook::add_to(ExtraFiles* files) noexcept {
  collect(
      [](void* ctx, const char* name, const void* data, size_t size) {
        auto& list = *static_cast<ExtraFiles*>(ctx);
        for (const auto& file : list) {
          if (file.first == name) return;
        }
        try {
          list.emplace_back(name, std::string(static_cast<const char*>(data), size));
        } catch (...) {
          // Out of memory: the file is left out, as for a failing hook.
        }
      },
      files);
}

}  // namespace manypy
