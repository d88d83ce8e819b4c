#define _GNU_SOURCE
#include "capi_test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void capi_print_status(const char* what, const manypy_status* status, const char* file,
                       int line) {
  fprintf(stderr,
          "%s:%d: %s\n"
          "  code:        %s (%d)\n"
          "  message:     %s\n"
          "  python_type: %s\n"
          "  traceback:\n%s\n",
          file, line, what, manypy_code_name(manypy_status_code(status)),
          (int)manypy_status_code(status), manypy_status_message(status),
          manypy_status_python_type(status), manypy_status_traceback(status));
}

void capi_assert_ok(manypy_status* status, const char* expr, const char* file, int line) {
  if (status == NULL) return;
  char what[512];
  snprintf(what, sizeof what, "unexpected failure of %s", expr);
  capi_print_status(what, status, file, line);
  char message[1024];
  snprintf(message, sizeof message, "%s -> %s: %s", expr,
           manypy_code_name(manypy_status_code(status)), manypy_status_message(status));
  manypy_status_free(status);
  fail_msg("%s:%d: %s", file, line, message);
}

manypy_status* capi_expect_code(manypy_status* status, manypy_code code, const char* expr,
                                const char* file, int line) {
  if (status == NULL) {
    fail_msg("%s:%d: %s succeeded; expected %s", file, line, expr, manypy_code_name(code));
  }
  if (manypy_status_code(status) != code) {
    char what[512];
    snprintf(what, sizeof what, "%s: expected %s", expr, manypy_code_name(code));
    capi_print_status(what, status, file, line);
    manypy_code got = manypy_status_code(status);
    manypy_status_free(status);
    fail_msg("%s:%d: %s returned %s, expected %s", file, line, expr, manypy_code_name(got),
             manypy_code_name(code));
  }
  return status;
}

void capi_assert_contains(const char* haystack, const char* needle, const char* what,
                          const char* file, int line) {
  if (haystack == NULL || strstr(haystack, needle) == NULL) {
    fail_msg("%s:%d: %s does not contain \"%s\"; it is:\n%s", file, line, what, needle,
             haystack ? haystack : "(NULL)");
  }
}

void capi_assert_starts_with(const char* text, const char* prefix, const char* what,
                             const char* file, int line) {
  if (text == NULL || strncmp(text, prefix, strlen(prefix)) != 0) {
    fail_msg("%s:%d: %s does not start with \"%s\"; it is:\n%s", file, line, what, prefix,
             text ? text : "(NULL)");
  }
}

static manypy_value* eval_ok(manypy_pool* pool, int32_t interp, const char* expr,
                             manypy_value_kind kind, const char* file, int line) {
  manypy_value* value = NULL;
  manypy_status* status = manypy_pool_eval(pool, interp, expr, &value);
  if (status != NULL) {
    char what[512];
    snprintf(what, sizeof what, "eval of `%s` in interpreter %d failed", expr, (int)interp);
    capi_print_status(what, status, file, line);
    char message[1024];
    snprintf(message, sizeof message, "%s: %s", manypy_code_name(manypy_status_code(status)),
             manypy_status_message(status));
    manypy_status_free(status);
    fail_msg("%s:%d: eval of `%s` failed: %s", file, line, expr, message);
  }
  if (value == NULL) fail_msg("%s:%d: eval of `%s` succeeded with a NULL value", file, line, expr);
  if (manypy_value_get_kind(value) != kind) {
    int got = (int)manypy_value_get_kind(value);
    manypy_value_free(value);
    fail_msg("%s:%d: eval of `%s` gave value kind %d, expected %d", file, line, expr, got,
             (int)kind);
  }
  return value;
}

int64_t capi_eval_int64(manypy_pool* pool, int32_t interp, const char* expr, const char* file,
                        int line) {
  manypy_value* value = eval_ok(pool, interp, expr, MANYPY_VALUE_INT64, file, line);
  int64_t out = 0;
  capi_assert_ok(manypy_value_get_int64(value, &out), "manypy_value_get_int64", file, line);
  manypy_value_free(value);
  return out;
}

double capi_eval_double(manypy_pool* pool, int32_t interp, const char* expr, const char* file,
                        int line) {
  manypy_value* value = eval_ok(pool, interp, expr, MANYPY_VALUE_DOUBLE, file, line);
  double out = 0;
  capi_assert_ok(manypy_value_get_double(value, &out), "manypy_value_get_double", file, line);
  manypy_value_free(value);
  return out;
}

int capi_eval_bool(manypy_pool* pool, int32_t interp, const char* expr, const char* file,
                   int line) {
  manypy_value* value = eval_ok(pool, interp, expr, MANYPY_VALUE_BOOL, file, line);
  int out = -1;
  capi_assert_ok(manypy_value_get_bool(value, &out), "manypy_value_get_bool", file, line);
  manypy_value_free(value);
  return out;
}

char* capi_eval_string(manypy_pool* pool, int32_t interp, const char* expr, size_t* length,
                       const char* file, int line) {
  manypy_value* value = eval_ok(pool, interp, expr, MANYPY_VALUE_STRING, file, line);
  const char* bytes = NULL;
  size_t n = 0;
  capi_assert_ok(manypy_value_get_string(value, &bytes, &n), "manypy_value_get_string", file,
                 line);
  if (bytes == NULL) fail_msg("%s:%d: manypy_value_get_string gave NULL bytes", file, line);
  if (bytes[n] != '\0') fail_msg("%s:%d: string value is not NUL-terminated", file, line);
  char* copy = malloc(n + 1);
  assert_non_null(copy);
  memcpy(copy, bytes, n + 1);
  manypy_value_free(value);
  if (length != NULL) *length = n;
  return copy;
}

manypy_pool* capi_make_pool(size_t count, manypy_thread_mode mode, const char* file, int line) {
  manypy_pool_options* options = manypy_pool_options_new();
  if (options == NULL) fail_msg("%s:%d: manypy_pool_options_new returned NULL", file, line);
  capi_assert_ok(manypy_pool_options_set_interpreters(options, count),
                 "manypy_pool_options_set_interpreters", file, line);
  capi_assert_ok(manypy_pool_options_set_thread_mode(options, mode),
                 "manypy_pool_options_set_thread_mode", file, line);
  manypy_pool* pool = NULL;
  manypy_status* status = manypy_pool_create(options, &pool);
  manypy_pool_options_free(options);
  capi_assert_ok(status, "manypy_pool_create", file, line);
  if (pool == NULL) fail_msg("%s:%d: manypy_pool_create succeeded with NULL pool", file, line);
  if (manypy_pool_size(pool) != count) {
    fail_msg("%s:%d: pool size %zu, expected %zu", file, line, manypy_pool_size(pool), count);
  }
  return pool;
}

int capi_eval_int64_nofail(manypy_pool* pool, int32_t interp, const char* expr, int64_t* out,
                           char* error, size_t error_size) {
  manypy_value* value = NULL;
  manypy_status* status = manypy_pool_eval(pool, interp, expr, &value);
  if (status != NULL) {
    snprintf(error, error_size, "eval `%s` on %d: %s: %s\n%s", expr, (int)interp,
             manypy_code_name(manypy_status_code(status)), manypy_status_message(status),
             manypy_status_traceback(status));
    manypy_status_free(status);
    return -1;
  }
  status = manypy_value_get_int64(value, out);
  manypy_value_free(value);
  if (status != NULL) {
    snprintf(error, error_size, "eval `%s` on %d: result: %s: %s", expr, (int)interp,
             manypy_code_name(manypy_status_code(status)), manypy_status_message(status));
    manypy_status_free(status);
    return -1;
  }
  return 0;
}

double capi_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
