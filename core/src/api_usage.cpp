#include "api_usage.h"

#include <c10/util/Logging.h>

#include <mutex>
#include <set>
#include <vector>

namespace manypy::api_usage {

namespace {

struct Registry {
  std::mutex mu;
  std::set<std::string> seen;
  Handler fn = nullptr;
  void* user_data = nullptr;
  void (*free_user_data)(void*) = nullptr;
};

Registry& registry() {
  // Never destroyed: events may arrive from any thread until the very end.
  static Registry* r = new Registry();
  return *r;
}

// The host's own libtorch (TorchScript on the host) reports here too.
const bool g_host_logger_installed = [] {
  c10::SetAPIUsageLogger([](const std::string& key) { log(key.c_str()); });
  return true;
}();

}  // namespace

void log(const char* key) noexcept {
  try {
    Registry& r = registry();
    // The handler runs under the lock, so no event overtakes another and a
    // handler being replaced is never called after set_handler returns.
    std::lock_guard<std::mutex> lock(r.mu);
    if (!r.seen.insert(key).second) return;
    if (r.fn) r.fn(key, r.user_data);
  } catch (...) {
    // An event that cannot be recorded (out of memory) is dropped.
  }
}

void set_handler(Handler fn, void* user_data, void (*free_user_data)(void*)) {
  Registry& r = registry();
  void (*old_free)(void*) = nullptr;
  void* old_data = nullptr;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    old_free = r.free_user_data;
    old_data = r.user_data;
    r.fn = fn;
    r.user_data = user_data;
    r.free_user_data = free_user_data;
    if (fn) {
      for (const std::string& key : r.seen) fn(key.c_str(), user_data);
    }
  }
  if (old_free) old_free(old_data);
}

}  // namespace manypy::api_usage
