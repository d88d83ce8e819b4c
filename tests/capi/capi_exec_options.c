/*
 * manypy_pool_exec_with_options and manypy_pool_eval_with_options: NULL
 * options behave as manypy_pool_exec / _eval; the options' interpreter is
 * the one that runs the code; a timeout stops a loop, a cancel token an
 * eval, a bound already past or a token already cancelled runs nothing,
 * and the interpreter keeps serving after each stop. Every case in DIRECT
 * and in HANDOFF mode (a pool of 2 interpreters each). No time is
 * asserted: a stop is known from its code, and a cancel is sent once the
 * code says (through a pipe) that it is running.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "capi_test_support.h"

static capi_fixture g; /* a pool, no archive */

static int setup_direct(void** state) {
  (void)state;
  return capi_fixture_setup(&g, 2, MANYPY_THREAD_MODE_DIRECT, NULL);
}

static int setup_handoff(void** state) {
  (void)state;
  return capi_fixture_setup(&g, 2, MANYPY_THREAD_MODE_HANDOFF, NULL);
}

static int teardown_pool(void** state) {
  (void)state;
  capi_fixture_teardown(&g);
  return 0;
}

/* Options pinned to `interpreter`, with a timeout in ms (0: none) and a
 * token (NULL: none). */
static manypy_call_options* options_with(int32_t interpreter, int64_t timeout_ms,
                                         manypy_cancel_token* token) {
  manypy_call_options* o = CALL_OPTIONS(interpreter, timeout_ms);
  ASSERT_OK(manypy_call_options_set_cancel_token(o, token));
  return o;
}

/* eval_with_options of a bool expression. */
static int eval_bool(const char* expression, const manypy_call_options* o) {
  manypy_value* v = NULL;
  ASSERT_OK(manypy_pool_eval_with_options(g.pool, expression, o, &v));
  int b = -1;
  ASSERT_OK(manypy_value_get_bool(v, &b));
  manypy_value_free(v);
  return b;
}

/* Interpreter `interpreter` serves, and kept its globals. */
static void assert_serves(int32_t interpreter) {
  ASSERT_OK(manypy_pool_check_interpreter(g.pool, interpreter));
  manypy_call_options* o = options_with(interpreter, 0, NULL);
  assert_int_equal(eval_bool("kept_across_stops == 'yes' and 6 * 7 == 42", o), 1);
  manypy_call_options_free(o);
}

/* A status of a stop: its code, and for code that was running, the Python
 * type of the stop and a traceback through the source. */
static void check_stop(manypy_status* s, manypy_code code, int ran) {
  manypy_status* checked = EXPECT_CODE(s, code);
  ASSERT_CONTAINS(manypy_status_message(checked),
                  code == MANYPY_ERR_CANCELLED ? "cancelled" : "deadline exceeded");
  if (ran) {
    assert_string_equal(manypy_status_python_type(checked), code == MANYPY_ERR_CANCELLED
                                                                ? "manypy.Cancelled"
                                                                : "manypy.DeadlineExceeded");
    ASSERT_CONTAINS(manypy_status_traceback(checked), "<manypy>");
  } else {
    assert_string_equal(manypy_status_python_type(checked), "");
  }
  manypy_status_free(checked);
}

static void test_setup_globals(void** state) {
  (void)state;
  ASSERT_OK(manypy_pool_exec_all(g.pool,
                                 "import os\n"
                                 "kept_across_stops = 'yes'\n"
                                 "def spin():\n"
                                 "    while True:\n"
                                 "        pass\n"
                                 "def spin_after_telling(fd):\n"
                                 "    os.write(fd, b'r')\n"
                                 "    while True:\n"
                                 "        pass\n"));
}

/* ---- NULL options: the old functions ------------------------------------ */

/* The same outcome from manypy_pool_eval(ANY) and _eval_with_options(NULL):
 * equal values, or equal codes and Python types. */
static void check_same_outcome(const char* expression) {
  manypy_value* a = NULL;
  manypy_value* b = NULL;
  manypy_status* old = manypy_pool_eval(g.pool, MANYPY_ANY_INTERPRETER, expression, &a);
  manypy_status* now = manypy_pool_eval_with_options(g.pool, expression, NULL, &b);
  if (manypy_status_code(old) != manypy_status_code(now) ||
      strcmp(manypy_status_python_type(old), manypy_status_python_type(now)) != 0) {
    capi_print_status("manypy_pool_eval", old, __FILE__, __LINE__);
    capi_print_status("manypy_pool_eval_with_options", now, __FILE__, __LINE__);
    fail_msg("%s: the two evals differ", expression);
  }
  if (old == NULL) ASSERT_VALUES_EQUAL(a, b);
  assert_true((a == NULL) == (old != NULL));
  assert_true((b == NULL) == (now != NULL));
  manypy_status_free(old);
  manypy_status_free(now);
  manypy_value_free(a);
  manypy_value_free(b);
}

static void test_null_options_are_the_old_functions(void** state) {
  (void)state;
  check_same_outcome("6 * 7");
  check_same_outcome("[1, 'two', (3.0, None), {'k': b'v'}, True]");
  check_same_outcome("__import__('torch').arange(4)");
  check_same_outcome("1 / 0");
  check_same_outcome("def f(:");
  check_same_outcome("{1, 2}");
  check_same_outcome("2 ** 70");
  check_same_outcome("undefined_name");
  ASSERT_OK(manypy_pool_exec_with_options(g.pool, "made_by_exec = 1", NULL));
  manypy_status* s = EXPECT_CODE(
      manypy_pool_exec_with_options(g.pool, "raise ValueError('v')", NULL), MANYPY_ERR_PYTHON);
  assert_string_equal(manypy_status_python_type(s), "ValueError");
  ASSERT_CONTAINS(manypy_status_traceback(s), "ValueError: v");
  manypy_status_free(s);
  ASSERT_CODE(manypy_pool_exec_with_options(g.pool, "if:", NULL), MANYPY_ERR_SYNTAX);
  /* Options with nothing set are the same as none. */
  manypy_call_options* o = manypy_call_options_new();
  manypy_value* v = NULL;
  ASSERT_OK(manypy_pool_eval_with_options(g.pool, "6 * 7", o, &v));
  int64_t n = 0;
  ASSERT_OK(manypy_value_get_int64(v, &n));
  assert_int_equal(n, 42);
  manypy_value_free(v);
  manypy_call_options_free(o);
}

/* ---- the interpreter ---------------------------------------------------- */

static void test_the_options_choose_the_interpreter(void** state) {
  (void)state;
  manypy_call_options* on0 = options_with(0, 0, NULL);
  manypy_call_options* on1 = options_with(1, 0, NULL);
  ASSERT_OK(manypy_pool_exec_with_options(g.pool, "pinned_here = 1", on1));
  assert_int_equal(eval_bool("'pinned_here' in globals()", on1), 1);
  assert_int_equal(eval_bool("'pinned_here' in globals()", on0), 0);
  ASSERT_OK(manypy_pool_exec_with_options(g.pool, "del pinned_here", on1));
  manypy_call_options* on2 = options_with(2, 0, NULL);
  manypy_value* v = NULL;
  manypy_status* s =
      EXPECT_CODE(manypy_pool_eval_with_options(g.pool, "1", on2, &v), MANYPY_ERR_OUT_OF_RANGE);
  ASSERT_CONTAINS(manypy_status_message(s), "interpreter index 2");
  manypy_status_free(s);
  ASSERT_CODE(manypy_pool_exec_with_options(g.pool, "x = 1", on2), MANYPY_ERR_OUT_OF_RANGE);
  assert_null(v);
  manypy_call_options_free(on0);
  manypy_call_options_free(on1);
  manypy_call_options_free(on2);
}

/* ---- deadlines ------------------------------------------------------------- */

static void test_exec_loop_stops_at_its_timeout(void** state) {
  (void)state;
  for (int32_t interpreter = 0; interpreter < 2; ++interpreter) {
    manypy_call_options* o = options_with(interpreter, 100, NULL);
    check_stop(manypy_pool_exec_with_options(g.pool, "while True:\n    pass\n", o),
               MANYPY_ERR_DEADLINE_EXCEEDED, 1);
    manypy_call_options_free(o);
    assert_serves(interpreter);
  }
}

static void test_eval_stops_at_its_timeout(void** state) {
  (void)state;
  manypy_call_options* o = options_with(MANYPY_ANY_INTERPRETER, 100, NULL);
  manypy_value* v = NULL;
  check_stop(manypy_pool_eval_with_options(g.pool, "spin()", o, &v), MANYPY_ERR_DEADLINE_EXCEEDED,
             1);
  assert_null(v);
  manypy_call_options_free(o);
  assert_serves(0);
  assert_serves(1);
}

static void test_past_deadline_runs_nothing(void** state) {
  (void)state;
  manypy_call_options* o = options_with(0, 0, NULL);
  ASSERT_OK(manypy_call_options_set_deadline(o, manypy_monotonic_ns() - 1));
  check_stop(manypy_pool_exec_with_options(g.pool, "ran_past_deadline = 1", o),
             MANYPY_ERR_DEADLINE_EXCEEDED, 0);
  manypy_value* v = NULL;
  check_stop(manypy_pool_eval_with_options(g.pool, "1", o, &v), MANYPY_ERR_DEADLINE_EXCEEDED, 0);
  assert_null(v);
  manypy_call_options_free(o);
  o = options_with(0, 0, NULL);
  assert_int_equal(eval_bool("'ran_past_deadline' in globals()", o), 0);
  manypy_call_options_free(o);
}

/* A bound that does not expire changes nothing: results as without one. */
static void test_bound_that_does_not_expire_changes_nothing(void** state) {
  (void)state;
  manypy_cancel_token* token = manypy_cancel_token_new();
  manypy_call_options* o = options_with(MANYPY_ANY_INTERPRETER, 60000, token);
  for (int k = 0; k < 50; ++k) {
    char expression[64];
    snprintf(expression, sizeof expression, "[%d, str(%d), (%d,)]", k, k, k);
    manypy_value* with = NULL;
    manypy_value* without = NULL;
    ASSERT_OK(manypy_pool_eval_with_options(g.pool, expression, o, &with));
    ASSERT_OK(manypy_pool_eval(g.pool, MANYPY_ANY_INTERPRETER, expression, &without));
    ASSERT_VALUES_EQUAL(with, without);
    manypy_value_free(with);
    manypy_value_free(without);
  }
  ASSERT_OK(manypy_pool_exec_with_options(g.pool, "bounded_but_fine = 1\ndel bounded_but_fine", o));
  assert_int_equal(manypy_cancel_token_is_cancelled(token), 0);
  manypy_call_options_free(o);
  manypy_cancel_token_free(token);
}

/* ---- cancellation ----------------------------------------------------------- */

typedef struct {
  int fd; /* read end: the code writes once it runs */
  manypy_cancel_token* token;
  int cancelled;
} canceller;

static void* cancel_once_running(void* arg) {
  canceller* c = arg;
  char byte;
  if (read(c->fd, &byte, 1) == 1) {
    manypy_cancel_token_cancel(c->token);
    c->cancelled = 1;
  }
  return NULL;
}

static void test_token_cancels_a_running_eval(void** state) {
  (void)state;
  for (int32_t interpreter = 0; interpreter < 2; ++interpreter) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    manypy_cancel_token* token = manypy_cancel_token_new();
    canceller c = {fds[0], token, 0};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, cancel_once_running, &c), 0);
    manypy_call_options* o = options_with(interpreter, 0, token);
    char expression[64];
    snprintf(expression, sizeof expression, "spin_after_telling(%d)", fds[1]);
    manypy_value* v = NULL;
    check_stop(manypy_pool_eval_with_options(g.pool, expression, o, &v), MANYPY_ERR_CANCELLED, 1);
    assert_null(v);
    assert_int_equal(pthread_join(thread, NULL), 0);
    assert_int_equal(c.cancelled, 1);
    close(fds[0]);
    close(fds[1]);
    assert_serves(interpreter);
    /* A cancelled token fails later calls at once: nothing runs. */
    check_stop(manypy_pool_exec_with_options(g.pool, "ran_after_cancel = 1", o),
               MANYPY_ERR_CANCELLED, 0);
    manypy_call_options_free(o);
    manypy_cancel_token_free(token);
    o = options_with(interpreter, 0, NULL);
    assert_int_equal(eval_bool("'ran_after_cancel' in globals()", o), 0);
    manypy_call_options_free(o);
  }
}

#define CASES                                                                                      \
  cmocka_unit_test(test_setup_globals), cmocka_unit_test(test_null_options_are_the_old_functions), \
      cmocka_unit_test(test_the_options_choose_the_interpreter),                                   \
      cmocka_unit_test(test_exec_loop_stops_at_its_timeout),                                       \
      cmocka_unit_test(test_eval_stops_at_its_timeout),                                            \
      cmocka_unit_test(test_past_deadline_runs_nothing),                                           \
      cmocka_unit_test(test_bound_that_does_not_expire_changes_nothing),                           \
      cmocka_unit_test(test_token_cancels_a_running_eval)

int main(void) {
  const struct CMUnitTest cases[] = {CASES};
  int failed = cmocka_run_group_tests_name("direct", cases, setup_direct, teardown_pool);
  failed += cmocka_run_group_tests_name("handoff", cases, setup_handoff, teardown_pool);
  return failed == 0 ? 0 : 1;
}
