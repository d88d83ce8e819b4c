// manypy_aoti_module: AOTInductor packages (.pt2) with libtorch in the host,
// and the host trust every host load without a trust of its own checks.
#include "handles.h"
#include "runtime.h"

namespace {

const manypy::ArchiveTrust* trust_of(const manypy_archive_trust* trust) {
  return trust ? &trust->trust : nullptr;
}

}  // namespace

extern "C" {

manypy_status* manypy_aoti_load_file(const char* path, const manypy_archive_trust* trust,
                                     manypy_aoti_module** out_module) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_PATH(path);
    MANYPY_NOT_NULL(out_module);
    auto handle = std::make_unique<manypy_aoti_module>();
    handle->module = manypy::AotiModule::load_file(path, trust_of(trust));
    *out_module = handle.release();
    return nullptr;
  });
}

manypy_status* manypy_aoti_load_bytes(const void* data, size_t size,
                                      const manypy_archive_trust* trust,
                                      manypy_aoti_module** out_module) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(data);
    MANYPY_NOT_NULL(out_module);
    auto handle = std::make_unique<manypy_aoti_module>();
    handle->module = manypy::AotiModule::load_bytes(data, size, trust_of(trust));
    *out_module = handle.release();
    return nullptr;
  });
}

void manypy_aoti_free(manypy_aoti_module* module) { delete module; }

manypy_status* manypy_aoti_call(manypy_aoti_module* module, const manypy_value* args,
                                const manypy_value* kwargs, const manypy_call_options* options,
                                manypy_value** out_result) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(module);
    MANYPY_NOT_NULL(out_result);
    manypy::Value result = module->module->call(args ? &manypy::capi::value_of(args) : nullptr,
                                                kwargs ? &manypy::capi::value_of(kwargs) : nullptr,
                                                manypy::capi::options_of(options));
    *out_result = manypy::capi::new_value(std::move(result));
    return nullptr;
  });
}

manypy_status* manypy_aoti_call_async(manypy_aoti_module* module, const manypy_value* args,
                                      const manypy_value* kwargs,
                                      const manypy_call_options* options, manypy_call_done_fn done,
                                      void* user_data) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(module);
    MANYPY_NOT_NULL(done);
    manypy::AotiModule::call_async(module->module, args ? &manypy::capi::value_of(args) : nullptr,
                                   kwargs ? &manypy::capi::value_of(kwargs) : nullptr,
                                   manypy::capi::options_of(options),
                                   manypy::capi::completion_of(done, user_data));
    return nullptr;
  });
}

manypy_status* manypy_aoti_metadata(const manypy_aoti_module* module, manypy_value** out_dict) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(module);
    MANYPY_NOT_NULL(out_dict);
    *out_dict = manypy::capi::new_value(module->module->metadata());
    return nullptr;
  });
}

manypy_status* manypy_set_host_archive_trust(const manypy_archive_trust* trust) {
  return manypy::capi::fence(__func__, [&](const char*) -> manypy_status* {
    manypy::set_host_archive_trust(
        trust ? std::make_shared<const manypy::ArchiveTrust>(trust->trust) : nullptr);
    return nullptr;
  });
}

}  // extern "C"
