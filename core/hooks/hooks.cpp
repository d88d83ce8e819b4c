// libmanypy_hooks.so: loaded into every interpreter's namespace (and linked
// into nothing else), it reaches that namespace's copy of libtorch.
#include <c10/util/Logging.h>
#include <torch/csrc/jit/serialization/export.h>

#include "hooks_api.h"

namespace {

void set_api_usage_logger(void (*log)(const char* key)) {
  c10::SetAPIUsageLogger([log](const std::string& key) { log(key.c_str()); });
}

using Collect = void (*)(void (*add)(void*, const char*, const void*, size_t), void*);

void add_file(void* ctx, const char* name, const void* data, size_t size) {
  (*static_cast<torch::jit::ExtraFilesMap*>(ctx))[name] =
      std::string(static_cast<const char*>(data), size);
}

void set_export_files(Collect collect) {
  torch::jit::SetExportModuleExtraFilesHook([collect](const torch::jit::Module&) {
    torch::jit::ExtraFilesMap files;
    collect(add_file, &files);
    return files;
  });
}

const manypy_hooks_api kApi = {
    MANYPY_HOOKS_API_VERSION,
    sizeof(manypy_hooks_api),
    set_api_usage_logger,
    set_export_files,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const manypy_hooks_api* manypy_hooks_get_api(
    uint32_t version) {
  return version == MANYPY_HOOKS_API_VERSION ? &kApi : nullptr;
}
