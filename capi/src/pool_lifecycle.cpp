// The serving lifecycle of a pool: serving early, growth, resize, health,
// drain and request metrics (manypy.h, since 0.3).
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "handles.h"

using manypy::capi::copy_string;
using manypy::capi::fence;

namespace {

// A malloc'ed copy of `values` for the caller to free().
template <typename T, typename Array>
T* copy_array(const Array& values) {
  T* out = static_cast<T*>(std::malloc(sizeof(T) * values.size()));
  if (out == nullptr) throw std::bad_alloc();
  for (size_t i = 0; i < values.size(); ++i) out[i] = values[i];
  return out;
}

}  // namespace

extern "C" {

manypy_status* manypy_pool_options_set_serve_early(manypy_pool_options* options, int serve_early) {
  return fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(options);
    if (serve_early != 0 && serve_early != 1) {
      return manypy::capi::invalid_argument(api_function, "serve_early must be 0 or 1");
    }
    options->options.serve_early = serve_early == 1;
    return nullptr;
  });
}

manypy_status* manypy_pool_options_set_max_interpreters(manypy_pool_options* options, size_t max) {
  return fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(options);
    options->options.max_interpreters = max;
    return nullptr;
  });
}

manypy_status* manypy_pool_options_set_grow_after(manypy_pool_options* options, int64_t wait_ns) {
  return fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(options);
    if (wait_ns < 1) {
      return manypy::capi::make_status(
          MANYPY_ERR_OUT_OF_RANGE,
          std::string(api_function) + ": wait_ns must be >= 1, not " + std::to_string(wait_ns));
    }
    options->options.grow_after_ns = wait_ns;
    return nullptr;
  });
}

manypy_status* manypy_pool_options_set_on_interpreter_failed(manypy_pool_options* options,
                                                             manypy_interpreter_failed_fn callback,
                                                             void* user_data,
                                                             void (*free_user_data)(void*)) {
  return fence(__func__, [&](const char* api_function) -> manypy_status* {
    // Owned from here on (as set_verifier's): freed when the last pool or
    // options holding the callback let go, or here if anything fails.
    const auto owned = manypy::capi::own_user_data(user_data, free_user_data);
    MANYPY_NOT_NULL(options);
    if (callback == nullptr) {
      options->options.on_interpreter_failed = nullptr;
      return nullptr;
    }
    options->options.on_interpreter_failed = [callback, owned](int index,
                                                               const manypy::Error& why) {
      manypy_status* status = manypy::capi::make_status(
          static_cast<manypy_code>(why.code()), why.message(), why.python_type(), why.traceback());
      callback(owned->data, index, status);
      manypy_status_free(status);
    };
    return nullptr;
  });
}

manypy_status* manypy_pool_options_set_name(manypy_pool_options* options, const char* name) {
  return fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(options);
    MANYPY_NOT_NULL(name);
    if (!manypy::capi::valid_utf8(name, std::strlen(name))) {
      return manypy::capi::invalid_argument(api_function, "name is not valid UTF-8");
    }
    options->options.name = name;
    return nullptr;
  });
}

manypy_status* manypy_pool_get_stats(const manypy_pool* pool, manypy_pool_stats* out) {
  return fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(pool);
    MANYPY_NOT_NULL(out);
    // 0.3's struct is the smallest any caller may have; later versions
    // append, and fill only what the caller's struct_size holds.
    constexpr size_t kSize03 = offsetof(manypy_pool_stats, lost);
    if (out->struct_size < kSize03) {
      return manypy::capi::invalid_argument(
          api_function,
          ("out->struct_size is " + std::to_string(out->struct_size) +
           ": set it to sizeof(manypy_pool_stats), at least " + std::to_string(kSize03))
              .c_str());
    }
    const manypy::PoolStats s = pool->pool->stats();
    // `lost` is a state of its own since 0.4: for a 0.3 caller, whose
    // counts must still add up to `interpreters`, lost ones are broken.
    const bool has_lost = out->struct_size >= offsetof(manypy_pool_stats, lost) + sizeof(out->lost);
    out->draining = s.draining ? 1 : 0;
    out->interpreters = s.interpreters;
    out->starting = s.starting;
    out->ready = s.ready;
    out->busy = s.busy;
    out->broken = has_lost ? s.broken : s.broken + s.lost;
    if (has_lost) out->lost = s.lost;
    out->in_flight = s.in_flight;
    out->queued = s.queued;
    for (int c = 0; c < MANYPY_CODE_SLOTS; ++c) out->completed[c] = s.completed[c];
    // 0.4's fields, each only when the caller's struct holds it.
    const auto holds = [out](size_t offset, size_t size) {
      return out->struct_size >= offset + size;
    };
    if (holds(offsetof(manypy_pool_stats, replaced), sizeof out->replaced)) {
      out->replaced = s.replaced;
    }
    if (holds(offsetof(manypy_pool_stats, no_room), sizeof out->no_room)) {
      out->no_room = s.no_room ? 1 : 0;
    }
    return nullptr;
  });
}

manypy_status* manypy_pool_resize(manypy_pool* pool, size_t interpreters) {
  return fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(pool);
    pool->pool->resize(interpreters);
    return nullptr;
  });
}

manypy_status* manypy_pool_drain(manypy_pool* pool, int64_t deadline_ns, size_t* out_finished,
                                 size_t* out_cancelled) {
  return fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(pool);
    if (deadline_ns < 0) {
      return manypy::capi::make_status(MANYPY_ERR_OUT_OF_RANGE,
                                       std::string(api_function) +
                                           ": deadline_ns must be >= 0 (0: none), not " +
                                           std::to_string(deadline_ns));
    }
    // The pool outlives the drain even if its other handles go meanwhile.
    const std::shared_ptr<manypy::Pool> held = pool->pool;
    const manypy::DrainResult result = held->drain(deadline_ns);
    if (out_finished) *out_finished = result.finished;
    if (out_cancelled) *out_cancelled = result.cancelled;
    return nullptr;
  });
}

void manypy_request_metrics_free(manypy_request_metrics* metrics, size_t count) {
  if (metrics == nullptr) return;
  for (size_t k = 0; k < count; ++k) {
    std::free(const_cast<char*>(metrics[k].model));
    std::free(const_cast<double*>(metrics[k].bucket_bounds));
    std::free(const_cast<uint64_t*>(metrics[k].request_buckets));
    std::free(const_cast<uint64_t*>(metrics[k].queue_buckets));
  }
  std::free(metrics);
}

manypy_status* manypy_pool_request_metrics(const manypy_pool* pool,
                                           manypy_request_metrics** out_metrics,
                                           size_t* out_count) {
  return fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(pool);
    MANYPY_NOT_NULL(out_metrics);
    MANYPY_NOT_NULL(out_count);
    const auto series = pool->pool->metrics().snapshot();
    auto* out = static_cast<manypy_request_metrics*>(
        std::calloc(series.empty() ? 1 : series.size(), sizeof(manypy_request_metrics)));
    if (out == nullptr) throw std::bad_alloc();
    try {
      for (size_t k = 0; k < series.size(); ++k) {
        const auto& s = series[k];
        manypy_request_metrics& m = out[k];
        m.struct_size = sizeof(manypy_request_metrics);
        m.model = copy_string(s.model);
        for (int c = 0; c < MANYPY_CODE_SLOTS; ++c) m.completed[c] = s.completed[c];
        m.num_buckets = manypy::RequestMetrics::kBuckets;
        m.bucket_bounds = copy_array<double>(manypy::RequestMetrics::bounds());
        m.request_buckets = copy_array<uint64_t>(s.request.cumulative);
        m.request_count = s.request.count;
        m.request_seconds_sum = s.request.sum_seconds;
        m.queue_buckets = copy_array<uint64_t>(s.queue.cumulative);
        m.queue_count = s.queue.count;
        m.queue_seconds_sum = s.queue.sum_seconds;
      }
    } catch (...) {
      manypy_request_metrics_free(out, series.size());
      throw;
    }
    *out_metrics = out;
    *out_count = series.size();
    return nullptr;
  });
}

manypy_status* manypy_pool_prometheus(const manypy_pool* pool, manypy_value** out_text) {
  return fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(pool);
    MANYPY_NOT_NULL(out_text);
    *out_text = manypy::capi::new_value(manypy::Value::of_string(pool->pool->prometheus_text()));
    return nullptr;
  });
}

}  // extern "C"
