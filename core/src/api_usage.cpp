#include "api_usage.h"

#include <c10/util/Logging.h>

namespace manypy {

ApiUsage::ApiUsage() {
  c10::SetAPIUsageLogger([this](const std::string& key) { log(key.c_str()); });
}

void ApiUsage::log(const char* key) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mu_);
    if (!seen_.insert(key).second) return;
    if (fn_) fn_(key, user_data_);
  } catch (...) {
    // An event that cannot be recorded (out of memory) is dropped.
  }
}

void ApiUsage::set_handler(Handler fn, void* user_data, void (*free_user_data)(void*)) {
  void (*old_free)(void*) = nullptr;
  void* old_data = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    old_free = free_user_data_;
    old_data = user_data_;
    fn_ = fn;
    user_data_ = user_data;
    free_user_data_ = free_user_data;
    if (fn) {
      for (const std::string& key : seen_) fn(key.c_str(), user_data);
    }
  }
  if (old_free) old_free(old_data);
}

}  // namespace manypy
