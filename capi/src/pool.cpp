// manypy_pool and manypy_pool_options.
#include <cstring>

#include "handles.h"
#include "runtime.h"

extern "C" {

manypy_pool_options* manypy_pool_options_new(void) {
  return new (std::nothrow) manypy_pool_options();
}

void manypy_pool_options_free(manypy_pool_options* options) { delete options; }

manypy_status* manypy_pool_options_set_interpreters(manypy_pool_options* options, size_t count) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(options);
    options->options.interpreters = count;
    return nullptr;
  });
}

manypy_status* manypy_pool_options_add_sys_path(manypy_pool_options* options, const char* path) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(options);
    MANYPY_NOT_NULL(path);
    if (*path == '\0') {
      return manypy::capi::invalid_argument(api_function, "path must not be empty");
    }
    options->options.lease.extra_sys_path.emplace_back(path);
    return nullptr;
  });
}

manypy_status* manypy_pool_options_set_intra_op_threads(manypy_pool_options* options, int threads) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(options);
    if (threads < 1) {
      return manypy::capi::make_status(
          MANYPY_ERR_OUT_OF_RANGE,
          std::string(api_function) + ": threads must be >= 1, not " + std::to_string(threads));
    }
    options->options.lease.intra_op_threads = threads;
    return nullptr;
  });
}

manypy_status* manypy_pool_options_set_queue_limit(manypy_pool_options* options, size_t limit) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(options);
    options->options.queue_limit = limit;
    return nullptr;
  });
}

manypy_status* manypy_pool_options_set_thread_mode(manypy_pool_options* options,
                                                   manypy_thread_mode mode) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(options);
    // A C caller may pass any int: read it as one (loading a value outside
    // the enumerators' range as a manypy_thread_mode is undefined in C++).
    static_assert(sizeof(manypy_thread_mode) == sizeof(int), "manypy_thread_mode is an int");
    int value;
    std::memcpy(&value, &mode, sizeof value);
    if (value != MANYPY_THREAD_MODE_DIRECT && value != MANYPY_THREAD_MODE_HANDOFF) {
      return manypy::capi::invalid_argument(api_function, "unknown thread mode");
    }
    options->options.thread_mode = static_cast<manypy::ThreadMode>(value);
    return nullptr;
  });
}

manypy_status* manypy_pool_options_set_allow_process_exit(manypy_pool_options* options, int allow) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(options);
    if (allow != 0 && allow != 1) {
      return manypy::capi::invalid_argument(api_function, "allow must be 0 or 1");
    }
    options->options.lease.allow_process_exit = allow == 1;
    return nullptr;
  });
}

manypy_status* manypy_pool_options_set_stop_grace(manypy_pool_options* options, int64_t grace_ns) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(options);
    if (grace_ns < 0) {
      return manypy::capi::make_status(
          MANYPY_ERR_OUT_OF_RANGE,
          std::string(api_function) + ": grace_ns must be >= 0, not " + std::to_string(grace_ns));
    }
    options->options.stop_grace_ns = grace_ns;
    return nullptr;
  });
}

size_t manypy_max_interpreters(void) {
  try {
    return manypy::Runtime::get().interpreters().capacity();
  } catch (...) {
    return 0;
  }
}

manypy_status* manypy_pool_create(const manypy_pool_options* options, manypy_pool** out_pool) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(out_pool);
    manypy::PoolOptions defaults;
    auto handle = std::make_unique<manypy_pool>();
    handle->pool = std::make_shared<manypy::Pool>(options ? options->options : defaults);
    *out_pool = handle.release();
    return nullptr;
  });
}

void manypy_pool_destroy(manypy_pool* pool) {
  try {
    delete pool;
  } catch (...) {
    // ~Pool gives interpreters back and never throws; keep the ABI fence
    // anyway.
  }
}

size_t manypy_pool_size(const manypy_pool* pool) { return pool ? pool->pool->size() : 0; }

size_t manypy_pool_queued(const manypy_pool* pool) { return pool ? pool->pool->queued() : 0; }

size_t manypy_pool_in_flight(const manypy_pool* pool) { return pool ? pool->pool->in_flight() : 0; }

manypy_status* manypy_pool_check_interpreter(const manypy_pool* pool, int32_t interpreter) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(pool);
    pool->pool->check_interpreter(interpreter);
    return nullptr;
  });
}

manypy_status* manypy_pool_exec(manypy_pool* pool, int32_t interpreter, const char* source) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(pool);
    MANYPY_NOT_NULL(source);
    pool->pool->exec(interpreter, source);
    return nullptr;
  });
}

manypy_status* manypy_pool_exec_all(manypy_pool* pool, const char* source) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(pool);
    MANYPY_NOT_NULL(source);
    pool->pool->exec_all(source);
    return nullptr;
  });
}

manypy_status* manypy_pool_eval(manypy_pool* pool, int32_t interpreter, const char* expression,
                                manypy_value** out_value) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(pool);
    MANYPY_NOT_NULL(expression);
    MANYPY_NOT_NULL(out_value);
    *out_value = manypy::capi::new_value(pool->pool->eval(interpreter, expression));
    return nullptr;
  });
}

manypy_status* manypy_pool_exec_with_options(manypy_pool* pool, const char* source,
                                             const manypy_call_options* options) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(pool);
    MANYPY_NOT_NULL(source);
    pool->pool->exec(manypy::capi::options_of(options), source);
    return nullptr;
  });
}

manypy_status* manypy_pool_eval_with_options(manypy_pool* pool, const char* expression,
                                             const manypy_call_options* options,
                                             manypy_value** out_value) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(pool);
    MANYPY_NOT_NULL(expression);
    MANYPY_NOT_NULL(out_value);
    *out_value =
        manypy::capi::new_value(pool->pool->eval(manypy::capi::options_of(options), expression));
    return nullptr;
  });
}

}  // extern "C"
