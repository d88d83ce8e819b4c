// libmanypy_hooks.so: loaded into every interpreter's namespace (and linked
// into nothing else), it reaches that namespace's copy of libtorch.
#include <c10/util/Logging.h>

#include "hooks_api.h"

namespace {

void set_api_usage_logger(void (*log)(const char* key)) {
  c10::SetAPIUsageLogger([log](const std::string& key) { log(key.c_str()); });
}

const manypy_hooks_api kApi = {
    MANYPY_HOOKS_API_VERSION,
    sizeof(manypy_hooks_api),
    set_api_usage_logger,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const manypy_hooks_api* manypy_hooks_get_api(
    uint32_t version) {
  return version == MANYPY_HOOKS_API_VERSION ? &kApi : nullptr;
}
