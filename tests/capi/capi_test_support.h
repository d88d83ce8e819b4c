/*
 * Helpers shared by the cmocka C API tests (tests/capi/capi_*.c).
 *
 * Every helper that asserts uses cmocka's assertions, so it must only be
 * called from the thread that runs the test (cmocka fails a test with
 * longjmp). Threads started by a test use the *_nofail helpers and report
 * back to the test thread instead.
 */
#ifndef MANYPY_CAPI_TEST_SUPPORT_H
#define MANYPY_CAPI_TEST_SUPPORT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "manypy.h"

/* Prints a status (code name, message, python type, traceback) to stderr. */
void capi_print_status(const char* what, const manypy_status* status, const char* file,
                       int line);

/* Fails the test unless `status` is NULL; frees it. */
void capi_assert_ok(manypy_status* status, const char* expr, const char* file, int line);

/* Fails the test unless `status` is non-NULL with code `code`. Returns the
 * status (owned by the caller) for further checks. */
manypy_status* capi_expect_code(manypy_status* status, manypy_code code, const char* expr,
                                const char* file, int line);

void capi_assert_contains(const char* haystack, const char* needle, const char* what,
                          const char* file, int line);
void capi_assert_starts_with(const char* text, const char* prefix, const char* what,
                             const char* file, int line);

/* The expression must succeed; the value must be of the named kind. */
int64_t capi_eval_int64(manypy_pool* pool, int32_t interp, const char* expr, const char* file,
                        int line);
double capi_eval_double(manypy_pool* pool, int32_t interp, const char* expr, const char* file,
                        int line);
int capi_eval_bool(manypy_pool* pool, int32_t interp, const char* expr, const char* file,
                   int line);
/* Returns a malloc'd copy (NUL-terminated); *length gets the byte count. */
char* capi_eval_string(manypy_pool* pool, int32_t interp, const char* expr, size_t* length,
                       const char* file, int line);

/* Creates a pool with `count` interpreters (and the given options, or
 * defaults); fails the test on error. */
manypy_pool* capi_make_pool(size_t count, manypy_thread_mode mode, const char* file, int line);

/* Thread-safe, non-asserting: evaluates an int64 expression. Returns 0 and
 * sets *out on success; otherwise returns -1 and writes a description of the
 * failure into `error` (at most error_size bytes). */
int capi_eval_int64_nofail(manypy_pool* pool, int32_t interp, const char* expr, int64_t* out,
                           char* error, size_t error_size);

/* Seconds since an arbitrary epoch (CLOCK_MONOTONIC). */
double capi_now(void);

#define ASSERT_OK(expr) capi_assert_ok((expr), #expr, __FILE__, __LINE__)
#define EXPECT_CODE(expr, code) capi_expect_code((expr), (code), #expr, __FILE__, __LINE__)
#define ASSERT_CONTAINS(haystack, needle) \
  capi_assert_contains((haystack), (needle), #haystack, __FILE__, __LINE__)
#define ASSERT_STARTS_WITH(text, prefix) \
  capi_assert_starts_with((text), (prefix), #text, __FILE__, __LINE__)
#define EVAL_INT64(pool, i, expr) capi_eval_int64((pool), (i), (expr), __FILE__, __LINE__)
#define EVAL_DOUBLE(pool, i, expr) capi_eval_double((pool), (i), (expr), __FILE__, __LINE__)
#define EVAL_BOOL(pool, i, expr) capi_eval_bool((pool), (i), (expr), __FILE__, __LINE__)
#define EVAL_STRING(pool, i, expr, len) \
  capi_eval_string((pool), (i), (expr), (len), __FILE__, __LINE__)
#define MAKE_POOL(count, mode) capi_make_pool((count), (mode), __FILE__, __LINE__)

/* Checks a failing call: code, then frees the status. */
#define ASSERT_CODE(expr, code) manypy_status_free(EXPECT_CODE(expr, code))

#endif /* MANYPY_CAPI_TEST_SUPPORT_H */
