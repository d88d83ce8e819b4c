// manypy_script_module: TorchScript with libtorch in the host.
#include "handles.h"
#include "runtime.h"

namespace {

const manypy::ArchiveTrust* trust_of(const manypy_archive_trust* trust) {
  return trust ? &trust->trust : nullptr;
}

manypy_status* load_file(const char* function, const char* path, const manypy_archive_trust* trust,
                         manypy_script_module** out_module) {
  return manypy::capi::fence(function, [&](const char* api_function) -> manypy_status* {
    MANYPY_PATH(path);
    MANYPY_NOT_NULL(out_module);
    auto handle = std::make_unique<manypy_script_module>();
    handle->module = manypy::ScriptModule::load_file(path, trust_of(trust));
    *out_module = handle.release();
    return nullptr;
  });
}

manypy_status* load_bytes(const char* function, const void* data, size_t size,
                          const manypy_archive_trust* trust, manypy_script_module** out_module) {
  return manypy::capi::fence(function, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(data);
    MANYPY_NOT_NULL(out_module);
    auto handle = std::make_unique<manypy_script_module>();
    handle->module = manypy::ScriptModule::load_bytes(data, size, trust_of(trust));
    *out_module = handle.release();
    return nullptr;
  });
}

}  // namespace

extern "C" {

manypy_status* manypy_script_load_file_trusted(const char* path, const manypy_archive_trust* trust,
                                               manypy_script_module** out_module) {
  return load_file(__func__, path, trust, out_module);
}

manypy_status* manypy_script_load_bytes_trusted(const void* data, size_t size,
                                                const manypy_archive_trust* trust,
                                                manypy_script_module** out_module) {
  return load_bytes(__func__, data, size, trust, out_module);
}

manypy_status* manypy_script_load_file(const char* path, manypy_script_module** out_module) {
  return load_file(__func__, path, nullptr, out_module);
}

manypy_status* manypy_script_load_bytes(const void* data, size_t size,
                                        manypy_script_module** out_module) {
  return load_bytes(__func__, data, size, nullptr, out_module);
}

void manypy_script_free(manypy_script_module* module) { delete module; }

manypy_status* manypy_script_call(manypy_script_module* module, const char* method,
                                  const manypy_value* args, const manypy_value* kwargs,
                                  const manypy_call_options* options, manypy_value** out_result) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(module);
    MANYPY_NOT_NULL(out_result);
    MANYPY_UTF8(method);
    std::string method_name = method ? method : "";
    manypy::Value result = module->module->call(
        method ? &method_name : nullptr, args ? &manypy::capi::value_of(args) : nullptr,
        kwargs ? &manypy::capi::value_of(kwargs) : nullptr, manypy::capi::options_of(options));
    *out_result = manypy::capi::new_value(std::move(result));
    return nullptr;
  });
}

manypy_status* manypy_script_call_async(manypy_script_module* module, const char* method,
                                        const manypy_value* args, const manypy_value* kwargs,
                                        const manypy_call_options* options,
                                        manypy_call_done_fn done, void* user_data) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(module);
    MANYPY_NOT_NULL(done);
    MANYPY_UTF8(method);
    std::string method_name = method ? method : "";
    manypy::ScriptModule::call_async(module->module, method ? &method_name : nullptr,
                                     args ? &manypy::capi::value_of(args) : nullptr,
                                     kwargs ? &manypy::capi::value_of(kwargs) : nullptr,
                                     manypy::capi::options_of(options),
                                     manypy::capi::completion_of(done, user_data));
    return nullptr;
  });
}

manypy_status* manypy_script_set_intra_op_threads(int threads) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    if (threads < 1) {
      return manypy::capi::make_status(
          MANYPY_ERR_OUT_OF_RANGE,
          std::string(api_function) + ": threads must be >= 1, not " + std::to_string(threads));
    }
    manypy::set_host_intra_op_threads(threads);
    return nullptr;
  });
}

}  // extern "C"

extern "C" {

manypy_status* manypy_load_operator_library(const char* path) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_PATH(path);
    manypy::Runtime::get().operator_libraries().load(path);
    return nullptr;
  });
}

manypy_status* manypy_script_save_file(const manypy_script_module* module, const char* path,
                                       const manypy_value* extra_files) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(module);
    MANYPY_PATH(path);
    module->module->save(path, extra_files ? &manypy::capi::value_of(extra_files) : nullptr);
    return nullptr;
  });
}

}  // extern "C"
