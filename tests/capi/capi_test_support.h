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
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "manypy.h"

/* Prints a status (code name, message, python type, traceback) to stderr. */
void capi_print_status(const char* what, const manypy_status* status, const char* file, int line);

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
int capi_eval_bool(manypy_pool* pool, int32_t interp, const char* expr, const char* file, int line);
/* Returns a malloc'd copy (NUL-terminated); *length gets the byte count. */
char* capi_eval_string(manypy_pool* pool, int32_t interp, const char* expr, size_t* length,
                       const char* file, int line);

/* Creates a pool with `count` interpreters (and the given options, or
 * defaults); fails the test on error. */
manypy_pool* capi_make_pool(size_t count, manypy_thread_mode mode, const char* file, int line);

/* Non-asserting, for cmocka group setups (which report failure by
 * returning non-zero): creates a pool of `count` interpreters with default
 * options. Returns the failing status (owned by the caller) or NULL. */
manypy_status* capi_create_pool(size_t count, manypy_pool** out_pool);

/* What most suites share between their tests: a pool, a sample archive
 * loaded into it and the object pickled at model/model.pkl. */
typedef struct capi_fixture {
  manypy_pool* pool;
  manypy_package* package;
  manypy_object* model;
} capi_fixture;

/* Non-asserting, for cmocka group setups: a pool of `interpreters` in
 * `mode`, then (unless `archive` is NULL) archives/<archive> and its model.
 * Returns 0, or -1 after printing what failed. */
int capi_fixture_setup(capi_fixture* f, size_t interpreters, manypy_thread_mode mode,
                       const char* archive);
/* Frees what capi_fixture_setup made and zeroes `f`. */
void capi_fixture_teardown(capi_fixture* f);

/* The keyword arguments python_heavy's expected files were made with:
 * {"steps": 5, "normalize": False}. Owned by the caller. */
manypy_value* capi_heavy_kwargs(void);

/* python_heavy.pt's case (python_heavy.json): input [4, 64], kwargs
 * steps=5, normalize=False; outputs logits [4, 10], norm [4], steps 5, as
 * read from the expected files. */
typedef struct capi_heavy_case {
  float* input;
  float* logits;
  float* norm;
} capi_heavy_case;

/* Reads the case's files (fails the test if it cannot); free with
 * capi_heavy_case_free. */
capi_heavy_case capi_heavy_case_load(const char* file, int line);
void capi_heavy_case_free(capi_heavy_case* c);
/* The positional arguments of the case: a list holding a copy of its input. */
manypy_value* capi_heavy_args(const capi_heavy_case* c, const char* file, int line);
/* Checks a python_heavy result against the case's expected outputs;
 * returns the largest absolute difference of its tensors. */
double capi_check_heavy_result(const capi_heavy_case* c, const manypy_value* result,
                               const char* what, const char* file, int line);

/* Thread-safe, non-asserting: evaluates an int64 expression. Returns 0 and
 * sets *out on success; otherwise returns -1 and writes a description of the
 * failure into `error` (at most error_size bytes). */
int capi_eval_int64_nofail(manypy_pool* pool, int32_t interp, const char* expr, int64_t* out,
                           char* error, size_t error_size);

/* Seconds since an arbitrary epoch (CLOCK_MONOTONIC). */
double capi_now(void);

/* This process's private memory, Private_Clean + Private_Dirty of
 * /proc/self/smaps_rollup, in bytes; fails the test when it cannot read it. */
long long capi_private_bytes(void);

/* Checks a MANYPY_ERR_INVALID_ARGUMENT status whose message names the
 * function and the argument, and that carries no Python type or traceback;
 * then frees it. */
void capi_check_invalid_argument(manypy_status* status, const char* expr, const char* function,
                                 const char* argument, const char* file, int line);

/* ---- sample archives (samples/models, built by target manypy_archives) ---- */

/* The archives directory: the compile definition MANYPY_ARCHIVES_DIR, unless
 * the environment variable MANYPY_ARCHIVES overrides it. */
const char* capi_archives_dir(void);

/* "<archives dir>/<name>". The result lives in one of 8 rotating static
 * buffers: use it before calling capi_archive 8 more times. Test thread
 * only. */
const char* capi_archive(const char* name);

/* Reads a whole file into a malloc'd buffer (with one extra NUL byte); fails
 * the test when it cannot. */
void* capi_read_whole_file(const char* path, size_t* out_size, const char* file, int line);

/* Reads archives/<name> as little-endian float32 and checks that it holds
 * exactly `count` of them. malloc'd. */
float* capi_read_f32_file(const char* name, size_t count, const char* file, int line);

/* manypy_package_load_file of archives/<name>; fails the test on error. */
manypy_package* capi_load_package(manypy_pool* pool, const char* name, const char* file, int line);

/* manypy_package_load_pickle(package, "model", "model.pkl"); fails the test
 * on error. */
manypy_object* capi_load_model(manypy_package* package, const char* file, int line);

/* The SHA-256 of a file as 64 lower-case hex digits (sha256sum's), for
 * allow-lists. */
void capi_sha256_hex(const char* path, char out[65], const char* file, int line);

/* A new empty directory under /tmp, named after `what`; the path lives in a
 * static buffer of 8 rotating ones. */
const char* capi_temp_dir(const char* what, const char* file, int line);

/* Removes every directory capi_temp_dir made in this process. */
void capi_remove_temp_dirs(void);

/* Writes `size` bytes to `path`: truncating it first (as `cp` does) when
 * `truncate` is 1, or over its bytes in place from offset 0 when it is 0. */
void capi_write_file(const char* path, const void* data, size_t size, int truncate,
                     const char* file, int line);

/* Call options pinned to `interpreter` (or MANYPY_ANY_INTERPRETER) with a
 * timeout in milliseconds (0: none). Owned by the caller. */
manypy_call_options* capi_call_options(int32_t interpreter, int64_t timeout_ms, const char* file,
                                       int line);

/* ---- values --------------------------------------------------------------- */

/* A string value from a NUL-terminated literal; fails the test on error. */
manypy_value* capi_string(const char* utf8, const char* file, int line);

/* A list (or tuple) made of `count` items, which it takes ownership of. */
manypy_value* capi_list_of(int tuple, size_t count, manypy_value** items, const char* file,
                           int line);

/* A C-contiguous float32 tensor value holding a copy of `data`. */
manypy_value* capi_f32_tensor(const float* data, int32_t ndim, const int64_t* shape,
                              const char* file, int line);

/* Number of elements of a DLTensor. */
int64_t capi_numel(const DLTensor* t);

/* The address of the element at C-order flat index `flat`, honouring
 * strides (NULL: C-contiguous) and byte_offset. */
const void* capi_element(const DLTensor* t, int64_t flat);

/* Checks that `value` is a float32 tensor of the given shape whose elements
 * are within rtol of `expected`: |got - want| <= rtol * (|want| + max|want|).
 * Returns the largest absolute difference. */
double capi_assert_f32_tensor(const manypy_value* value, int32_t ndim, const int64_t* shape,
                              const float* expected, double rtol, const char* what,
                              const char* file, int line);

/* Thread-safe, non-asserting deep comparison: kinds, scalars, strings,
 * bytes, container items and dict keys (in order), and tensors by dtype,
 * shape and element bytes (read through strides). Returns 1 if equal;
 * otherwise 0 with a description of the first difference in `why`. */
int capi_values_equal(const manypy_value* a, const manypy_value* b, char* why, size_t why_size);

/* ---- caller-owned DLPack tensors that count their deleter calls ----------- */

/* A DLManagedTensor over `data` (not copied, not freed) with its own copies
 * of shape and strides (strides NULL: C-contiguous, left NULL). Its deleter
 * increments *deleted (atomically: any thread may run it) and frees the
 * struct. Returns NULL only if out of memory. */
DLManagedTensor* capi_counted_tensor(void* data, DLDataType dtype, int32_t ndim,
                                     const int64_t* shape, const int64_t* strides,
                                     atomic_int* deleted);

/* A release callback for manypy_value_new_tensor_from_buffer: increments the
 * atomic_int that `ctx` points to. */
void capi_count_release(void* ctx);

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

#define ASSERT_INVALID_ARG(expr, function, argument) \
  capi_check_invalid_argument((expr), #expr, (function), (argument), __FILE__, __LINE__)
#define ARCHIVE(name) capi_archive(name)
#define READ_WHOLE_FILE(path, size) capi_read_whole_file((path), (size), __FILE__, __LINE__)
#define READ_F32(name, count) capi_read_f32_file((name), (count), __FILE__, __LINE__)
#define LOAD_PACKAGE(pool, name) capi_load_package((pool), (name), __FILE__, __LINE__)
#define LOAD_MODEL(package) capi_load_model((package), __FILE__, __LINE__)
#define SHA256_HEX(path, out) capi_sha256_hex((path), (out), __FILE__, __LINE__)
#define TEMP_DIR(what) capi_temp_dir((what), __FILE__, __LINE__)
#define WRITE_FILE(path, data, size, truncate) \
  capi_write_file((path), (data), (size), (truncate), __FILE__, __LINE__)
#define CALL_OPTIONS(interpreter, timeout_ms) \
  capi_call_options((interpreter), (timeout_ms), __FILE__, __LINE__)
#define HEAVY_CASE_LOAD() capi_heavy_case_load(__FILE__, __LINE__)
#define HEAVY_ARGS(c) capi_heavy_args((c), __FILE__, __LINE__)
#define CHECK_HEAVY_RESULT(c, result, what) \
  capi_check_heavy_result((c), (result), (what), __FILE__, __LINE__)
#define STRING(utf8) capi_string((utf8), __FILE__, __LINE__)
#define LIST_OF(count, items) capi_list_of(0, (count), (items), __FILE__, __LINE__)
#define TUPLE_OF(count, items) capi_list_of(1, (count), (items), __FILE__, __LINE__)
#define F32_TENSOR(data, ndim, shape) capi_f32_tensor((data), (ndim), (shape), __FILE__, __LINE__)
#define ASSERT_F32_TENSOR(value, ndim, shape, expected, rtol, what) \
  capi_assert_f32_tensor((value), (ndim), (shape), (expected), (rtol), (what), __FILE__, __LINE__)
/* Fails the test unless the two values are deeply equal. */
#define ASSERT_VALUES_EQUAL(a, b)                                                \
  do {                                                                           \
    char why_[512];                                                              \
    if (!capi_values_equal((a), (b), why_, sizeof why_)) {                       \
      fail_msg("%s:%d: %s and %s differ: %s", __FILE__, __LINE__, #a, #b, why_); \
    }                                                                            \
  } while (0)

#endif /* MANYPY_CAPI_TEST_SUPPORT_H */
