// manypy_batcher: dynamic batching over an object's method.
#include "handles.h"

using manypy::capi::options_of;

namespace {

constexpr size_t kMaxBatch = 65536;
constexpr int64_t kMaxWaitUs = 60'000'000;

}  // namespace

extern "C" {

manypy_batcher_options* manypy_batcher_options_new(void) {
  return new (std::nothrow) manypy_batcher_options();
}

void manypy_batcher_options_free(manypy_batcher_options* options) { delete options; }

manypy_status* manypy_batcher_options_set_max_batch(manypy_batcher_options* options,
                                                    size_t max_batch) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(options);
    if (max_batch < 1 || max_batch > kMaxBatch) {
      return manypy::capi::make_status(MANYPY_ERR_OUT_OF_RANGE,
                                       std::string(api_function) + ": max_batch must be 1 to " +
                                           std::to_string(kMaxBatch) + ", not " +
                                           std::to_string(max_batch));
    }
    options->options.max_batch = max_batch;
    return nullptr;
  });
}

manypy_status* manypy_batcher_options_set_max_wait_us(manypy_batcher_options* options,
                                                      int64_t max_wait_us) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(options);
    if (max_wait_us < 0 || max_wait_us > kMaxWaitUs) {
      return manypy::capi::make_status(MANYPY_ERR_OUT_OF_RANGE,
                                       std::string(api_function) + ": max_wait_us must be 0 to " +
                                           std::to_string(kMaxWaitUs) + ", not " +
                                           std::to_string(max_wait_us));
    }
    options->options.max_wait_ns = max_wait_us * 1000;
    return nullptr;
  });
}

manypy_status* manypy_batcher_options_set_batch_dim(manypy_batcher_options* options,
                                                    int32_t batch_dim) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(options);
    if (batch_dim < 0) {
      return manypy::capi::make_status(
          MANYPY_ERR_OUT_OF_RANGE,
          std::string(api_function) + ": batch_dim must be >= 0, not " + std::to_string(batch_dim));
    }
    options->options.batch_dim = batch_dim;
    return nullptr;
  });
}

manypy_status* manypy_batcher_options_set_name(manypy_batcher_options* options, const char* name) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(options);
    MANYPY_NOT_NULL(name);
    MANYPY_UTF8(name);
    options->options.name = name;
    return nullptr;
  });
}

manypy_status* manypy_batcher_new(manypy_object* object, const char* method,
                                  const manypy_batcher_options* options,
                                  manypy_batcher** out_batcher) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(object);
    MANYPY_UTF8(method);
    MANYPY_NOT_NULL(out_batcher);
    std::string method_name = method ? method : "";
    auto handle = std::make_unique<manypy_batcher>();
    handle->batcher =
        std::make_unique<manypy::Batcher>(object->object, method ? &method_name : nullptr,
                                          options ? options->options : manypy::BatcherOptions{});
    *out_batcher = handle.release();
    return nullptr;
  });
}

void manypy_batcher_free(manypy_batcher* batcher) { delete batcher; }

manypy_status* manypy_batcher_call(manypy_batcher* batcher, const manypy_value* args,
                                   const manypy_value* kwargs, const manypy_call_options* options,
                                   manypy_value** out_result) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(batcher);
    MANYPY_NOT_NULL(out_result);
    manypy::Value result =
        batcher->batcher->call(options_of(options), args ? &manypy::capi::value_of(args) : nullptr,
                               kwargs ? &manypy::capi::value_of(kwargs) : nullptr);
    *out_result = manypy::capi::new_value(std::move(result));
    return nullptr;
  });
}

manypy_status* manypy_batcher_call_async(manypy_batcher* batcher, const manypy_value* args,
                                         const manypy_value* kwargs,
                                         const manypy_call_options* options,
                                         manypy_call_done_fn done, void* user_data) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(batcher);
    MANYPY_NOT_NULL(done);
    batcher->batcher->call_async(options_of(options),
                                 args ? &manypy::capi::value_of(args) : nullptr,
                                 kwargs ? &manypy::capi::value_of(kwargs) : nullptr,
                                 manypy::capi::completion_of(done, user_data));
    return nullptr;
  });
}

}  // extern "C"
