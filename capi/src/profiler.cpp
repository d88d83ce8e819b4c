// manypy_profiler: the built-in sampled profiler.
#include "profiler.h"

#include <cstdlib>
#include <cstring>

#include "handles.h"
#include "runtime.h"

struct manypy_profiler {
  std::unique_ptr<manypy::Profiler> profiler;
};

using manypy::capi::copy_string;

extern "C" {

manypy_status* manypy_profiler_start(double sampling_probability, manypy_profiler** out_profiler) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(out_profiler);
    auto handle = std::make_unique<manypy_profiler>();
    handle->profiler = std::make_unique<manypy::Profiler>(
        manypy::Runtime::get().operator_callbacks(), sampling_probability);
    *out_profiler = handle.release();
    return nullptr;
  });
}

void manypy_profiler_free(manypy_profiler* profiler) { delete profiler; }

manypy_status* manypy_profiler_snapshot(const manypy_profiler* profiler,
                                        manypy_profile_entry** out_entries, size_t* out_count) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(profiler);
    MANYPY_NOT_NULL(out_entries);
    MANYPY_NOT_NULL(out_count);
    std::vector<manypy::Profiler::Entry> entries = profiler->profiler->snapshot();
    auto* out = static_cast<manypy_profile_entry*>(
        std::calloc(entries.size() ? entries.size() : 1, sizeof(manypy_profile_entry)));
    if (out == nullptr) throw std::bad_alloc();
    try {
      for (size_t k = 0; k < entries.size(); ++k) {
        out[k].struct_size = sizeof(manypy_profile_entry);
        out[k].model_id = copy_string(entries[k].model_id);
        out[k].op_name = copy_string(entries[k].op_name);
        out[k].count = entries[k].count;
        out[k].total_ns = entries[k].total_ns;
        out[k].p50_ns = entries[k].p50_ns;
        out[k].p99_ns = entries[k].p99_ns;
      }
    } catch (...) {
      manypy_profile_entries_free(out, entries.size());
      throw;
    }
    *out_entries = out;
    *out_count = entries.size();
    return nullptr;
  });
}

void manypy_profile_entries_free(manypy_profile_entry* entries, size_t count) {
  if (entries == nullptr) return;
  for (size_t k = 0; k < count; ++k) {
    std::free(const_cast<char*>(entries[k].model_id));
    std::free(const_cast<char*>(entries[k].op_name));
  }
  std::free(entries);
}

manypy_status* manypy_profiler_prometheus(const manypy_profiler* profiler,
                                          manypy_value** out_text) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(profiler);
    MANYPY_NOT_NULL(out_text);
    *out_text =
        manypy::capi::new_value(manypy::Value::of_string(profiler->profiler->prometheus_text()));
    return nullptr;
  });
}

manypy_status* manypy_profiler_chrome_trace(const manypy_profiler* profiler,
                                            manypy_value** out_json) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(profiler);
    MANYPY_NOT_NULL(out_json);
    *out_json =
        manypy::capi::new_value(manypy::Value::of_string(profiler->profiler->chrome_trace_json()));
    return nullptr;
  });
}

}  // extern "C"
