// What the opaque C handles are, and the fence that keeps C++ exceptions
// from crossing the C ABI.
#pragma once

#include <atomic>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "aoti_module.h"
#include "batcher.h"
#include "error.h"
#include "manypy.h"
#include "package.h"
#include "pool.h"
#include "replicated_object.h"
#include "script_module.h"
#include "value.h"

struct manypy_status {
  manypy_code code;
  std::string message;
  std::string python_type;
  std::string traceback;
};

struct manypy_pool_options {
  manypy::PoolOptions options;
};

struct manypy_archive_trust {
  manypy::ArchiveTrust trust;
};

// Shared ownership: packages and objects keep their pool alive.
struct manypy_pool {
  std::shared_ptr<manypy::Pool> pool;
};

struct manypy_package {
  std::shared_ptr<manypy::Package> package;
};

// Shared ownership: asynchronous calls and batchers hold the object too.
struct manypy_object {
  std::shared_ptr<manypy::ReplicatedObject> object;
};

struct manypy_call_options {
  manypy::CallOptions options;
};

struct manypy_batcher_options {
  manypy::BatcherOptions options;
};

struct manypy_batcher {
  std::unique_ptr<manypy::Batcher> batcher;
};

// Shared ownership: call options that name a token keep it alive.
struct manypy_cancel_token {
  std::shared_ptr<manypy::CancelToken> token;
};

// The core's shared Tensor, which tensor values and interpreters hold too
// (so a value made from the handle shares it, and it outlives the handle
// while they use it), and the count of the caller's references to the
// handle itself (manypy_tensor_retain, manypy_tensor_release).
struct manypy_tensor {
  explicit manypy_tensor(std::shared_ptr<manypy::Tensor> t) : tensor(std::move(t)) {}
  const std::shared_ptr<manypy::Tensor> tensor;
  std::atomic<uint64_t> refs{1};
};

// Shared ownership: asynchronous calls hold the module until they complete.
struct manypy_script_module {
  std::shared_ptr<manypy::ScriptModule> module;
};

struct manypy_aoti_module {
  std::shared_ptr<manypy::AotiModule> module;
};

namespace manypy::capi {

// A manypy_value* is a manypy::Value* (the C type is never defined), so a
// container's items can be handed out as borrowed handles.
inline Value& value_of(manypy_value* handle) { return *reinterpret_cast<Value*>(handle); }
inline const Value& value_of(const manypy_value* handle) {
  return *reinterpret_cast<const Value*>(handle);
}
inline manypy_value* handle_of(Value* value) { return reinterpret_cast<manypy_value*>(value); }
inline const manypy_value* handle_of(const Value* value) {
  return reinterpret_cast<const manypy_value*>(value);
}

// Allocation of a status must not itself fail loudly: a static status stands
// in when memory is exhausted.
manypy_status* make_status(manypy_code code, std::string message, std::string python_type = {},
                           std::string traceback = {}) noexcept;

manypy_status* invalid_argument(const char* function, const char* what) noexcept;

// Well-formed UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing
// above U+10FFFF.
bool valid_utf8(const char* s, size_t n);

// A caller's user_data and its free_user_data, which runs exactly once:
// when the last holder of the shared_ptr lets go. If the holder cannot be
// made, the data is freed at once and bad_alloc thrown: either way the
// caller's free runs once, as every callback setter promises.
struct UserData {
  void* data;
  void (*free)(void*);
  ~UserData() {
    if (free) free(data);
  }
};
std::shared_ptr<UserData> own_user_data(void* data, void (*free_user_data)(void*));

// A malloc'ed copy of `s` for the caller to free(). Throws bad_alloc.
char* copy_string(const std::string& s);

// Wraps a core Value in a new caller-owned handle.
manypy_value* new_value(manypy::Value value);

// The options a NULL manypy_call_options* stands for.
const CallOptions& options_of(const manypy_call_options* options);

// An asynchronous call's completion as the core gives it, passed on to the
// caller's callback as a new value or status, which the callback owns.
dispatch::Done completion_of(manypy_call_done_fn done, void* user_data);

// Runs `body(function)`, which returns a manypy_status* (usually nullptr),
// and turns any exception it throws into a status. Every public entry point
// that can fail goes through here, passing its own name (__func__ inside the
// body would name the lambda) for the body's messages.
template <typename Body>
manypy_status* fence(const char* function, Body&& body) noexcept {
  try {
    return body(function);
  } catch (const Error& e) {
    // The core's argument checks do not know which entry point called them.
    std::string message = e.code() == Code::kInvalidArgument
                              ? std::string(function) + ": " + e.message()
                              : e.message();
    return make_status(static_cast<manypy_code>(e.code()), std::move(message), e.python_type(),
                       e.traceback());
  } catch (const std::bad_alloc&) {
    return make_status(MANYPY_ERR_RESOURCE_EXHAUSTED, "out of memory");
  } catch (const std::exception& e) {
    return make_status(MANYPY_ERR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return make_status(MANYPY_ERR_INTERNAL, "internal error: unknown exception");
  }
}

}  // namespace manypy::capi

// Inside a fence body whose parameter is `api_function`: fails the entry
// point with MANYPY_ERR_INVALID_ARGUMENT when `ptr` is NULL, e.g.
// "manypy_pool_eval: expression must not be NULL".
#define MANYPY_NOT_NULL(ptr)                                                         \
  do {                                                                               \
    if ((ptr) == nullptr) {                                                          \
      return manypy::capi::invalid_argument(api_function, #ptr " must not be NULL"); \
    }                                                                                \
  } while (0)

// The same for a path, which must also not be empty.
#define MANYPY_PATH(ptr)                                                              \
  do {                                                                                \
    MANYPY_NOT_NULL(ptr);                                                             \
    if (*(ptr) == '\0') {                                                             \
      return manypy::capi::invalid_argument(api_function, #ptr " must not be empty"); \
    }                                                                                 \
  } while (0)

// A name (module, record, method, attribute, key, id) that is not NULL must
// be valid UTF-8: Python would refuse it later, less clearly.
#define MANYPY_UTF8(ptr)                                                               \
  do {                                                                                 \
    if ((ptr) != nullptr && !manypy::capi::valid_utf8((ptr), std::strlen(ptr))) {      \
      return manypy::capi::invalid_argument(api_function, #ptr " is not valid UTF-8"); \
    }                                                                                  \
  } while (0)
