// manypy_object: replicated objects, and per-call options.
#include "handles.h"

namespace manypy::capi {

const CallOptions& options_of(const manypy_call_options* options) {
  static const CallOptions defaults;
  return options ? options->options : defaults;
}

}  // namespace manypy::capi

using manypy::capi::options_of;

namespace {

// manypy_call_options_set_timeout and _set_deadline: `ns` (>= 0; 0: none)
// into `bound`, and the other bound cleared (one replaces the other).
manypy_status* set_bound(const char* function, manypy_call_options* options, const char* what,
                         int64_t ns, int64_t manypy::CallLimits::*bound) {
  return manypy::capi::fence(function, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(options);
    if (ns < 0) {
      return manypy::capi::make_status(MANYPY_ERR_OUT_OF_RANGE,
                                       std::string(api_function) + ": " + what +
                                           " must be >= 0 (0: none), not " + std::to_string(ns));
    }
    manypy::CallLimits& limits = options->options.limits;
    limits.timeout_ns = limits.deadline_ns = 0;
    limits.*bound = ns;
    return nullptr;
  });
}

}  // namespace

extern "C" {

manypy_status* manypy_package_load_pickle(manypy_package* package, const char* module,
                                          const char* name, manypy_object** out_object) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(package);
    MANYPY_NOT_NULL(module);
    MANYPY_NOT_NULL(name);
    MANYPY_UTF8(module);
    MANYPY_UTF8(name);
    MANYPY_NOT_NULL(out_object);
    auto handle = std::make_unique<manypy_object>();
    handle->object = manypy::ReplicatedObject::load(package->package, module, name);
    *out_object = handle.release();
    return nullptr;
  });
}

void manypy_object_free(manypy_object* object) { delete object; }

manypy_status* manypy_object_share(const manypy_object* object, manypy_object** out_object) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(object);
    MANYPY_NOT_NULL(out_object);
    *out_object = new manypy_object{object->object};
    return nullptr;
  });
}

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

manypy_status* manypy_call_options_set_timeout(manypy_call_options* options, int64_t timeout_ns) {
  return set_bound(__func__, options, "timeout_ns", timeout_ns, &manypy::CallLimits::timeout_ns);
}

manypy_status* manypy_call_options_set_deadline(manypy_call_options* options, int64_t deadline_ns) {
  return set_bound(__func__, options, "deadline_ns", deadline_ns, &manypy::CallLimits::deadline_ns);
}

manypy_status* manypy_call_options_set_cancel_token(manypy_call_options* options,
                                                    manypy_cancel_token* token) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(options);
    options->options.limits.token = token ? token->token : nullptr;
    return nullptr;
  });
}

manypy_cancel_token* manypy_cancel_token_new(void) {
  try {
    auto handle = std::make_unique<manypy_cancel_token>();
    handle->token = std::make_shared<manypy::CancelToken>();
    return handle.release();
  } catch (...) {
    return nullptr;
  }
}

void manypy_cancel_token_cancel(manypy_cancel_token* token) {
  if (token != nullptr) token->token->cancel();
}

int manypy_cancel_token_is_cancelled(const manypy_cancel_token* token) {
  return token != nullptr && token->token->cancelled() ? 1 : 0;
}

void manypy_cancel_token_free(manypy_cancel_token* token) { delete token; }

int64_t manypy_monotonic_ns(void) { return manypy::monotonic_ns(); }

manypy_status* manypy_object_call(manypy_object* object, const char* method,
                                  const manypy_value* args, const manypy_value* kwargs,
                                  const manypy_call_options* options, manypy_value** out_result) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(object);
    MANYPY_NOT_NULL(out_result);
    MANYPY_UTF8(method);
    std::string method_name = method ? method : "";
    manypy::Value result =
        object->object->call(options_of(options), method ? &method_name : nullptr,
                             args ? &manypy::capi::value_of(args) : nullptr,
                             kwargs ? &manypy::capi::value_of(kwargs) : nullptr);
    *out_result = manypy::capi::new_value(std::move(result));
    return nullptr;
  });
}

manypy_status* manypy_object_call_async(manypy_object* object, const char* method,
                                        const manypy_value* args, const manypy_value* kwargs,
                                        const manypy_call_options* options,
                                        manypy_call_done_fn done, void* user_data) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(object);
    MANYPY_NOT_NULL(done);
    MANYPY_UTF8(method);
    std::string method_name = method ? method : "";
    object->object->call_async(options_of(options), method ? &method_name : nullptr,
                               args ? &manypy::capi::value_of(args) : nullptr,
                               kwargs ? &manypy::capi::value_of(kwargs) : nullptr,
                               manypy::capi::completion_of(done, user_data));
    return nullptr;
  });
}

manypy_status* manypy_object_getattr(manypy_object* object, const char* name,
                                     const manypy_call_options* options, manypy_value** out_value) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(object);
    MANYPY_NOT_NULL(name);
    MANYPY_UTF8(name);
    MANYPY_NOT_NULL(out_value);
    *out_value = manypy::capi::new_value(object->object->getattr(options_of(options), name));
    return nullptr;
  });
}

manypy_status* manypy_object_hasattr(manypy_object* object, const char* name, int* out_has) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(object);
    MANYPY_NOT_NULL(name);
    MANYPY_UTF8(name);
    MANYPY_NOT_NULL(out_has);
    *out_has = object->object->hasattr(name) ? 1 : 0;
    return nullptr;
  });
}

}  // extern "C"
