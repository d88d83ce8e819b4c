/* Compiled (never run) with -std=c99 -Wall -Wextra -Wpedantic -Werror: the
 * public header must be clean, self-contained C99. Only manypy.h is
 * included. */
#include "manypy.h"

int manypy_header_c99_check(void);

int manypy_header_c99_check(void) {
  manypy_pool_options* options = manypy_pool_options_new();
  manypy_status* status = manypy_pool_options_set_interpreters(options, 1);
  manypy_code code = manypy_status_code(status);
  manypy_value_kind kind = manypy_value_get_kind((const manypy_value*)0);
  manypy_thread_mode mode = MANYPY_THREAD_MODE_HANDOFF;
  int32_t any = MANYPY_ANY_INTERPRETER;
  size_t max = manypy_max_interpreters();
  uint32_t version = manypy_version_number();
  manypy_status_free(status);
  manypy_pool_options_free(options);
  return (int)code + (int)kind + (int)mode + (int)any + (int)max +
         (version == MANYPY_VERSION_NUMBER);
}
