/*
 * Values, errors and pool semantics on one 3-interpreter pool (DIRECT mode).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capi_test_support.h"

#define POOL_SIZE 3
#define SENTINEL_VALUE ((manypy_value*)(uintptr_t)0x7a7a7a7a)

static manypy_pool* g_pool;

/* Evaluates `expr`, expecting failure with `code`; checks that *out_value is
 * untouched. Returns the status (owned by the caller). */
static manypy_status* eval_fails(int32_t interp, const char* expr, manypy_code code,
                                 const char* file, int line) {
  manypy_value* value = SENTINEL_VALUE;
  char what[512];
  snprintf(what, sizeof what, "manypy_pool_eval(pool, %d, \"%s\", &value)", (int)interp, expr);
  manypy_status* s =
      capi_expect_code(manypy_pool_eval(g_pool, interp, expr, &value), code, what, file, line);
  if (value != SENTINEL_VALUE) {
    manypy_status_free(s);
    fail_msg("%s:%d: failing eval of `%s` wrote its out-parameter", file, line, expr);
  }
  return s;
}
#define EVAL_FAILS(interp, expr, code) eval_fails((interp), (expr), (code), __FILE__, __LINE__)

/* The interpreter still works after an error. */
static void assert_still_works(int32_t interp) {
  assert_int_equal(EVAL_INT64(g_pool, interp, "1 + 1"), 2);
}

/* ---- 4. values ------------------------------------------------------------ */

static void test_value_none(void** state) {
  (void)state;
  manypy_value* v = NULL;
  ASSERT_OK(manypy_pool_eval(g_pool, 0, "None", &v));
  assert_non_null(v);
  assert_int_equal(manypy_value_get_kind(v), MANYPY_VALUE_NONE);
  int b = 5;
  ASSERT_CODE(manypy_value_get_bool(v, &b), MANYPY_ERR_WRONG_KIND);
  assert_int_equal(b, 5);
  manypy_value_free(v);
}

static void test_value_bool(void** state) {
  (void)state;
  assert_int_equal(EVAL_BOOL(g_pool, 0, "True"), 1);
  assert_int_equal(EVAL_BOOL(g_pool, 1, "False"), 0);
  assert_int_equal(EVAL_BOOL(g_pool, 2, "3 > 2"), 1);
}

static void test_value_int64(void** state) {
  (void)state;
  assert_int_equal(EVAL_INT64(g_pool, 0, "42"), 42);
  assert_true(EVAL_INT64(g_pool, 0, "-2**63") == INT64_MIN);
  assert_true(EVAL_INT64(g_pool, 1, "2**63 - 1") == INT64_MAX);
  assert_true(EVAL_INT64(g_pool, 2, "-7") == -7);
}

static void test_value_int_out_of_range(void** state) {
  (void)state;
  manypy_status* s = EVAL_FAILS(0, "2**64", MANYPY_ERR_OUT_OF_RANGE);
  ASSERT_CONTAINS(manypy_status_message(s), "int64");
  ASSERT_STARTS_WITH(manypy_status_message(s), "interpreter 0: ");
  manypy_status_free(s);
  manypy_status_free(EVAL_FAILS(1, "2**63", MANYPY_ERR_OUT_OF_RANGE));
  manypy_status_free(EVAL_FAILS(1, "-2**63 - 1", MANYPY_ERR_OUT_OF_RANGE));
  assert_still_works(0);
  assert_still_works(1);
}

static void test_value_double(void** state) {
  (void)state;
  assert_true(EVAL_DOUBLE(g_pool, 0, "2.5") == 2.5);
  assert_true(EVAL_DOUBLE(g_pool, 1, "-0.125") == -0.125);
  assert_true(EVAL_DOUBLE(g_pool, 2, "1 / 4") == 0.25);
}

static void test_value_double_special(void** state) {
  (void)state;
  double inf = EVAL_DOUBLE(g_pool, 0, "float('inf')");
  assert_true(inf > 1e308 && inf == inf);
  double nan = EVAL_DOUBLE(g_pool, 0, "float('nan')");
  assert_true(nan != nan);
  assert_true(EVAL_DOUBLE(g_pool, 0, "-0.0") == 0.0);
}

static void test_value_large_string(void** state) {
  (void)state;
  size_t n = 0;
  char* s = EVAL_STRING(g_pool, 1, "'ab' * 5_000_000 + 'end'", &n);
  assert_int_equal(n, 10000003);
  assert_memory_equal(s, "abab", 4);
  assert_memory_equal(s + 9999998, "abend", 6); /* with its NUL */
  free(s);
}

static void test_value_utf8_string(void** state) {
  (void)state;
  size_t n = 0;
  /* The source is UTF-8: "h\u00e9llo". */
  char* s = EVAL_STRING(g_pool, 0, "'h\xc3\xa9llo'", &n);
  assert_int_equal(n, 6);
  assert_memory_equal(s, "h\xc3\xa9llo", 7); /* includes the NUL */
  free(s);
  /* A non-BMP character, made in Python from its code point. */
  s = EVAL_STRING(g_pool, 1, "chr(0x1F600) + 'x'", &n);
  assert_int_equal(n, 5);
  assert_memory_equal(s, "\xf0\x9f\x98\x80x", 6);
  free(s);
  s = EVAL_STRING(g_pool, 2, "''", &n);
  assert_int_equal(n, 0);
  assert_int_equal(s[0], '\0');
  free(s);
}

static void test_value_string_with_nul(void** state) {
  (void)state;
  size_t n = 99;
  char* s = EVAL_STRING(g_pool, 0, "'a\\0b'", &n);
  assert_int_equal(n, 3);
  assert_memory_equal(s, "a\0b\0", 4);
  free(s);
}

static void test_value_unsupported_types(void** state) {
  (void)state;
  manypy_status* s = EVAL_FAILS(1, "object()", MANYPY_ERR_UNSUPPORTED_TYPE);
  ASSERT_CONTAINS(manypy_status_message(s), "object");
  manypy_status_free(s);
  /* Inside a container, and as a dict key. */
  s = EVAL_FAILS(0, "[1, {'a': {1, 2}}]", MANYPY_ERR_UNSUPPORTED_TYPE);
  ASSERT_CONTAINS(manypy_status_message(s), "'set'");
  manypy_status_free(s);
  s = EVAL_FAILS(2, "{1: 'one'}", MANYPY_ERR_UNSUPPORTED_TYPE);
  ASSERT_CONTAINS(manypy_status_message(s), "dict key of type 'int'");
  manypy_status_free(s);
  s = EVAL_FAILS(0, "__import__('torch').ones(2).to_sparse()", MANYPY_ERR_BAD_TENSOR);
  manypy_status_free(s);
  assert_still_works(0);
  assert_still_works(1);
  assert_still_works(2);
}

static void test_value_wrong_kind(void** state) {
  (void)state;
  manypy_value* str = NULL;
  manypy_value* num = NULL;
  manypy_value* dbl = NULL;
  manypy_value* flag = NULL;
  ASSERT_OK(manypy_pool_eval(g_pool, 0, "'seven'", &str));
  ASSERT_OK(manypy_pool_eval(g_pool, 0, "7", &num));
  ASSERT_OK(manypy_pool_eval(g_pool, 0, "7.0", &dbl));
  ASSERT_OK(manypy_pool_eval(g_pool, 0, "True", &flag));
  assert_int_equal(manypy_value_get_kind(str), MANYPY_VALUE_STRING);
  assert_int_equal(manypy_value_get_kind(num), MANYPY_VALUE_INT64);
  assert_int_equal(manypy_value_get_kind(dbl), MANYPY_VALUE_DOUBLE);
  assert_int_equal(manypy_value_get_kind(flag), MANYPY_VALUE_BOOL);

  int b = 3;
  int64_t i = 3;
  double d = 3.5;
  const char* text = "untouched";
  size_t n = 3;
  manypy_status* s = EXPECT_CODE(manypy_value_get_int64(str, &i), MANYPY_ERR_WRONG_KIND);
  /* The message names the getter that was called. */
  ASSERT_CONTAINS(manypy_status_message(s), "manypy_value_get_int64");
  assert_string_equal(manypy_status_python_type(s), "");
  manypy_status_free(s);
  /* No silent conversions: an int is not a double, a bool is not an int. */
  ASSERT_CODE(manypy_value_get_double(num, &d), MANYPY_ERR_WRONG_KIND);
  ASSERT_CODE(manypy_value_get_int64(dbl, &i), MANYPY_ERR_WRONG_KIND);
  ASSERT_CODE(manypy_value_get_int64(flag, &i), MANYPY_ERR_WRONG_KIND);
  ASSERT_CODE(manypy_value_get_bool(num, &b), MANYPY_ERR_WRONG_KIND);
  ASSERT_CODE(manypy_value_get_string(num, &text, &n), MANYPY_ERR_WRONG_KIND);
  assert_int_equal(b, 3);
  assert_int_equal(i, 3);
  assert_true(d == 3.5);
  assert_string_equal(text, "untouched");
  assert_int_equal(n, 3);
  /* The right getters still work on the same values. */
  ASSERT_OK(manypy_value_get_int64(num, &i));
  assert_int_equal(i, 7);
  ASSERT_OK(manypy_value_get_string(str, &text, &n));
  assert_string_equal(text, "seven");
  assert_int_equal(n, 5);
  manypy_value_free(str);
  manypy_value_free(num);
  manypy_value_free(dbl);
  manypy_value_free(flag);
}

/* ---- 5. errors ------------------------------------------------------------ */

static void test_syntax_error_exec(void** state) {
  (void)state;
  manypy_status* s = EXPECT_CODE(manypy_pool_exec(g_pool, 0, "x = = 1"), MANYPY_ERR_SYNTAX);
  assert_string_equal(manypy_status_python_type(s), "SyntaxError");
  ASSERT_CONTAINS(manypy_status_traceback(s), "SyntaxError");
  ASSERT_STARTS_WITH(manypy_status_message(s), "interpreter 0: ");
  ASSERT_CONTAINS(manypy_status_message(s), "SyntaxError");
  manypy_status_free(s);
  assert_still_works(0);
}

static void test_syntax_error_eval(void** state) {
  (void)state;
  manypy_status* s = EVAL_FAILS(2, "1 +", MANYPY_ERR_SYNTAX);
  assert_string_equal(manypy_status_python_type(s), "SyntaxError");
  ASSERT_CONTAINS(manypy_status_traceback(s), "SyntaxError");
  ASSERT_STARTS_WITH(manypy_status_message(s), "interpreter 2: ");
  manypy_status_free(s);
  /* A statement is not an expression. */
  s = EVAL_FAILS(2, "y = 1", MANYPY_ERR_SYNTAX);
  assert_string_equal(manypy_status_python_type(s), "SyntaxError");
  manypy_status_free(s);
  assert_still_works(2);
}

static void test_python_exception_with_traceback(void** state) {
  (void)state;
  const char* source =
      "def divide_by_zero_helper(n):\n"
      "    d = n - n\n"
      "    return n / d\n"
      "\n"
      "result = divide_by_zero_helper(3)\n";
  manypy_status* s = EXPECT_CODE(manypy_pool_exec(g_pool, 1, source), MANYPY_ERR_PYTHON);
  assert_string_equal(manypy_status_python_type(s), "ZeroDivisionError");
  ASSERT_STARTS_WITH(manypy_status_message(s), "interpreter 1: ");
  ASSERT_CONTAINS(manypy_status_message(s), "division by zero");
  const char* tb = manypy_status_traceback(s);
  ASSERT_STARTS_WITH(tb, "Traceback (most recent call last):");
  ASSERT_CONTAINS(tb, "ZeroDivisionError");
  ASSERT_CONTAINS(tb, "divide_by_zero_helper");
  ASSERT_CONTAINS(tb, "line 3, in divide_by_zero_helper");
  ASSERT_CONTAINS(tb, "line 5, in <module>");
  manypy_status_free(s);
  assert_still_works(1);
  /* The function was defined before the failing line ran. */
  assert_int_equal(EVAL_BOOL(g_pool, 1, "callable(divide_by_zero_helper)"), 1);
}

static void test_python_exception_from_eval(void** state) {
  (void)state;
  manypy_status* s = EVAL_FAILS(0, "1 // 0", MANYPY_ERR_PYTHON);
  assert_string_equal(manypy_status_python_type(s), "ZeroDivisionError");
  ASSERT_STARTS_WITH(manypy_status_message(s), "interpreter 0: ");
  ASSERT_CONTAINS(manypy_status_traceback(s), "ZeroDivisionError");
  manypy_status_free(s);
  s = EVAL_FAILS(2, "{}['missing_key']", MANYPY_ERR_PYTHON);
  assert_string_equal(manypy_status_python_type(s), "KeyError");
  ASSERT_CONTAINS(manypy_status_message(s), "missing_key");
  manypy_status_free(s);
  assert_still_works(0);
  assert_still_works(2);
}

static void test_custom_exception(void** state) {
  (void)state;
  const char* source =
      "class PoolTestError(Exception):\n"
      "    pass\n"
      "\n"
      "def fail_with_custom():\n"
      "    raise PoolTestError('custom failure 17')\n"
      "\n"
      "fail_with_custom()\n";
  manypy_status* s = EXPECT_CODE(manypy_pool_exec(g_pool, 2, source), MANYPY_ERR_PYTHON);
  assert_string_equal(manypy_status_python_type(s), "PoolTestError");
  assert_string_equal(manypy_status_message(s), "interpreter 2: PoolTestError: custom failure 17");
  ASSERT_CONTAINS(manypy_status_traceback(s), "PoolTestError: custom failure 17");
  ASSERT_CONTAINS(manypy_status_traceback(s), "in fail_with_custom");
  manypy_status_free(s);
  assert_still_works(2);
  /* The class lives on in the interpreter's globals and can be raised from
   * an eval too. */
  s = EVAL_FAILS(2, "(_ for _ in ()).throw(PoolTestError('again'))", MANYPY_ERR_PYTHON);
  assert_string_equal(manypy_status_python_type(s), "PoolTestError");
  ASSERT_CONTAINS(manypy_status_message(s), "again");
  manypy_status_free(s);
  assert_still_works(2);
}

/* SystemExit is an exception like any other: it must not end the process. */
static void test_system_exit_does_not_exit(void** state) {
  (void)state;
  manypy_status* s =
      EXPECT_CODE(manypy_pool_exec(g_pool, 0, "import sys\nsys.exit(3)"), MANYPY_ERR_PYTHON);
  assert_string_equal(manypy_status_python_type(s), "SystemExit");
  assert_string_equal(manypy_status_message(s), "interpreter 0: SystemExit: 3");
  manypy_status_free(s);
  s = EVAL_FAILS(1, "exit(4)", MANYPY_ERR_PYTHON);
  assert_string_equal(manypy_status_python_type(s), "SystemExit");
  manypy_status_free(s);
  assert_still_works(0);
  assert_still_works(1);
}

/* The message is one line even when the exception's text is not. */
static void test_multiline_message_is_one_line(void** state) {
  (void)state;
  manypy_status* s = EXPECT_CODE(
      manypy_pool_exec(g_pool, 1, "raise ValueError('line one\\nline two')"), MANYPY_ERR_PYTHON);
  const char* message = manypy_status_message(s);
  ASSERT_CONTAINS(message, "line one");
  ASSERT_CONTAINS(message, "line two");
  if (strchr(message, '\n') != NULL) fail_msg("the message has a newline: %s", message);
  /* The traceback keeps the text as it was. */
  ASSERT_CONTAINS(manypy_status_traceback(s), "line one\nline two");
  manypy_status_free(s);
}

/* An exception whose str() itself raises. */
static void test_unprintable_exception(void** state) {
  (void)state;
  const char* source =
      "class BadStr(Exception):\n"
      "    def __str__(self):\n"
      "        raise RuntimeError('no str for you')\n"
      "raise BadStr()\n";
  manypy_status* s = EXPECT_CODE(manypy_pool_exec(g_pool, 0, source), MANYPY_ERR_PYTHON);
  assert_string_equal(manypy_status_python_type(s), "BadStr");
  ASSERT_STARTS_WITH(manypy_status_message(s), "interpreter 0: ");
  manypy_status_free(s);
  assert_still_works(0);
}

static void test_recursion_error(void** state) {
  (void)state;
  manypy_status* s = EXPECT_CODE(manypy_pool_exec(g_pool, 2,
                                                  "def recurse_forever(n):\n"
                                                  "    return recurse_forever(n + 1)\n"
                                                  "recurse_forever(0)\n"),
                                 MANYPY_ERR_PYTHON);
  assert_string_equal(manypy_status_python_type(s), "RecursionError");
  ASSERT_CONTAINS(manypy_status_traceback(s), "in recurse_forever");
  manypy_status_free(s);
  assert_still_works(2);
}

static void test_interpreter_index_out_of_range(void** state) {
  (void)state;
  const int32_t bad[] = {-2, POOL_SIZE, 1000, INT32_MIN};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; ++k) {
    manypy_status* s = EVAL_FAILS(bad[k], "1 + 1", MANYPY_ERR_OUT_OF_RANGE);
    char number[32];
    snprintf(number, sizeof number, "%d", (int)bad[k]);
    ASSERT_CONTAINS(manypy_status_message(s), number);
    assert_string_equal(manypy_status_python_type(s), "");
    manypy_status_free(s);
    ASSERT_CODE(manypy_pool_exec(g_pool, bad[k], "x = 1"), MANYPY_ERR_OUT_OF_RANGE);
  }
  for (int32_t i = 0; i < POOL_SIZE; ++i) assert_still_works(i);
}

/* ---- 6. pool semantics ------------------------------------------------------ */

static void test_exec_all_defines_everywhere(void** state) {
  (void)state;
  ASSERT_OK(manypy_pool_exec_all(g_pool,
                                 "def triple(x):\n"
                                 "    return 3 * x\n"));
  for (int32_t i = 0; i < POOL_SIZE; ++i) {
    assert_int_equal(EVAL_INT64(g_pool, i, "triple(14)"), 42);
  }
  assert_int_equal(EVAL_INT64(g_pool, MANYPY_ANY_INTERPRETER, "triple(5)"), 15);
}

static void test_exec_all_stops_at_first_failure(void** state) {
  (void)state;
  for (int32_t i = 0; i < POOL_SIZE; ++i) {
    char source[64];
    snprintf(source, sizeof source, "my_index = %d", (int)i);
    ASSERT_OK(manypy_pool_exec(g_pool, i, source));
  }
  manypy_status* s = EXPECT_CODE(manypy_pool_exec_all(g_pool,
                                                      "reached_exec_all = True\n"
                                                      "if my_index == 1:\n"
                                                      "    raise ValueError('stop at one')\n"),
                                 MANYPY_ERR_PYTHON);
  ASSERT_STARTS_WITH(manypy_status_message(s), "interpreter 1: ");
  ASSERT_CONTAINS(manypy_status_message(s), "stop at one");
  assert_string_equal(manypy_status_python_type(s), "ValueError");
  manypy_status_free(s);
  assert_int_equal(EVAL_BOOL(g_pool, 0, "reached_exec_all"), 1);
  assert_int_equal(EVAL_BOOL(g_pool, 1, "reached_exec_all"), 1);
  /* Index order, stopped at 1: interpreter 2 never ran it. */
  s = EVAL_FAILS(2, "reached_exec_all", MANYPY_ERR_PYTHON);
  assert_string_equal(manypy_status_python_type(s), "NameError");
  manypy_status_free(s);
}

static void test_isolation_of_globals(void** state) {
  (void)state;
  ASSERT_OK(manypy_pool_exec(g_pool, 0, "isolated_global = 1234"));
  assert_int_equal(EVAL_INT64(g_pool, 0, "isolated_global"), 1234);
  manypy_status* s = EVAL_FAILS(1, "isolated_global", MANYPY_ERR_PYTHON);
  assert_string_equal(manypy_status_python_type(s), "NameError");
  ASSERT_CONTAINS(manypy_status_message(s), "isolated_global");
  ASSERT_STARTS_WITH(manypy_status_message(s), "interpreter 1: ");
  manypy_status_free(s);
  /* Globals persist in interpreter 0 across calls. */
  ASSERT_OK(manypy_pool_exec(g_pool, 0, "isolated_global += 1"));
  assert_int_equal(EVAL_INT64(g_pool, 0, "isolated_global"), 1235);
}

static void test_any_interpreter(void** state) {
  (void)state;
  ASSERT_OK(manypy_pool_exec(g_pool, MANYPY_ANY_INTERPRETER, "any_marker = 'set'"));
  assert_int_equal(EVAL_INT64(g_pool, MANYPY_ANY_INTERPRETER, "20 + 22"), 42);
  /* Exactly one interpreter got the global. */
  int found = 0;
  for (int32_t i = 0; i < POOL_SIZE; ++i) {
    found += EVAL_BOOL(g_pool, i, "'any_marker' in globals()");
  }
  assert_int_equal(found, 1);
  /* An error on ANY names the interpreter that ran it. */
  manypy_status* s = EVAL_FAILS(MANYPY_ANY_INTERPRETER, "undefined_name_xyz", MANYPY_ERR_PYTHON);
  ASSERT_STARTS_WITH(manypy_status_message(s), "interpreter ");
  assert_string_equal(manypy_status_python_type(s), "NameError");
  manypy_status_free(s);
}

static void test_torch_everywhere_one_process(void** state) {
  (void)state;
  ASSERT_OK(manypy_pool_exec_all(g_pool, "import torch\nimport os\nimport sys\n"));
  int64_t sys_ids[POOL_SIZE];
  for (int32_t i = 0; i < POOL_SIZE; ++i) {
    assert_true(EVAL_DOUBLE(g_pool, i, "torch.ones(2).sum().item()") == 2.0);
    assert_int_equal(EVAL_INT64(g_pool, i, "os.getpid()"), (int64_t)getpid());
    char source[64];
    snprintf(source, sizeof source, "sys.manypy_marker = %d", (int)(100 + i));
    ASSERT_OK(manypy_pool_exec(g_pool, i, source));
    sys_ids[i] = EVAL_INT64(g_pool, i, "id(sys)");
  }
  for (int32_t i = 0; i < POOL_SIZE; ++i) {
    /* Each interpreter kept its own marker: its own sys module. */
    assert_int_equal(EVAL_INT64(g_pool, i, "sys.manypy_marker"), 100 + i);
    for (int32_t j = 0; j < i; ++j) assert_true(sys_ids[i] != sys_ids[j]);
    /* And its own torch: module objects live at different addresses. */
  }
  int64_t torch0 = EVAL_INT64(g_pool, 0, "id(torch)");
  int64_t torch1 = EVAL_INT64(g_pool, 1, "id(torch)");
  assert_true(torch0 != torch1);
}

static int group_setup(void** state) {
  (void)state;
  double t0 = capi_now();
  manypy_status* s = capi_create_pool(POOL_SIZE, &g_pool);
  if (s != NULL) {
    capi_print_status("creating the pool", s, __FILE__, __LINE__);
    manypy_status_free(s);
    return -1;
  }
  fprintf(stderr, "capi_pool: %d interpreters started in %.2f s\n", POOL_SIZE, capi_now() - t0);
  return 0;
}

static int group_teardown(void** state) {
  (void)state;
  manypy_pool_destroy(g_pool);
  g_pool = NULL;
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_value_none),
      cmocka_unit_test(test_value_bool),
      cmocka_unit_test(test_value_int64),
      cmocka_unit_test(test_value_int_out_of_range),
      cmocka_unit_test(test_value_double),
      cmocka_unit_test(test_value_double_special),
      cmocka_unit_test(test_value_large_string),
      cmocka_unit_test(test_value_utf8_string),
      cmocka_unit_test(test_value_string_with_nul),
      cmocka_unit_test(test_value_unsupported_types),
      cmocka_unit_test(test_value_wrong_kind),
      cmocka_unit_test(test_syntax_error_exec),
      cmocka_unit_test(test_syntax_error_eval),
      cmocka_unit_test(test_python_exception_with_traceback),
      cmocka_unit_test(test_python_exception_from_eval),
      cmocka_unit_test(test_custom_exception),
      cmocka_unit_test(test_system_exit_does_not_exit),
      cmocka_unit_test(test_multiline_message_is_one_line),
      cmocka_unit_test(test_unprintable_exception),
      cmocka_unit_test(test_recursion_error),
      cmocka_unit_test(test_interpreter_index_out_of_range),
      cmocka_unit_test(test_exec_all_defines_everywhere),
      cmocka_unit_test(test_exec_all_stops_at_first_failure),
      cmocka_unit_test(test_isolation_of_globals),
      cmocka_unit_test(test_any_interpreter),
      cmocka_unit_test(test_torch_everywhere_one_process),
  };
  return cmocka_run_group_tests_name("capi_pool", tests, group_setup, group_teardown);
}
