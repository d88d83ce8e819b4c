/*
 * A retired interpreter and the calls around it (issue 36, classes 2 and
 * 3):
 * - calls that may go anywhere, queued on an interpreter when it is
 *   retired, move to the pool's other interpreters and succeed
 *   (synchronous and asynchronous, DIRECT and HANDOFF mode); calls pinned
 *   to it fail with MANYPY_ERR_INTERPRETER_BROKEN;
 * - a retired interpreter is replaced while the process has room, so that
 *   a pool of 1 (fixed, or that may grow) keeps serving;
 * - with no room left (argument "no_room", its own ctest entry: it fills
 *   the process), the pool says so in its stats, its metrics and the
 *   failing calls' messages, and replaces the interpreter once room is
 *   made.
 *
 * An interpreter is retired the way a model retires it: stuck.pt's
 * spin_catching swallows the stop, so the stop escalates after the pool's
 * grace period (100 ms) and the interpreter is retired. Each case makes its
 * own pool, since each retires an interpreter.
 *
 * The waits below are bounds that turn a lost call into a failure instead
 * of a hang, not performance figures.
 */
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include "capi_test_support.h"

#define QUEUED 8 /* the probe's count: 4 end up queued on each interpreter */

static capi_fixture g; /* stuck.pt: forward(x) = x * 2, sleep(s), spin_catching() */

/* A pool of `interpreters` (growing up to `max`, 0: no growth) in `mode`,
 * with stuck.pt's model. For cmocka setups: 0, or -1 after printing why. */
static int make_pool(size_t interpreters, size_t max, manypy_thread_mode mode) {
  memset(&g, 0, sizeof g);
  manypy_pool_options* options = manypy_pool_options_new();
  manypy_status* s = manypy_pool_options_set_interpreters(options, interpreters);
  if (s == NULL) s = manypy_pool_options_set_thread_mode(options, mode);
  if (s == NULL && max != 0) s = manypy_pool_options_set_max_interpreters(options, max);
  if (s == NULL) s = manypy_pool_create(options, &g.pool);
  manypy_pool_options_free(options);
  if (s == NULL) s = manypy_package_load_file(g.pool, capi_archive("stuck.pt"), &g.package);
  if (s == NULL) s = manypy_package_load_pickle(g.package, "model", "model.pkl", &g.model);
  if (s != NULL) {
    capi_print_status("setup", s, __FILE__, __LINE__);
    manypy_status_free(s);
    return -1;
  }
  return 0;
}

static int setup_direct(void** state) {
  (void)state;
  return make_pool(2, 0, MANYPY_THREAD_MODE_DIRECT);
}
static int setup_handoff(void** state) {
  (void)state;
  return make_pool(2, 0, MANYPY_THREAD_MODE_HANDOFF);
}
static int setup_one_direct(void** state) {
  (void)state;
  return make_pool(1, 0, MANYPY_THREAD_MODE_DIRECT);
}
static int setup_one_handoff(void** state) {
  (void)state;
  return make_pool(1, 0, MANYPY_THREAD_MODE_HANDOFF);
}
/* The probe's pool that may grow: 1 interpreter, at most 3. */
static int setup_one_of_three(void** state) {
  (void)state;
  return make_pool(1, 3, MANYPY_THREAD_MODE_DIRECT);
}
static int teardown(void** state) {
  (void)state;
  capi_fixture_teardown(&g);
  return 0;
}

static void pause_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000 * 1000};
  nanosleep(&t, NULL);
}

/* ---- one call's outcome --------------------------------------------------- */

typedef struct outcome {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int calls;             /* how many times it completed */
  manypy_value* result;  /* owned */
  manypy_status* status; /* owned */
} outcome;

static void outcome_init(outcome* o) {
  memset(o, 0, sizeof *o);
  pthread_mutex_init(&o->mu, NULL);
  pthread_cond_init(&o->cv, NULL);
}

static void outcome_set(void* user_data, manypy_value* result, manypy_status* status) {
  outcome* o = user_data;
  pthread_mutex_lock(&o->mu);
  o->calls++;
  o->result = result;
  o->status = status;
  pthread_cond_broadcast(&o->cv);
  pthread_mutex_unlock(&o->mu);
}

/* Waits for the outcome (at most 60 s: a lost call fails, it does not hang). */
static void outcome_wait(outcome* o) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 60;
  pthread_mutex_lock(&o->mu);
  while (o->calls == 0) {
    if (pthread_cond_timedwait(&o->cv, &o->mu, &until) != 0) break;
  }
  int calls = o->calls;
  pthread_mutex_unlock(&o->mu);
  assert_int_equal(calls, 1);
}

static void outcome_free(outcome* o) {
  manypy_value_free(o->result);
  manypy_status_free(o->status);
  pthread_mutex_destroy(&o->mu);
  pthread_cond_destroy(&o->cv);
}

/* ---- the calls ------------------------------------------------------------ */

/* (x,) with x = [k, k + 1, k + 2] (float32). */
static manypy_value* forward_args(int k) {
  float x[3] = {(float)k, (float)k + 1, (float)k + 2};
  int64_t shape[1] = {3};
  manypy_value* items[1] = {F32_TENSOR(x, 1, shape)};
  return TUPLE_OF(1, items);
}

/* forward(x) of forward_args(k) must be x * 2: the call succeeded. */
static void assert_forward(const outcome* o, int k) {
  if (o->status != NULL)
    capi_print_status("a call queued on the retired one", o->status, __FILE__, __LINE__);
  assert_null(o->status);
  float want[3] = {2.0f * k, 2.0f * k + 2, 2.0f * k + 4};
  int64_t shape[1] = {3};
  ASSERT_F32_TENSOR(o->result, 1, shape, want, 0, "forward(x) = x * 2");
}

/* Interpreter 1 sleeps `seconds`; interpreter 0 runs spin_catching with a
 * 200 ms timeout, which retires it after the grace period (about 300 ms).
 * Both asynchronous, so that the test thread goes on. */
static void occupy_both(outcome* sleeper, outcome* retiring, double seconds) {
  outcome_init(sleeper);
  outcome_init(retiring);
  manypy_value* items[1] = {manypy_value_new_double(seconds)};
  manypy_value* args = TUPLE_OF(1, items);
  manypy_call_options* on1 = CALL_OPTIONS(1, 0);
  ASSERT_OK(manypy_object_call_async(g.model, "sleep", args, NULL, on1, outcome_set, sleeper));
  manypy_call_options* on0 = CALL_OPTIONS(0, 200);
  ASSERT_OK(
      manypy_object_call_async(g.model, "spin_catching", NULL, NULL, on0, outcome_set, retiring));
  manypy_call_options_free(on0);
  manypy_call_options_free(on1);
  manypy_value_free(args);
  /* Let both start: the calls that follow wait behind them. */
  pause_ms(50);
}

/* The retiring call's outcome: its deadline, and the retirement. */
static void assert_retired(outcome* retiring) {
  outcome_wait(retiring);
  assert_null(retiring->result);
  assert_non_null(retiring->status);
  assert_int_equal(manypy_status_code(retiring->status), MANYPY_ERR_DEADLINE_EXCEEDED);
  ASSERT_CONTAINS(manypy_status_message(retiring->status), "retired");
}

typedef struct sync_call {
  pthread_t thread;
  manypy_value* args; /* made on the test thread (its helpers assert) */
  outcome out;
} sync_call;

static void* call_forward(void* arg) {
  sync_call* c = arg;
  manypy_value* result = NULL;
  manypy_status* s = manypy_object_call(g.model, NULL, c->args, NULL, NULL, &result);
  outcome_set(&c->out, result, s);
  return NULL;
}

/* The probe's case: with both interpreters busy, QUEUED calls that may go
 * anywhere wait, half on each; interpreter 0 is retired under them. Every
 * one succeeds, on interpreter 1 (before the fix, the half queued on
 * interpreter 0 failed with MANYPY_ERR_INTERPRETER_BROKEN). */
static void queued_calls_move(int synchronous) {
  outcome sleeper, retiring;
  occupy_both(&sleeper, &retiring, 1.0);
  sync_call calls[QUEUED];
  for (int k = 0; k < QUEUED; ++k) {
    calls[k].args = forward_args(k);
    outcome_init(&calls[k].out);
    if (synchronous) {
      assert_int_equal(pthread_create(&calls[k].thread, NULL, call_forward, &calls[k]), 0);
    } else {
      ASSERT_OK(manypy_object_call_async(g.model, NULL, calls[k].args, NULL, NULL, outcome_set,
                                         &calls[k].out));
    }
  }
  for (int k = 0; k < QUEUED; ++k) {
    if (synchronous) assert_int_equal(pthread_join(calls[k].thread, NULL), 0);
    outcome_wait(&calls[k].out);
    assert_forward(&calls[k].out, k);
    outcome_free(&calls[k].out);
    manypy_value_free(calls[k].args);
  }
  assert_retired(&retiring);
  outcome_wait(&sleeper);
  assert_null(sleeper.status);
  outcome_free(&retiring);
  outcome_free(&sleeper);
  assert_int_equal(manypy_pool_in_flight(g.pool), 0);
}

static void test_queued_async_calls_move_off_a_retired_interpreter(void** state) {
  (void)state;
  queued_calls_move(0);
}

static void test_queued_sync_calls_move_off_a_retired_interpreter(void** state) {
  (void)state;
  queued_calls_move(1);
}

/* A call pinned to the interpreter that retires does not move: it fails
 * with MANYPY_ERR_INTERPRETER_BROKEN, which says why. */
static void test_a_pinned_call_queued_there_fails_precisely(void** state) {
  (void)state;
  outcome sleeper, retiring, pinned;
  occupy_both(&sleeper, &retiring, 0.5);
  outcome_init(&pinned);
  manypy_value* args = forward_args(1);
  manypy_call_options* on0 = CALL_OPTIONS(0, 0);
  ASSERT_OK(manypy_object_call_async(g.model, NULL, args, NULL, on0, outcome_set, &pinned));
  outcome_wait(&pinned);
  assert_null(pinned.result);
  assert_non_null(pinned.status);
  assert_int_equal(manypy_status_code(pinned.status), MANYPY_ERR_INTERPRETER_BROKEN);
  ASSERT_STARTS_WITH(manypy_status_message(pinned.status), "interpreter 0: ");
  ASSERT_CONTAINS(manypy_status_message(pinned.status), "retired");
  assert_retired(&retiring);
  outcome_wait(&sleeper);
  manypy_call_options_free(on0);
  manypy_value_free(args);
  outcome_free(&pinned);
  outcome_free(&retiring);
  outcome_free(&sleeper);
}

/* ---- replacement ------------------------------------------------------------ */

static manypy_pool_stats stats_of(manypy_pool* pool) {
  manypy_pool_stats stats;
  memset(&stats, 0, sizeof stats);
  stats.struct_size = sizeof stats;
  ASSERT_OK(manypy_pool_get_stats(pool, &stats));
  return stats;
}

/* The pool's Prometheus text must hold `line`. */
static void assert_metrics(manypy_pool* pool, const char* line) {
  manypy_value* text = NULL;
  ASSERT_OK(manypy_pool_prometheus(pool, &text));
  const char* body = NULL;
  size_t length = 0;
  ASSERT_OK(manypy_value_get_string(text, &body, &length));
  ASSERT_CONTAINS(body, line);
  manypy_value_free(text);
}

/* Retires interpreter `interpreter` (or the one an unpinned call gets) with
 * a synchronous call that swallows its stop. */
static void retire_with_a_call(int32_t interpreter) {
  manypy_call_options* o = CALL_OPTIONS(interpreter, 200);
  manypy_value* out = NULL;
  manypy_status* s = EXPECT_CODE(manypy_object_call(g.model, "spin_catching", NULL, NULL, o, &out),
                                 MANYPY_ERR_DEADLINE_EXCEEDED);
  ASSERT_CONTAINS(manypy_status_message(s), "retired");
  manypy_status_free(s);
  manypy_call_options_free(o);
}

/* forward(x) on `interpreter` must succeed. */
static void assert_serves(int32_t interpreter) {
  manypy_value* args = forward_args(3);
  manypy_call_options* o = CALL_OPTIONS(interpreter, 0);
  outcome out;
  outcome_init(&out);
  manypy_value* result = NULL;
  manypy_status* s = manypy_object_call(g.model, NULL, args, NULL, o, &result);
  outcome_set(&out, result, s);
  assert_forward(&out, 3);
  outcome_free(&out);
  manypy_call_options_free(o);
  manypy_value_free(args);
}

/* A pool of 1 whose one interpreter is retired keeps serving: the
 * retirement starts a replacement in the same index before the retiring
 * call returns, and calls queue behind its start (before the fix, every
 * later call failed with MANYPY_ERR_INTERPRETER_BROKEN, for good). */
static void test_a_pool_of_one_keeps_serving_after_a_retirement(void** state) {
  (void)state;
  retire_with_a_call(MANYPY_ANY_INTERPRETER);
  manypy_pool_stats stats = stats_of(g.pool);
  assert_int_equal(stats.interpreters, 1);
  assert_int_equal(stats.replaced, 1);
  assert_int_equal(stats.no_room, 0);
  assert_int_equal(stats.lost, 0);
  assert_serves(MANYPY_ANY_INTERPRETER);
  /* The index names the replacement now. */
  ASSERT_OK(manypy_pool_check_interpreter(g.pool, 0));
  assert_serves(0);
  /* (A pool that may grow may have grown meanwhile: the calls waited for
   * the replacement's start.) */
  stats = stats_of(g.pool);
  assert_int_equal(stats.broken, 0);
  assert_true(stats.ready >= 1);
  assert_metrics(g.pool, "manypy_interpreters_replaced_total 1\n");
  assert_metrics(g.pool, "manypy_replacement_no_room 0\n");
  /* A caller built with 0.3's header: its struct ends before 0.4's
   * fields, and the library writes nothing past it. */
  manypy_pool_stats old;
  memset(&old, 0xab, sizeof old);
  old.struct_size = (uint32_t)offsetof(manypy_pool_stats, lost);
  ASSERT_OK(manypy_pool_get_stats(g.pool, &old));
  assert_in_range(old.interpreters, 1, 3); /* it may have grown (above) */
  const unsigned char* tail = (const unsigned char*)&old + offsetof(manypy_pool_stats, lost);
  for (size_t k = 0; k < sizeof old - offsetof(manypy_pool_stats, lost); ++k) {
    assert_int_equal(tail[k], 0xab);
  }
}

/* Each retirement is replaced, the replacement's too. */
static void test_each_retirement_is_replaced(void** state) {
  test_a_pool_of_one_keeps_serving_after_a_retirement(state);
  retire_with_a_call(0);
  assert_serves(MANYPY_ANY_INTERPRETER);
  assert_int_equal(stats_of(g.pool).replaced, 2);
  ASSERT_OK(manypy_pool_check_interpreter(g.pool, 0));
}

/* ---- no room ------------------------------------------------------------------ */

/* Fills the process: with every other interpreter leased to `filler`, the
 * retired one cannot be replaced. The pool says so, and the calls no
 * interpreter can serve say why; once the filler goes, the pool replaces
 * it within about a second. */
static void test_without_room_the_pool_says_so_then_replaces(void** state) {
  (void)state;
  const size_t max = manypy_max_interpreters();
  manypy_pool* filler = NULL;
  manypy_pool_options* options = manypy_pool_options_new();
  ASSERT_OK(manypy_pool_options_set_interpreters(options, max - 1));
  ASSERT_OK(manypy_pool_create(options, &filler));
  manypy_pool_options_free(options);

  retire_with_a_call(0);
  manypy_pool_stats stats = stats_of(g.pool);
  assert_int_equal(stats.no_room, 1);
  assert_int_equal(stats.replaced, 0);
  assert_int_equal(stats.broken, 1);
  manypy_value* args = forward_args(1);
  manypy_value* out = NULL;
  manypy_status* s = EXPECT_CODE(manypy_object_call(g.model, NULL, args, NULL, NULL, &out),
                                 MANYPY_ERR_INTERPRETER_BROKEN);
  ASSERT_STARTS_WITH(manypy_status_message(s), "no interpreter of this pool can serve");
  ASSERT_CONTAINS(manypy_status_message(s), "interpreter 0 was retired and could not be replaced");
  ASSERT_CONTAINS(manypy_status_message(s), "of this process's 15");
  manypy_status_free(s);
  assert_metrics(g.pool, "manypy_replacement_no_room 1\n");

  manypy_pool_destroy(filler); /* its interpreters go back to the process, idle */
  double until = capi_now() + 30;
  while (stats_of(g.pool).replaced == 0 && capi_now() < until) pause_ms(20);
  stats = stats_of(g.pool);
  assert_int_equal(stats.replaced, 1);
  assert_int_equal(stats.no_room, 0);
  assert_serves(MANYPY_ANY_INTERPRETER);
  manypy_value_free(args);
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "no_room") == 0) {
    const struct CMUnitTest no_room[] = {cmocka_unit_test_setup_teardown(
        test_without_room_the_pool_says_so_then_replaces, setup_one_direct, teardown)};
    return cmocka_run_group_tests_name("no_room", no_room, NULL, NULL);
  }
  const struct CMUnitTest direct[] = {
      cmocka_unit_test_setup_teardown(test_queued_async_calls_move_off_a_retired_interpreter,
                                      setup_direct, teardown),
      cmocka_unit_test_setup_teardown(test_queued_sync_calls_move_off_a_retired_interpreter,
                                      setup_direct, teardown),
      cmocka_unit_test_setup_teardown(test_each_retirement_is_replaced, setup_one_direct, teardown),
      cmocka_unit_test_setup_teardown(test_a_pool_of_one_keeps_serving_after_a_retirement,
                                      setup_one_of_three, teardown),
  };
  const struct CMUnitTest handoff[] = {
      cmocka_unit_test_setup_teardown(test_queued_async_calls_move_off_a_retired_interpreter,
                                      setup_handoff, teardown),
      cmocka_unit_test_setup_teardown(test_queued_sync_calls_move_off_a_retired_interpreter,
                                      setup_handoff, teardown),
      cmocka_unit_test_setup_teardown(test_a_pinned_call_queued_there_fails_precisely,
                                      setup_handoff, teardown),
      cmocka_unit_test_setup_teardown(test_a_pool_of_one_keeps_serving_after_a_retirement,
                                      setup_one_handoff, teardown),
  };
  int failed = cmocka_run_group_tests_name("direct", direct, NULL, NULL);
  failed += cmocka_run_group_tests_name("handoff", handoff, NULL, NULL);
  return failed;
}
