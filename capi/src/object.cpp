// manypy_object: replicated objects, and per-call options.
#include "handles.h"

namespace {

const manypy::CallOptions kDefaultOptions;

const manypy::CallOptions& options_of(const manypy_call_options* options) {
  return options ? options->options : kDefaultOptions;
}

}  // namespace

extern "C" {

manypy_status* manypy_package_load_pickle(manypy_package* package, const char* module,
                                          const char* name, manypy_object** out_object) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(package);
    MANYPY_NOT_NULL(module);
    MANYPY_NOT_NULL(name);
    MANYPY_NOT_NULL(out_object);
    auto handle = std::make_unique<manypy_object>();
    handle->object = std::make_unique<manypy::ReplicatedObject>(package->package, module, name);
    *out_object = handle.release();
    return nullptr;
  });
}

void manypy_object_free(manypy_object* object) { delete object; }

manypy_call_options* manypy_call_options_new(void) {
  return new (std::nothrow) manypy_call_options();
}

void manypy_call_options_free(manypy_call_options* options) { delete options; }

manypy_status* manypy_call_options_set_interpreter(manypy_call_options* options, int32_t index) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(options);
    if (index < MANYPY_ANY_INTERPRETER) {
      return manypy::capi::make_status(MANYPY_ERR_OUT_OF_RANGE,
                                       std::string(api_function) + ": interpreter index " +
                                           std::to_string(index) + " is negative");
    }
    options->options.interpreter = index;
    return nullptr;
  });
}

manypy_status* manypy_object_call(manypy_object* object, const char* method,
                                  const manypy_value* args, const manypy_value* kwargs,
                                  const manypy_call_options* options, manypy_value** out_result) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(object);
    MANYPY_NOT_NULL(out_result);
    std::string method_name = method ? method : "";
    manypy::Value result = object->object->call(
        options_of(options), method ? &method_name : nullptr,
        args ? &manypy::capi::value_of(args) : nullptr,
        kwargs ? &manypy::capi::value_of(kwargs) : nullptr);
    *out_result = manypy::capi::new_value(std::move(result));
    return nullptr;
  });
}

manypy_status* manypy_object_getattr(manypy_object* object, const char* name,
                                     const manypy_call_options* options,
                                     manypy_value** out_value) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(object);
    MANYPY_NOT_NULL(name);
    MANYPY_NOT_NULL(out_value);
    *out_value = manypy::capi::new_value(object->object->getattr(options_of(options), name));
    return nullptr;
  });
}

manypy_status* manypy_object_hasattr(manypy_object* object, const char* name, int* out_has) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(object);
    MANYPY_NOT_NULL(name);
    MANYPY_NOT_NULL(out_has);
    *out_has = object->object->hasattr(name) ? 1 : 0;
    return nullptr;
  });
}

}  // extern "C"
