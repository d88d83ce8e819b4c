// API usage events (the seed's C10_LOG_API_USAGE_ONCE): each distinct key
// reaches the host's handler once per process, whether it came from the
// torch of any interpreter, the host's own libtorch, manypy itself or the
// caller.
#pragma once

#include <string>

namespace manypy::api_usage {

using Handler = void (*)(const char* key, void* user_data);

// Records `key`; the first time it is seen, calls the handler (if any) on
// this thread. Thread safe; never throws.
void log(const char* key) noexcept;

// Replaces the handler (freeing the previous one's user data). The new
// handler is first called, on this thread, with every key seen so far, so a
// handler registered late still sees each key once. fn NULL removes it.
void set_handler(Handler fn, void* user_data, void (*free_user_data)(void*));

}  // namespace manypy::api_usage
