/*
 * C API basics: version, code names, NULL handling, option validation, pool
 * size limits. Starts one interpreter (for the NULL checks that need a live
 * pool or value).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capi_test_support.h"

/* Stand-ins that a failing call must leave in its out-parameters. */
#define SENTINEL_POOL ((manypy_pool*)(uintptr_t)0x5e5e5e5e)
#define SENTINEL_VALUE ((manypy_value*)(uintptr_t)0x7a7a7a7a)
#define SENTINEL_STR ((const char*)(uintptr_t)0x3c3c3c3c)

/* ASSERT_INVALID_ARG (capi_test_support.h) checks a MANYPY_ERR_INVALID_ARGUMENT
 * status whose message names the function and the argument. */

/* ---- 1. version and code names ------------------------------------------ */

static void test_version(void** state) {
  (void)state;
  assert_int_equal(manypy_version_number(), MANYPY_VERSION_NUMBER);
  assert_int_equal(MANYPY_VERSION_NUMBER, 300);
  assert_non_null(manypy_version_string());
  assert_string_equal(manypy_version_string(), MANYPY_VERSION_STRING);
  char expected[32];
  snprintf(expected, sizeof expected, "%d.%d.%d", MANYPY_VERSION_MAJOR, MANYPY_VERSION_MINOR,
           MANYPY_VERSION_PATCH);
  assert_string_equal(manypy_version_string(), expected);
  /* Static storage: the same pointer every time. */
  assert_ptr_equal(manypy_version_string(), manypy_version_string());
}

static void test_code_names(void** state) {
  (void)state;
  assert_string_equal(manypy_code_name(MANYPY_OK), "MANYPY_OK");
  assert_string_equal(manypy_code_name(MANYPY_ERR_INVALID_ARGUMENT), "MANYPY_ERR_INVALID_ARGUMENT");
  assert_string_equal(manypy_code_name(MANYPY_ERR_OUT_OF_RANGE), "MANYPY_ERR_OUT_OF_RANGE");
  assert_string_equal(manypy_code_name(MANYPY_ERR_PYTHON), "MANYPY_ERR_PYTHON");
  assert_string_equal(manypy_code_name(MANYPY_ERR_SYNTAX), "MANYPY_ERR_SYNTAX");
  assert_string_equal(manypy_code_name(MANYPY_ERR_UNSUPPORTED_TYPE), "MANYPY_ERR_UNSUPPORTED_TYPE");
  assert_string_equal(manypy_code_name(MANYPY_ERR_WRONG_KIND), "MANYPY_ERR_WRONG_KIND");
  assert_string_equal(manypy_code_name(MANYPY_ERR_STATIC_TLS), "MANYPY_ERR_STATIC_TLS");
  assert_string_equal(manypy_code_name(MANYPY_ERR_RESOURCE_EXHAUSTED),
                      "MANYPY_ERR_RESOURCE_EXHAUSTED");
  assert_string_equal(manypy_code_name(MANYPY_ERR_LOADER), "MANYPY_ERR_LOADER");
  assert_string_equal(manypy_code_name(MANYPY_ERR_INTERPRETER_BROKEN),
                      "MANYPY_ERR_INTERPRETER_BROKEN");
  assert_string_equal(manypy_code_name(MANYPY_ERR_INTERNAL), "MANYPY_ERR_INTERNAL");
  /* Stable numbering (append-only). */
  assert_int_equal(MANYPY_ERR_INVALID_ARGUMENT, 1);
  assert_int_equal(MANYPY_ERR_STATIC_TLS, 7);
  assert_int_equal(MANYPY_ERR_INTERNAL, 11);
  assert_string_equal(manypy_code_name(MANYPY_ERR_NO_SUCH_NAME), "MANYPY_ERR_NO_SUCH_NAME");
  assert_string_equal(manypy_code_name(MANYPY_ERR_DEADLINE_EXCEEDED),
                      "MANYPY_ERR_DEADLINE_EXCEEDED");
  assert_string_equal(manypy_code_name(MANYPY_ERR_CANCELLED), "MANYPY_ERR_CANCELLED");
  assert_int_equal(MANYPY_ERR_DEADLINE_EXCEEDED, 19);
  assert_int_equal(MANYPY_ERR_CANCELLED, 20);
  /* Values this version does not know. */
  assert_string_equal(manypy_code_name(MANYPY_ERR_UNTRUSTED_ARCHIVE),
                      "MANYPY_ERR_UNTRUSTED_ARCHIVE");
  assert_int_equal(MANYPY_ERR_UNTRUSTED_ARCHIVE, 21);
  assert_string_equal(manypy_code_name(MANYPY_ERR_OVERLOADED), "MANYPY_ERR_OVERLOADED");
  assert_int_equal(MANYPY_ERR_OVERLOADED, 22);
  assert_string_equal(manypy_code_name(MANYPY_ERR_DRAINING), "MANYPY_ERR_DRAINING");
  assert_int_equal(MANYPY_ERR_DRAINING, 23);
  assert_true(MANYPY_ERR_DRAINING < MANYPY_CODE_SLOTS);
  assert_string_equal(manypy_code_name((manypy_code)24), "MANYPY_UNKNOWN");
  assert_string_equal(manypy_code_name((manypy_code)999), "MANYPY_UNKNOWN");
}

/* manypy_status_new: any known failure code with its message; OK is no
 * status; an unknown code or a message that is not UTF-8 is refused with a
 * status saying so (never NULL, which would read as success). */
static void test_status_new(void** state) {
  (void)state;
  assert_null(manypy_status_new(MANYPY_OK, "ignored"));
  assert_null(manypy_status_new(MANYPY_OK, NULL));
  for (int code = MANYPY_ERR_INVALID_ARGUMENT; code <= MANYPY_ERR_DRAINING; ++code) {
    char message[64];
    snprintf(message, sizeof message, "binding helper failed with %d \xc3\xa9", code);
    manypy_status* s = manypy_status_new((manypy_code)code, message);
    assert_non_null(s);
    assert_int_equal(manypy_status_code(s), code);
    assert_string_equal(manypy_status_message(s), message);
    assert_string_equal(manypy_status_python_type(s), "");
    assert_string_equal(manypy_status_traceback(s), "");
    manypy_status_free(s);
  }
  /* The message is copied. */
  char buffer[16] = "copied";
  manypy_status* s = manypy_status_new(MANYPY_ERR_INTERNAL, buffer);
  strcpy(buffer, "changed");
  assert_string_equal(manypy_status_message(s), "copied");
  manypy_status_free(s);
  s = manypy_status_new(MANYPY_ERR_NOT_FOUND, NULL);
  assert_int_equal(manypy_status_code(s), MANYPY_ERR_NOT_FOUND);
  assert_string_equal(manypy_status_message(s), "");
  manypy_status_free(s);

  s = EXPECT_CODE(manypy_status_new((manypy_code)24, "x"), MANYPY_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(manypy_status_message(s), "manypy_status_new");
  ASSERT_CONTAINS(manypy_status_message(s), "code 24");
  manypy_status_free(s);
  s = EXPECT_CODE(manypy_status_new((manypy_code)-1, "x"), MANYPY_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(manypy_status_message(s), "code -1");
  manypy_status_free(s);
  ASSERT_INVALID_ARG(manypy_status_new(MANYPY_ERR_PYTHON,
                                       "bad \xff"
                                       " byte"),
                     "manypy_status_new", "message");
}

/* ---- 2. NULL handling ---------------------------------------------------- */

static void test_null_status_accessors(void** state) {
  (void)state;
  assert_int_equal(manypy_status_code(NULL), MANYPY_OK);
  assert_non_null(manypy_status_message(NULL));
  assert_string_equal(manypy_status_message(NULL), "");
  assert_non_null(manypy_status_python_type(NULL));
  assert_string_equal(manypy_status_python_type(NULL), "");
  assert_non_null(manypy_status_traceback(NULL));
  assert_string_equal(manypy_status_traceback(NULL), "");
}

static void test_null_destructors(void** state) {
  (void)state;
  manypy_status_free(NULL);
  manypy_value_free(NULL);
  manypy_pool_options_free(NULL);
  manypy_pool_destroy(NULL);
  manypy_tensor_release(NULL);
  /* And the NULL-tolerant queries. */
  assert_null(manypy_tensor_retain(NULL));
  assert_null(manypy_tensor_dl_tensor(NULL));
  assert_int_equal(manypy_value_get_kind(NULL), MANYPY_VALUE_NONE);
  assert_int_equal(manypy_pool_size(NULL), 0);
}

static void test_null_options_arguments(void** state) {
  (void)state;
  ASSERT_INVALID_ARG(manypy_pool_options_set_interpreters(NULL, 1),
                     "manypy_pool_options_set_interpreters", "options");
  ASSERT_INVALID_ARG(manypy_pool_options_add_sys_path(NULL, "/tmp"),
                     "manypy_pool_options_add_sys_path", "options");
  ASSERT_INVALID_ARG(manypy_pool_options_set_intra_op_threads(NULL, 1),
                     "manypy_pool_options_set_intra_op_threads", "options");
  ASSERT_INVALID_ARG(manypy_pool_options_set_thread_mode(NULL, MANYPY_THREAD_MODE_DIRECT),
                     "manypy_pool_options_set_thread_mode", "options");

  manypy_pool_options* options = manypy_pool_options_new();
  assert_non_null(options);
  ASSERT_INVALID_ARG(manypy_pool_options_add_sys_path(options, NULL),
                     "manypy_pool_options_add_sys_path", "path");
  ASSERT_INVALID_ARG(manypy_pool_create(options, NULL), "manypy_pool_create", "out_pool");
  manypy_pool_options_free(options);
}

static void test_null_pool_arguments(void** state) {
  (void)state;
  manypy_value* value = SENTINEL_VALUE;
  ASSERT_INVALID_ARG(manypy_pool_exec(NULL, 0, "x = 1"), "manypy_pool_exec", "pool");
  ASSERT_INVALID_ARG(manypy_pool_exec_all(NULL, "x = 1"), "manypy_pool_exec_all", "pool");
  ASSERT_INVALID_ARG(manypy_pool_eval(NULL, 0, "1", &value), "manypy_pool_eval", "pool");
  ASSERT_INVALID_ARG(manypy_pool_exec_with_options(NULL, "x = 1", NULL),
                     "manypy_pool_exec_with_options", "pool");
  ASSERT_INVALID_ARG(manypy_pool_eval_with_options(NULL, "1", NULL, &value),
                     "manypy_pool_eval_with_options", "pool");
  assert_ptr_equal(value, SENTINEL_VALUE);
}

static void test_null_value_arguments(void** state) {
  (void)state;
  int b = 17;
  int64_t i = 17;
  double d = 17.5;
  const char* s = SENTINEL_STR;
  size_t n = 17;
  ASSERT_INVALID_ARG(manypy_value_get_bool(NULL, &b), "manypy_value_get_bool", "value");
  ASSERT_INVALID_ARG(manypy_value_get_int64(NULL, &i), "manypy_value_get_int64", "value");
  ASSERT_INVALID_ARG(manypy_value_get_double(NULL, &d), "manypy_value_get_double", "value");
  ASSERT_INVALID_ARG(manypy_value_get_string(NULL, &s, &n), "manypy_value_get_string", "value");
  assert_int_equal(b, 17);
  assert_int_equal(i, 17);
  assert_true(d == 17.5);
  assert_ptr_equal(s, SENTINEL_STR);
  assert_int_equal(n, 17);
}

/* Needs a live pool: NULL arguments after a valid handle. */
static void test_null_arguments_with_live_pool(void** state) {
  manypy_pool* pool = *state;
  manypy_value* value = SENTINEL_VALUE;
  ASSERT_INVALID_ARG(manypy_pool_exec(pool, 0, NULL), "manypy_pool_exec", "source");
  ASSERT_INVALID_ARG(manypy_pool_exec_all(pool, NULL), "manypy_pool_exec_all", "source");
  ASSERT_INVALID_ARG(manypy_pool_eval(pool, 0, NULL, &value), "manypy_pool_eval", "expression");
  assert_ptr_equal(value, SENTINEL_VALUE);
  ASSERT_INVALID_ARG(manypy_pool_eval(pool, 0, "1 + 1", NULL), "manypy_pool_eval", "out_value");
  manypy_call_options* options = manypy_call_options_new();
  assert_non_null(options);
  ASSERT_INVALID_ARG(manypy_pool_exec_with_options(pool, NULL, options),
                     "manypy_pool_exec_with_options", "source");
  ASSERT_INVALID_ARG(manypy_pool_eval_with_options(pool, NULL, options, &value),
                     "manypy_pool_eval_with_options", "expression");
  assert_ptr_equal(value, SENTINEL_VALUE);
  ASSERT_INVALID_ARG(manypy_pool_eval_with_options(pool, "1 + 1", options, NULL),
                     "manypy_pool_eval_with_options", "out_value");
  manypy_call_options_free(options);
  /* The pool is unharmed. */
  assert_int_equal(EVAL_INT64(pool, 0, "1 + 1"), 2);
}

static void test_null_out_params_of_value_getters(void** state) {
  manypy_pool* pool = *state;
  manypy_value* value = NULL;
  ASSERT_OK(manypy_pool_eval(pool, 0, "'text'", &value));
  assert_non_null(value);
  size_t n = 17;
  ASSERT_INVALID_ARG(manypy_value_get_string(value, NULL, &n), "manypy_value_get_string",
                     "out_utf8");
  assert_int_equal(n, 17);
  manypy_value_free(value);

  ASSERT_OK(manypy_pool_eval(pool, 0, "True", &value));
  ASSERT_INVALID_ARG(manypy_value_get_bool(value, NULL), "manypy_value_get_bool", "out");
  manypy_value_free(value);
  ASSERT_OK(manypy_pool_eval(pool, 0, "5", &value));
  ASSERT_INVALID_ARG(manypy_value_get_int64(value, NULL), "manypy_value_get_int64", "out");
  manypy_value_free(value);
  ASSERT_OK(manypy_pool_eval(pool, 0, "5.5", &value));
  ASSERT_INVALID_ARG(manypy_value_get_double(value, NULL), "manypy_value_get_double", "out");
  manypy_value_free(value);
}

/* ---- 3. options and pool size -------------------------------------------- */

static void test_intra_op_threads_range(void** state) {
  (void)state;
  manypy_pool_options* options = manypy_pool_options_new();
  assert_non_null(options);
  manypy_status* s =
      EXPECT_CODE(manypy_pool_options_set_intra_op_threads(options, 0), MANYPY_ERR_OUT_OF_RANGE);
  ASSERT_CONTAINS(manypy_status_message(s), "manypy_pool_options_set_intra_op_threads");
  ASSERT_CONTAINS(manypy_status_message(s), "threads");
  manypy_status_free(s);
  ASSERT_CODE(manypy_pool_options_set_intra_op_threads(options, -3), MANYPY_ERR_OUT_OF_RANGE);
  ASSERT_OK(manypy_pool_options_set_intra_op_threads(options, 1));
  ASSERT_OK(manypy_pool_options_set_intra_op_threads(options, 4));
  manypy_pool_options_free(options);
}

static void test_unknown_thread_mode(void** state) {
  (void)state;
  manypy_pool_options* options = manypy_pool_options_new();
  assert_non_null(options);
  ASSERT_INVALID_ARG(manypy_pool_options_set_thread_mode(options, (manypy_thread_mode)7),
                     "manypy_pool_options_set_thread_mode", "mode");
  ASSERT_INVALID_ARG(manypy_pool_options_set_thread_mode(options, (manypy_thread_mode)-1),
                     "manypy_pool_options_set_thread_mode", "mode");
  ASSERT_OK(manypy_pool_options_set_thread_mode(options, MANYPY_THREAD_MODE_DIRECT));
  ASSERT_OK(manypy_pool_options_set_thread_mode(options, MANYPY_THREAD_MODE_HANDOFF));
  manypy_pool_options_free(options);
}

static void test_empty_sys_path(void** state) {
  (void)state;
  manypy_pool_options* options = manypy_pool_options_new();
  assert_non_null(options);
  ASSERT_INVALID_ARG(manypy_pool_options_add_sys_path(options, ""),
                     "manypy_pool_options_add_sys_path", "path");
  ASSERT_OK(manypy_pool_options_add_sys_path(options, "/nonexistent/but/fine"));
  manypy_pool_options_free(options);
}

static void test_max_interpreters(void** state) {
  (void)state;
  size_t max = manypy_max_interpreters();
  assert_in_range(max, 1, 15);
  /* Stable across calls. */
  assert_int_equal(manypy_max_interpreters(), max);
}

static void check_bad_pool_size(size_t count) {
  size_t max = manypy_max_interpreters();
  manypy_pool_options* options = manypy_pool_options_new();
  assert_non_null(options);
  /* The setter accepts any count; manypy_pool_create checks it. */
  ASSERT_OK(manypy_pool_options_set_interpreters(options, count));
  manypy_pool* pool = SENTINEL_POOL;
  manypy_status* s = EXPECT_CODE(manypy_pool_create(options, &pool), MANYPY_ERR_OUT_OF_RANGE);
  manypy_pool_options_free(options);
  assert_ptr_equal(pool, SENTINEL_POOL);
  char limit[32];
  snprintf(limit, sizeof limit, "%zu", max);
  ASSERT_CONTAINS(manypy_status_message(s), limit);
  char asked[32];
  snprintf(asked, sizeof asked, "not %zu", count);
  ASSERT_CONTAINS(manypy_status_message(s), asked);
  assert_string_equal(manypy_status_python_type(s), "");
  assert_string_equal(manypy_status_traceback(s), "");
  manypy_status_free(s);
}

static void test_pool_of_zero(void** state) {
  (void)state;
  check_bad_pool_size(0);
}

static void test_pool_above_max(void** state) {
  (void)state;
  check_bad_pool_size(manypy_max_interpreters() + 1);
}

/* NULL options mean defaults: 1 interpreter, DIRECT mode, 1 intra-op thread. */
static void test_default_pool(void** state) {
  manypy_pool* pool = *state;
  assert_int_equal(manypy_pool_size(pool), 1);
  assert_int_equal(EVAL_INT64(pool, 0, "__import__('torch').get_num_threads()"), 1);
  /* DIRECT: the call runs on the calling thread. */
  assert_int_equal(EVAL_INT64(pool, 0, "__import__('threading').get_native_id()"),
                   (int64_t)gettid());
}

static int group_setup(void** state) {
  manypy_pool* pool = SENTINEL_POOL;
  manypy_status* s = manypy_pool_create(NULL, &pool);
  if (s != NULL) {
    capi_print_status("manypy_pool_create(NULL, &pool)", s, __FILE__, __LINE__);
    manypy_status_free(s);
    return -1;
  }
  if (pool == NULL || pool == SENTINEL_POOL) return -1;
  *state = pool;
  return 0;
}

static int group_teardown(void** state) {
  manypy_pool_destroy(*state);
  return 0;
}

int main(void) {
  const struct CMUnitTest no_interpreter[] = {
      cmocka_unit_test(test_version),
      cmocka_unit_test(test_code_names),
      cmocka_unit_test(test_status_new),
      cmocka_unit_test(test_null_status_accessors),
      cmocka_unit_test(test_null_destructors),
      cmocka_unit_test(test_null_options_arguments),
      cmocka_unit_test(test_null_pool_arguments),
      cmocka_unit_test(test_null_value_arguments),
      cmocka_unit_test(test_intra_op_threads_range),
      cmocka_unit_test(test_unknown_thread_mode),
      cmocka_unit_test(test_empty_sys_path),
      cmocka_unit_test(test_max_interpreters),
      cmocka_unit_test(test_pool_of_zero),
      cmocka_unit_test(test_pool_above_max),
  };
  const struct CMUnitTest with_pool[] = {
      cmocka_unit_test(test_default_pool),
      cmocka_unit_test(test_null_arguments_with_live_pool),
      cmocka_unit_test(test_null_out_params_of_value_getters),
  };
  int failed =
      cmocka_run_group_tests_name("capi_basics (no interpreter)", no_interpreter, NULL, NULL);
  failed += cmocka_run_group_tests_name("capi_basics (default pool)", with_pool, group_setup,
                                        group_teardown);
  return failed == 0 ? 0 : 1;
}
