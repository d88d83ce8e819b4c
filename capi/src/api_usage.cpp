// API usage logging through the C API.
#include "handles.h"
#include "runtime.h"

extern "C" {

manypy_status* manypy_set_api_usage_handler(manypy_api_usage_fn handler, void* user_data,
                                            void (*free_user_data)(void*)) {
  return manypy::capi::fence(__func__, [&](const char*) -> manypy_status* {
    manypy::Runtime::get().api_usage().set_handler(handler, user_data, free_user_data);
    return nullptr;
  });
}

manypy_status* manypy_log_api_usage(const char* key) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(key);
    MANYPY_UTF8(key);
    if (*key == '\0') return manypy::capi::invalid_argument(api_function, "key must not be empty");
    manypy::Runtime::get().api_usage().log(key);
    return nullptr;
  });
}

}  // extern "C"
