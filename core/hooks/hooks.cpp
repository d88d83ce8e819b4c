// libmanypy_hooks.so: loaded into every interpreter's namespace (and linked
// into nothing else), it reaches that namespace's copy of libtorch.
#include <c10/util/Logging.h>
#include <torch/csrc/jit/serialization/export.h>

#include "exported_tensors.h"
#include "hooks_api.h"
#include "op_callbacks.h"

namespace {

void set_api_usage_logger(void (*log)(const char* key)) {
  c10::SetAPIUsageLogger([log](const std::string& key) {
    if (!manypy::hooks::in_forked_child()) log(key.c_str());
  });
}

using Collect = void (*)(void (*add)(void*, const char*, const void*, size_t), void*);

void add_file(void* ctx, const char* name, const void* data, size_t size) {
  (*static_cast<torch::jit::ExtraFilesMap*>(ctx))[name] =
      std::string(static_cast<const char*>(data), size);
}

void set_export_files(Collect collect) {
  torch::jit::SetExportModuleExtraFilesHook([collect](const torch::jit::Module&) {
    torch::jit::ExtraFilesMap files;
    if (!manypy::hooks::in_forked_child()) collect(add_file, &files);
    return files;
  });
}

int add_op_callbacks(uint64_t id, double prob, int needs_inputs, int32_t interpreter,
                     mph_emit_fn emit) {
  return manypy::hooks::add_op_callbacks(id, prob, needs_inputs, interpreter, emit) ? 0 : -1;
}

const manypy_hooks_api kApi = {
    MANYPY_HOOKS_API_VERSION,
    sizeof(manypy_hooks_api),
    set_api_usage_logger,
    set_export_files,
    add_op_callbacks,
    manypy::hooks::remove_op_callbacks,
    manypy::hooks::push_context,
    manypy::hooks::pop_context,
    manypy::hooks::own_exported_tensor,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const manypy_hooks_api* manypy_hooks_get_api(
    uint32_t version) {
  return version == MANYPY_HOOKS_API_VERSION ? &kApi : nullptr;
}
