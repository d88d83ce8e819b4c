// What the opaque C handles are, and the fence that keeps C++ exceptions
// from crossing the C ABI.
#pragma once

#include <memory>
#include <new>
#include <string>

#include "error.h"
#include "manypy.h"
#include "pool.h"
#include "value.h"

struct manypy_status {
  manypy_code code;
  std::string message;
  std::string python_type;
  std::string traceback;
};

struct manypy_value {
  manypy::Value value;
};

struct manypy_pool_options {
  manypy::PoolOptions options;
};

struct manypy_pool {
  std::unique_ptr<manypy::Pool> pool;
};

namespace manypy::capi {

// Allocation of a status must not itself fail loudly: a static status stands
// in when memory is exhausted.
manypy_status* make_status(manypy_code code, std::string message, std::string python_type = {},
                           std::string traceback = {}) noexcept;

manypy_status* invalid_argument(const char* function, const char* what) noexcept;

// Runs `body(function)`, which returns a manypy_status* (usually nullptr),
// and turns any exception it throws into a status. Every public entry point
// that can fail goes through here, passing its own name (__func__ inside the
// body would name the lambda) for the body's messages.
template <typename Body>
manypy_status* fence(const char* function, Body&& body) noexcept {
  try {
    return body(function);
  } catch (const Error& e) {
    return make_status(static_cast<manypy_code>(e.code()), e.message(), e.python_type(),
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
