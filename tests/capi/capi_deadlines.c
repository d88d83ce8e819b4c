/*
 * Deadlines and cancellation (manypy_call_options_set_timeout, _set_deadline,
 * _set_cancel_token): a model stuck in Python is stopped, its interpreter
 * keeps serving, a waiting call gives up, and a bound that does not expire
 * changes nothing. Runs every case in DIRECT and in HANDOFF mode (one pool of
 * 2 interpreters each, one after the other), then TorchScript on the host.
 *
 * Timing bounds are the contract under test (a stop within its timeout plus
 * 100 ms), not performance figures: each is checked with a wide margin over
 * what the mechanism needs (about one GIL switch interval, 5 ms).
 */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "capi_test_support.h"

static capi_fixture g; /* stuck.pt's model */

static int setup_direct(void** state) {
  (void)state;
  return capi_fixture_setup(&g, 2, MANYPY_THREAD_MODE_DIRECT, "stuck.pt");
}

static int setup_handoff(void** state) {
  (void)state;
  return capi_fixture_setup(&g, 2, MANYPY_THREAD_MODE_HANDOFF, "stuck.pt");
}

static int teardown_pool(void** state) {
  (void)state;
  capi_fixture_teardown(&g);
  return 0;
}

/* Options pinned to `interpreter` with a timeout in ms (0: none) and a token
 * (NULL: none). */
static manypy_call_options* options_with(int32_t interpreter, int64_t timeout_ms,
                                         manypy_cancel_token* token) {
  manypy_call_options* o = CALL_OPTIONS(interpreter, timeout_ms);
  ASSERT_OK(manypy_call_options_set_cancel_token(o, token));
  return o;
}

/* The stuck model's forward(x) on `interpreter` must give x * 2. */
static void assert_serves(int32_t interpreter) {
  float x[3] = {1, 2, 3}, twice[3] = {2, 4, 6};
  int64_t shape[1] = {3};
  manypy_value* items[1] = {F32_TENSOR(x, 1, shape)};
  manypy_value* args = TUPLE_OF(1, items);
  manypy_call_options* o = options_with(interpreter, 0, NULL);
  manypy_value* out = NULL;
  ASSERT_OK(manypy_object_call(g.model, NULL, args, NULL, o, &out));
  ASSERT_F32_TENSOR(out, 1, shape, twice, 0, "forward(x) after a stop");
  manypy_value_free(out);
  manypy_value_free(args);
  manypy_call_options_free(o);
}

/* Calls stuck.<method>() with `o`, expects `code`, returns the elapsed ms.
 * The status must name the stop and, for a stop while Python ran, carry the
 * Python type and a traceback through `method`. */
static double expect_stop(const char* method, manypy_value* args, const manypy_call_options* o,
                          manypy_code code, int ran) {
  manypy_value* out = NULL;
  double t0 = capi_now();
  manypy_status* s = EXPECT_CODE(manypy_object_call(g.model, method, args, NULL, o, &out), code);
  double ms = (capi_now() - t0) * 1e3;
  assert_null(out);
  ASSERT_CONTAINS(manypy_status_message(s),
                  code == MANYPY_ERR_CANCELLED ? "cancelled" : "deadline exceeded");
  if (ran) {
    assert_string_equal(manypy_status_python_type(s), code == MANYPY_ERR_CANCELLED
                                                          ? "manypy.Cancelled"
                                                          : "manypy.DeadlineExceeded");
    ASSERT_CONTAINS(manypy_status_traceback(s), method);
  }
  manypy_status_free(s);
  return ms;
}

/* ---- deadlines ------------------------------------------------------------ */

static void test_python_loop_stops_at_its_deadline(void** state) {
  (void)state;
  manypy_call_options* o = options_with(0, 300, NULL);
  double ms = expect_stop("spin", NULL, o, MANYPY_ERR_DEADLINE_EXCEEDED, 1);
  print_message("while True stopped after %.1f ms (timeout 300 ms)\n", ms);
  assert_true(ms >= 299 && ms <= 400);
  manypy_call_options_free(o);
  assert_serves(0);
}

/* Loops on one line, at the top level of exec'd source and in a function:
 * Python 3.11 sends no line event for the jump to itself such a loop makes,
 * so the stop reaches it through opcode events (core/interp/stop.c). */
static void test_one_line_loops_stop_at_their_deadline(void** state) {
  (void)state;
  const char* sources[] = {"while True: pass", "def one_line():\n    while True: pass\none_line()"};
  for (size_t k = 0; k < sizeof sources / sizeof sources[0]; k++) {
    manypy_call_options* o = options_with(0, 300, NULL);
    double t0 = capi_now();
    manypy_status* s = EXPECT_CODE(manypy_pool_exec_with_options(g.pool, sources[k], o),
                                   MANYPY_ERR_DEADLINE_EXCEEDED);
    double ms = (capi_now() - t0) * 1e3;
    print_message("one-line loop %zu stopped after %.1f ms (timeout 300 ms)\n", k, ms);
    assert_true(ms >= 299 && ms <= 400);
    assert_string_equal(manypy_status_python_type(s), "manypy.DeadlineExceeded");
    manypy_status_free(s);
    manypy_call_options_free(o);
    assert_serves(0);
  }
}

/* A model that catches the stop and goes on: the stop escalates after the
 * pool's grace period (100 ms), which cuts clean-up short, so the
 * interpreter is retired; the pool replaces it in the same index
 * (docs/serving.md, "Retired interpreters") and serves on. Last in each
 * group: the replacement's start is what follows. */
static void test_catching_the_stop_retires_the_interpreter(void** state) {
  (void)state;
  manypy_call_options* o = options_with(1, 200, NULL);
  manypy_value* out = NULL;
  double t0 = capi_now();
  manypy_status* s = EXPECT_CODE(manypy_object_call(g.model, "spin_catching", NULL, NULL, o, &out),
                                 MANYPY_ERR_DEADLINE_EXCEEDED);
  double ms = (capi_now() - t0) * 1e3;
  print_message("except BaseException loop stopped after %.1f ms (timeout 200 ms, grace 100 ms)\n",
                ms);
  assert_true(ms >= 299 &&
              ms <= 800); /* the contract: timeout + grace, with room for a loaded machine */
  assert_string_equal(manypy_status_python_type(s), "manypy.DeadlineExceeded");
  ASSERT_CONTAINS(manypy_status_traceback(s), "spin_catching");
  ASSERT_CONTAINS(manypy_status_message(s), "retired");
  ASSERT_CONTAINS(manypy_status_message(s), "100 ms grace period");
  manypy_status_free(s);

  /* Replaced before the call returned: index 1 names the replacement,
   * which serves once it has started (calls pinned to it wait for it). */
  manypy_pool_stats stats;
  memset(&stats, 0, sizeof stats);
  stats.struct_size = sizeof stats;
  ASSERT_OK(manypy_pool_get_stats(g.pool, &stats));
  assert_int_equal(stats.replaced, 1);
  assert_int_equal(stats.no_room, 0);
  ASSERT_OK(manypy_pool_check_interpreter(g.pool, 1));
  ASSERT_OK(manypy_pool_check_interpreter(g.pool, 0));
  ASSERT_CODE(manypy_pool_check_interpreter(g.pool, 2), MANYPY_ERR_OUT_OF_RANGE);
  manypy_call_options_free(o);
  for (int k = 0; k < 4; ++k) assert_serves(MANYPY_ANY_INTERPRETER);
  assert_serves(0);
  assert_serves(1);
}

static void test_torch_loop_stops_between_operators(void** state) {
  (void)state;
  float x[4] = {0.1f, 0.2f, 0.3f, 0.4f};
  int64_t shape[2] = {2, 2};
  manypy_value* items[1] = {F32_TENSOR(x, 2, shape)};
  manypy_value* args = TUPLE_OF(1, items);
  manypy_call_options* o = options_with(0, 200, NULL);
  double ms = expect_stop("spin_torch", args, o, MANYPY_ERR_DEADLINE_EXCEEDED, 1);
  assert_true(ms >= 199 && ms <= 300);
  manypy_value_free(args);
  manypy_call_options_free(o);
  assert_serves(0);
}

static void test_absolute_deadline(void** state) {
  (void)state;
  manypy_call_options* o = options_with(0, 0, NULL);
  ASSERT_OK(manypy_call_options_set_deadline(o, manypy_monotonic_ns() + 150 * 1000000LL));
  double ms = expect_stop("spin", NULL, o, MANYPY_ERR_DEADLINE_EXCEEDED, 1);
  assert_true(ms >= 149 && ms <= 250);
  manypy_call_options_free(o);
}

static void test_past_deadline_runs_nothing(void** state) {
  (void)state;
  manypy_call_options* o = options_with(0, 0, NULL);
  ASSERT_OK(manypy_call_options_set_deadline(o, manypy_monotonic_ns() - 1));
  double ms = expect_stop("spin", NULL, o, MANYPY_ERR_DEADLINE_EXCEEDED, 0);
  assert_true(ms < 50);
  manypy_call_options_free(o);
}

static void test_deadline_that_does_not_expire_changes_nothing(void** state) {
  (void)state;
  manypy_cancel_token* token = manypy_cancel_token_new();
  manypy_call_options* o = options_with(0, 10000, token);
  float x[2] = {5, -1}, twice[2] = {10, -2};
  int64_t shape[1] = {2};
  for (int k = 0; k < 50; ++k) {
    manypy_value* items[1] = {F32_TENSOR(x, 1, shape)};
    manypy_value* args = TUPLE_OF(1, items);
    manypy_value* out = NULL;
    ASSERT_OK(manypy_object_call(g.model, NULL, args, NULL, o, &out));
    ASSERT_F32_TENSOR(out, 1, shape, twice, 0, "forward(x) with a far deadline");
    manypy_value_free(out);
    manypy_value_free(args);
  }
  manypy_value* t = NULL;
  ASSERT_OK(manypy_object_getattr(g.model, "training", o, &t));
  int training = 1;
  ASSERT_OK(manypy_value_get_bool(t, &training));
  assert_int_equal(training, 0);
  manypy_value_free(t);
  assert_int_equal(manypy_cancel_token_is_cancelled(token), 0);
  manypy_call_options_free(o);
  manypy_cancel_token_free(token);
}

static void test_getattr_of_a_looping_property_stops(void** state) {
  (void)state;
  manypy_call_options* o = options_with(1, 200, NULL);
  manypy_value* out = NULL;
  double t0 = capi_now();
  manypy_status* s = EXPECT_CODE(manypy_object_getattr(g.model, "spinning_property", o, &out),
                                 MANYPY_ERR_DEADLINE_EXCEEDED);
  double ms = (capi_now() - t0) * 1e3;
  assert_true(ms >= 199 && ms <= 300);
  assert_null(out);
  ASSERT_CONTAINS(manypy_status_traceback(s), "spinning_property");
  manypy_status_free(s);
  manypy_call_options_free(o);
  assert_serves(1);
}

/* A blocking sleep cannot be interrupted: the stop comes when it returns. */
static void test_sleep_finishes_first(void** state) {
  (void)state;
  manypy_value* items[1] = {manypy_value_new_double(0.4)};
  manypy_value* args = TUPLE_OF(1, items);
  manypy_call_options* o = options_with(0, 100, NULL);
  manypy_value* out = NULL;
  double t0 = capi_now();
  manypy_status* s = EXPECT_CODE(manypy_object_call(g.model, "sleep", args, NULL, o, &out),
                                 MANYPY_ERR_DEADLINE_EXCEEDED);
  double ms = (capi_now() - t0) * 1e3;
  assert_true(ms >= 399 && ms <= 550);
  manypy_status_free(s);
  manypy_value_free(args);
  manypy_call_options_free(o);
}

/* ---- waiting for a busy interpreter ------------------------------------- */

typedef struct {
  manypy_call_options* options;
  const char* method;
  double seconds; /* sleep's argument */
  manypy_code code;
  double ms;
} background_call;

static void* run_background(void* arg) {
  background_call* c = arg;
  manypy_value* args = manypy_value_new_tuple();
  manypy_status* s = manypy_value_append(args, manypy_value_new_double(c->seconds));
  manypy_value* out = NULL;
  double t0 = capi_now();
  if (s == NULL) {
    s = manypy_object_call(g.model, c->method, strcmp(c->method, "sleep") ? NULL : args, NULL,
                           c->options, &out);
  }
  c->ms = (capi_now() - t0) * 1e3;
  c->code = manypy_status_code(s);
  manypy_status_free(s);
  manypy_value_free(out);
  manypy_value_free(args);
  return NULL;
}

/* Interpreter 0 is busy with a 1 s call; a call pinned to it with a 200 ms
 * timeout gives up at its deadline (HANDOFF: it leaves the queue; DIRECT: it
 * gets the GIL in turn, starts, and is stopped) and the busy call is
 * unaffected. */
static void test_deadline_while_waiting_for_a_busy_interpreter(void** state) {
  (void)state;
  background_call busy = {options_with(0, 0, NULL), "sleep", 1.0, MANYPY_OK, 0};
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, run_background, &busy), 0);
  struct timespec pause = {0, 100 * 1000000};
  nanosleep(&pause, NULL);  // the sleep call has started
  manypy_call_options* o = options_with(0, 200, NULL);
  double ms = expect_stop("spin", NULL, o, MANYPY_ERR_DEADLINE_EXCEEDED, 0);
  print_message("gave up waiting after %.1f ms (timeout 200 ms)\n", ms);
  assert_true(ms >= 199 && ms <= 300);
  assert_int_equal(pthread_join(thread, NULL), 0);
  assert_int_equal(busy.code, MANYPY_OK);
  assert_true(busy.ms >= 999);
  manypy_call_options_free(o);
  manypy_call_options_free(busy.options);
  assert_serves(0);
}

/* ---- cancellation ----------------------------------------------------------- */

typedef struct {
  manypy_cancel_token* token;
  int delay_ms;
} canceller;

static void* cancel_later(void* arg) {
  canceller* c = arg;
  struct timespec pause = {c->delay_ms / 1000, (c->delay_ms % 1000) * 1000000L};
  nanosleep(&pause, NULL);
  manypy_cancel_token_cancel(c->token);
  return NULL;
}

/* One token shared by two running calls (one per interpreter), cancelled
 * from a third thread: both stop; later calls with it fail at once. */
static void test_cancel_from_another_thread(void** state) {
  (void)state;
  manypy_cancel_token* token = manypy_cancel_token_new();
  assert_non_null(token);
  background_call other = {options_with(1, 0, token), "spin", 0, MANYPY_OK, 0};
  pthread_t other_thread, cancel_thread;
  assert_int_equal(pthread_create(&other_thread, NULL, run_background, &other), 0);
  canceller c = {token, 300};
  assert_int_equal(pthread_create(&cancel_thread, NULL, cancel_later, &c), 0);
  manypy_call_options* o = options_with(0, 0, token);
  double ms = expect_stop("spin", NULL, o, MANYPY_ERR_CANCELLED, 1);
  print_message("cancelled after %.1f ms (cancelled at 300 ms)\n", ms);
  assert_true(ms >= 299 && ms <= 400);
  assert_int_equal(pthread_join(cancel_thread, NULL), 0);
  manypy_cancel_token_free(token);  // the options keep the token alive
  assert_int_equal(pthread_join(other_thread, NULL), 0);
  assert_int_equal(other.code, MANYPY_ERR_CANCELLED);
  assert_true(other.ms <= 400);
  ms = expect_stop(NULL, NULL, o, MANYPY_ERR_CANCELLED, 0);  // forward: fails at once
  assert_true(ms < 50);
  manypy_call_options_free(o);
  manypy_call_options_free(other.options);
  assert_serves(0);
  assert_serves(1);
}

/* ---- arguments -------------------------------------------------------------- */

static void test_bad_arguments(void** state) {
  (void)state;
  manypy_call_options* o = manypy_call_options_new();
  ASSERT_CODE(manypy_call_options_set_timeout(o, -1), MANYPY_ERR_OUT_OF_RANGE);
  ASSERT_CODE(manypy_call_options_set_deadline(o, -5), MANYPY_ERR_OUT_OF_RANGE);
  ASSERT_INVALID_ARG(manypy_call_options_set_timeout(NULL, 1), "manypy_call_options_set_timeout",
                     "options");
  ASSERT_INVALID_ARG(manypy_call_options_set_deadline(NULL, 1), "manypy_call_options_set_deadline",
                     "options");
  ASSERT_INVALID_ARG(manypy_call_options_set_cancel_token(NULL, NULL),
                     "manypy_call_options_set_cancel_token", "options");
  manypy_cancel_token_cancel(NULL);
  manypy_cancel_token_free(NULL);
  assert_int_equal(manypy_cancel_token_is_cancelled(NULL), 0);
  /* 0 removes a timeout, NULL a token: the call runs unbounded. */
  manypy_cancel_token* token = manypy_cancel_token_new();
  manypy_cancel_token_cancel(token);
  manypy_cancel_token_cancel(token);  // idempotent
  assert_int_equal(manypy_cancel_token_is_cancelled(token), 1);
  ASSERT_OK(manypy_call_options_set_cancel_token(o, token));
  ASSERT_OK(manypy_call_options_set_cancel_token(o, NULL));
  ASSERT_OK(manypy_call_options_set_timeout(o, 0));
  manypy_value* out = NULL;
  ASSERT_OK(manypy_object_getattr(g.model, "training", o, &out));
  manypy_value_free(out);
  manypy_cancel_token_free(token);
  manypy_call_options_free(o);
}

/* ---- TorchScript on the host ---------------------------------------------- */

static manypy_value* loop_args(int64_t n) {
  float x[2] = {0, 0};
  int64_t shape[1] = {2};
  manypy_value* items[2] = {F32_TENSOR(x, 1, shape), manypy_value_new_int64(n)};
  return TUPLE_OF(2, items);
}

static void test_script_call_stops(void** state) {
  (void)state;
  manypy_script_module* loop = NULL;
  ASSERT_OK(manypy_script_load_file(ARCHIVE("loop_script.pt"), &loop));
  manypy_value* forever = loop_args(INT64_MAX);
  manypy_value* out = NULL;

  manypy_call_options* o = options_with(MANYPY_ANY_INTERPRETER, 200, NULL);
  double t0 = capi_now();
  manypy_status* s = EXPECT_CODE(manypy_script_call(loop, NULL, forever, NULL, o, &out),
                                 MANYPY_ERR_DEADLINE_EXCEEDED);
  double ms = (capi_now() - t0) * 1e3;
  print_message("TorchScript loop stopped after %.1f ms (timeout 200 ms)\n", ms);
  assert_true(ms >= 199 && ms <= 300);
  assert_null(out);
  manypy_status_free(s);
  manypy_call_options_free(o);

  manypy_cancel_token* token = manypy_cancel_token_new();
  o = options_with(MANYPY_ANY_INTERPRETER, 0, token);
  canceller c = {token, 200};
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, cancel_later, &c), 0);
  ASSERT_CODE(manypy_script_call(loop, NULL, forever, NULL, o, &out), MANYPY_ERR_CANCELLED);
  assert_int_equal(pthread_join(thread, NULL), 0);
  manypy_call_options_free(o);
  manypy_cancel_token_free(token);

  /* A bound that does not expire changes nothing. */
  manypy_value* three = loop_args(3);
  o = options_with(MANYPY_ANY_INTERPRETER, 10000, NULL);
  ASSERT_OK(manypy_script_call(loop, NULL, three, NULL, o, &out));
  float expected[2] = {3, 3};
  int64_t shape[1] = {2};
  ASSERT_F32_TENSOR(out, 1, shape, expected, 0, "loop(x, 3)");
  manypy_value_free(out);
  manypy_call_options_free(o);
  manypy_value_free(three);
  manypy_value_free(forever);
  manypy_script_free(loop);
}

#define CASES                                                                                      \
  cmocka_unit_test(test_python_loop_stops_at_its_deadline),                                        \
      cmocka_unit_test(test_one_line_loops_stop_at_their_deadline),                                \
      cmocka_unit_test(test_torch_loop_stops_between_operators),                                   \
      cmocka_unit_test(test_absolute_deadline), cmocka_unit_test(test_past_deadline_runs_nothing), \
      cmocka_unit_test(test_deadline_that_does_not_expire_changes_nothing),                        \
      cmocka_unit_test(test_getattr_of_a_looping_property_stops),                                  \
      cmocka_unit_test(test_sleep_finishes_first),                                                 \
      cmocka_unit_test(test_deadline_while_waiting_for_a_busy_interpreter),                        \
      cmocka_unit_test(test_cancel_from_another_thread), cmocka_unit_test(test_bad_arguments),     \
      cmocka_unit_test(test_catching_the_stop_retires_the_interpreter)

int main(void) {
  const struct CMUnitTest cases[] = {CASES};
  const struct CMUnitTest host[] = {cmocka_unit_test(test_script_call_stops)};
  int failed = cmocka_run_group_tests_name("direct", cases, setup_direct, teardown_pool);
  failed += cmocka_run_group_tests_name("handoff", cases, setup_handoff, teardown_pool);
  failed += cmocka_run_group_tests_name("script", host, NULL, NULL);
  return failed;
}
