// Compiled (never run) with -std=c++17 -Wall -Wextra -Wpedantic -Werror: the
// public header must be clean C++ (extern "C", no C-only constructs).
#include <type_traits>

#include "manypy.h"

static_assert(MANYPY_VERSION_NUMBER == 300, "header version");
static_assert(std::is_same<decltype(&manypy_pool_create),
                           manypy_status* (*)(const manypy_pool_options*, manypy_pool**)>::value,
              "manypy_pool_create signature");

int manypy_header_cxx17_check();

int manypy_header_cxx17_check() {
  manypy_pool_options* options = manypy_pool_options_new();
  manypy_status* status = manypy_pool_options_set_thread_mode(options, MANYPY_THREAD_MODE_DIRECT);
  const manypy_code code = manypy_status_code(status);
  const char* name = manypy_code_name(code);
  manypy_status_free(status);
  manypy_pool_options_free(options);
  manypy_pool* pool = nullptr;
  manypy_value* value = nullptr;
  manypy_status* eval = manypy_pool_eval(pool, MANYPY_ANY_INTERPRETER, "1", &value);
  const int result = static_cast<int>(manypy_status_code(eval)) + (name != nullptr ? 1 : 0) +
                     static_cast<int>(manypy_value_get_kind(value));
  manypy_status_free(eval);
  manypy_value_free(value);
  return result;
}
