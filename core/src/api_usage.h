// API usage events (the seed's C10_LOG_API_USAGE_ONCE): each distinct key
// reaches the host's handler once per process, whether it came from the
// torch of any interpreter, the host's own libtorch, manypy itself or the
// caller. One per process, the Runtime's (runtime.h).
#pragma once

#include <mutex>
#include <set>
#include <string>

namespace manypy {

class ApiUsage {
 public:
  using Handler = void (*)(const char* key, void* user_data);

  // Reports the host's own libtorch's events here too (TorchScript on the
  // host), from now on.
  ApiUsage();
  ApiUsage(const ApiUsage&) = delete;
  ApiUsage& operator=(const ApiUsage&) = delete;

  // Records `key`; the first time it is seen, calls the handler (if any) on
  // this thread. Thread safe; never throws.
  void log(const char* key) noexcept;

  // Replaces the handler (freeing the previous one's user data). The new
  // handler is first called, on this thread, with every key seen so far, so
  // a handler registered late still sees each key once. fn NULL removes it.
  void set_handler(Handler fn, void* user_data, void (*free_user_data)(void*));

 private:
  // The handler runs under mu_, so no event overtakes another and a handler
  // being replaced is never called after set_handler returns.
  std::mutex mu_;
  std::set<std::string> seen_;
  Handler fn_ = nullptr;
  void* user_data_ = nullptr;
  void (*free_user_data_)(void*) = nullptr;
};

}  // namespace manypy
