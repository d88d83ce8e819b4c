/*
 * Asynchronous calls (manypy_object_call_async, manypy_script_call_async):
 * results and errors reach the callback exactly once, on a thread of
 * manypy's; refused calls return their status and never call back; a call
 * stopped while it waits completes without running; callbacks may call
 * back into manypy; handles may be freed with calls in flight. Every case
 * runs in DIRECT and in HANDOFF mode (one pool of 2 interpreters each, one
 * after the other), then TorchScript on the host.
 *
 * The timing bounds below are generous limits that catch a hang or a call
 * that ran when it must not have, not performance figures.
 */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "capi_test_support.h"

static capi_fixture g_batching; /* batching.pt: forward(x) = x * 2 + 1 */
static manypy_package* g_stuck_package;
static manypy_object* g_stuck; /* stuck.pt: sleep(seconds), spin() */

static int setup(manypy_thread_mode mode) {
  if (capi_fixture_setup(&g_batching, 2, mode, "batching.pt") != 0) return -1;
  manypy_status* s =
      manypy_package_load_file(g_batching.pool, capi_archive("stuck.pt"), &g_stuck_package);
  if (s == NULL) s = manypy_package_load_pickle(g_stuck_package, "model", "model.pkl", &g_stuck);
  if (s != NULL) {
    capi_print_status("stuck.pt", s, __FILE__, __LINE__);
    manypy_status_free(s);
    return -1;
  }
  return 0;
}

static int setup_direct(void** state) {
  (void)state;
  return setup(MANYPY_THREAD_MODE_DIRECT);
}

static int setup_handoff(void** state) {
  (void)state;
  return setup(MANYPY_THREAD_MODE_HANDOFF);
}

static int teardown(void** state) {
  (void)state;
  manypy_object_free(g_stuck);
  manypy_package_free(g_stuck_package);
  g_stuck = NULL;
  g_stuck_package = NULL;
  capi_fixture_teardown(&g_batching);
  return 0;
}

/* ---- one call's completion, waited for by the test thread ---------------- */

typedef struct completion {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int calls;             /* how many times the callback ran */
  manypy_value* result;  /* owned */
  manypy_status* status; /* owned */
  pthread_t thread;      /* where it ran */
  double at;             /* capi_now() when it ran */
} completion;

static void completion_init(completion* c) {
  memset(c, 0, sizeof *c);
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cv, NULL);
}

static void completion_done(void* user_data, manypy_value* result, manypy_status* status) {
  completion* c = user_data;
  pthread_mutex_lock(&c->mu);
  c->calls++;
  c->result = result;
  c->status = status;
  c->thread = pthread_self();
  c->at = capi_now();
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

/* Waits (at most 60 s: a lost callback fails, it does not hang). */
static void completion_wait(completion* c) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 60;
  pthread_mutex_lock(&c->mu);
  while (c->calls == 0) {
    if (pthread_cond_timedwait(&c->cv, &c->mu, &until) != 0) break;
  }
  int calls = c->calls;
  pthread_mutex_unlock(&c->mu);
  assert_int_equal(calls, 1);
}

static void completion_free(completion* c) {
  manypy_value_free(c->result);
  manypy_status_free(c->status);
  pthread_mutex_destroy(&c->mu);
  pthread_cond_destroy(&c->cv);
}

/* (x,) with x = [value, value + 1] (float32, shape [1, 2]). */
static manypy_value* row_args(float value) {
  float x[2] = {value, value + 1};
  int64_t shape[2] = {1, 2};
  manypy_value* items[1] = {F32_TENSOR(x, 2, shape)};
  return TUPLE_OF(1, items);
}

/* batching.pt's forward of row_args(value). */
static void assert_forward_result(const manypy_value* result, float value) {
  float want[2] = {value * 2 + 1, (value + 1) * 2 + 1};
  int64_t shape[2] = {1, 2};
  ASSERT_F32_TENSOR(result, 2, shape, want, 0, "forward(x) = x * 2 + 1");
}

static manypy_value* seconds_args(double seconds) {
  manypy_value* items[1] = {manypy_value_new_double(seconds)};
  return TUPLE_OF(1, items);
}

/* ---- results -------------------------------------------------------------- */

#define MANY 200

static void test_results_reach_each_callback_once(void** state) {
  (void)state;
  static completion done[MANY];
  for (int k = 0; k < MANY; ++k) {
    completion_init(&done[k]);
    manypy_value* args = row_args((float)k);
    ASSERT_OK(manypy_object_call_async(g_batching.model, NULL, args, NULL, NULL, completion_done,
                                       &done[k]));
    /* The call copied what it needs: the caller's value may go at once. */
    manypy_value_free(args);
  }
  for (int k = 0; k < MANY; ++k) {
    completion_wait(&done[k]);
    assert_null(done[k].status);
    assert_forward_result(done[k].result, (float)k);
    assert_false(pthread_equal(done[k].thread, pthread_self()));
    completion_free(&done[k]);
  }
  /* Everything completed: nothing in flight, nothing queued. */
  assert_int_equal(manypy_pool_in_flight(g_batching.pool), 0);
  assert_int_equal(manypy_pool_queued(g_batching.pool), 0);
}

static void test_python_error_reaches_the_callback(void** state) {
  (void)state;
  completion done;
  completion_init(&done);
  manypy_value* args = row_args(1);
  ASSERT_OK(
      manypy_object_call_async(g_batching.model, "fail", args, NULL, NULL, completion_done, &done));
  completion_wait(&done);
  assert_null(done.result);
  assert_non_null(done.status);
  assert_int_equal(manypy_status_code(done.status), MANYPY_ERR_PYTHON);
  assert_string_equal(manypy_status_python_type(done.status), "ValueError");
  ASSERT_CONTAINS(manypy_status_message(done.status), "refused a batch of 1 rows");
  ASSERT_CONTAINS(manypy_status_traceback(done.status), "fail");
  completion_free(&done);
  manypy_value_free(args);
}

/* ---- refused at submission: a status, and no callback ever --------------- */

static void test_refused_calls_never_call_back(void** state) {
  (void)state;
  completion done;
  completion_init(&done);
  manypy_value* args = row_args(1);
  capi_check_invalid_argument(
      manypy_object_call_async(NULL, NULL, args, NULL, NULL, completion_done, &done), "null object",
      "manypy_object_call_async", "object", __FILE__, __LINE__);
  capi_check_invalid_argument(
      manypy_object_call_async(g_batching.model, NULL, args, NULL, NULL, NULL, &done),
      "null callback", "manypy_object_call_async", "done", __FILE__, __LINE__);
  manypy_value* not_a_list = manypy_value_new_int64(3);
  manypy_status* s = EXPECT_CODE(manypy_object_call_async(g_batching.model, NULL, not_a_list, NULL,
                                                          NULL, completion_done, &done),
                                 MANYPY_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(manypy_status_message(s), "args must be a list or tuple");
  manypy_status_free(s);
  manypy_value_free(not_a_list);

  manypy_call_options* past = manypy_call_options_new();
  ASSERT_OK(manypy_call_options_set_deadline(past, manypy_monotonic_ns() - 1000));
  manypy_status_free(EXPECT_CODE(
      manypy_object_call_async(g_batching.model, NULL, args, NULL, past, completion_done, &done),
      MANYPY_ERR_DEADLINE_EXCEEDED));
  manypy_cancel_token* token = manypy_cancel_token_new();
  manypy_cancel_token_cancel(token);
  manypy_call_options* cancelled = manypy_call_options_new();
  ASSERT_OK(manypy_call_options_set_cancel_token(cancelled, token));
  manypy_status_free(EXPECT_CODE(manypy_object_call_async(g_batching.model, NULL, args, NULL,
                                                          cancelled, completion_done, &done),
                                 MANYPY_ERR_CANCELLED));
  manypy_call_options* pinned = CALL_OPTIONS(7, 0);
  manypy_status_free(EXPECT_CODE(
      manypy_object_call_async(g_batching.model, NULL, args, NULL, pinned, completion_done, &done),
      MANYPY_ERR_OUT_OF_RANGE));
  const char bad_utf8[] = {(char)0xc3, (char)0x28, 0};
  manypy_status_free(EXPECT_CODE(manypy_object_call_async(g_batching.model, bad_utf8, args, NULL,
                                                          NULL, completion_done, &done),
                                 MANYPY_ERR_INVALID_ARGUMENT));
  /* Long enough for a callback that was wrongly scheduled to have run. */
  struct timespec pause = {0, 50 * 1000 * 1000};
  nanosleep(&pause, NULL);
  assert_int_equal(done.calls, 0);
  assert_int_equal(manypy_pool_in_flight(g_batching.pool), 0);
  manypy_call_options_free(past);
  manypy_call_options_free(cancelled);
  manypy_call_options_free(pinned);
  manypy_cancel_token_free(token);
  manypy_value_free(args);
  completion_free(&done);
}

/* ---- stops ------------------------------------------------------------------ */

/* Interpreter 0 sleeps `seconds` in an accepted asynchronous call. */
static void occupy(completion* sleeper, double seconds) {
  completion_init(sleeper);
  manypy_value* args = seconds_args(seconds);
  manypy_call_options* on0 = CALL_OPTIONS(0, 0);
  ASSERT_OK(manypy_object_call_async(g_stuck, "sleep", args, NULL, on0, completion_done, sleeper));
  manypy_call_options_free(on0);
  manypy_value_free(args);
  /* Let it start: a call queued behind it then waits. */
  struct timespec pause = {0, 50 * 1000 * 1000};
  nanosleep(&pause, NULL);
}

static void test_deadline_while_queued_completes_without_running(void** state) {
  (void)state;
  completion sleeper, queued;
  occupy(&sleeper, 1.0);
  completion_init(&queued);
  manypy_value* args = row_args(1);
  manypy_call_options* o = CALL_OPTIONS(0, 100);
  double t0 = capi_now();
  ASSERT_OK(
      manypy_object_call_async(g_batching.model, NULL, args, NULL, o, completion_done, &queued));
  completion_wait(&queued);
  assert_int_equal(manypy_status_code(queued.status), MANYPY_ERR_DEADLINE_EXCEEDED);
  ASSERT_CONTAINS(manypy_status_message(queued.status), "while waiting for the interpreter");
  /* It completed while interpreter 0 still slept: it cannot have run. */
  double waited = queued.at - t0;
  print_message("queued call with a 100 ms timeout completed after %.0f ms\n", waited * 1e3);
  assert_true(waited < 0.8);
  assert_true(waited >= 0.09);
  completion_wait(&sleeper);
  assert_null(sleeper.status);
  completion_free(&sleeper);
  completion_free(&queued);
  manypy_call_options_free(o);
  manypy_value_free(args);
}

static void test_cancel_while_queued_and_while_running(void** state) {
  (void)state;
  completion sleeper, queued, running;
  occupy(&sleeper, 1.0);
  completion_init(&queued);
  completion_init(&running);
  manypy_cancel_token* token = manypy_cancel_token_new();
  manypy_call_options* on0 = CALL_OPTIONS(0, 0);
  ASSERT_OK(manypy_call_options_set_cancel_token(on0, token));
  manypy_value* args = row_args(1);
  ASSERT_OK(
      manypy_object_call_async(g_batching.model, NULL, args, NULL, on0, completion_done, &queued));
  manypy_call_options* on1 = CALL_OPTIONS(1, 0);
  ASSERT_OK(manypy_call_options_set_cancel_token(on1, token));
  ASSERT_OK(manypy_object_call_async(g_stuck, "spin", NULL, NULL, on1, completion_done, &running));
  struct timespec pause = {0, 100 * 1000 * 1000};
  nanosleep(&pause, NULL);
  double t0 = capi_now();
  manypy_cancel_token_cancel(token);
  completion_wait(&queued);
  completion_wait(&running);
  assert_int_equal(manypy_status_code(queued.status), MANYPY_ERR_CANCELLED);
  assert_true(queued.at - t0 < 0.5); /* before the sleeper ended: unrun */
  assert_int_equal(manypy_status_code(running.status), MANYPY_ERR_CANCELLED);
  assert_string_equal(manypy_status_python_type(running.status), "manypy.Cancelled");
  completion_wait(&sleeper);
  assert_null(sleeper.status);
  completion_free(&sleeper);
  completion_free(&queued);
  completion_free(&running);
  manypy_call_options_free(on0);
  manypy_call_options_free(on1);
  manypy_cancel_token_free(token);
  manypy_value_free(args);
}

/* ---- callbacks that call back into manypy ---------------------------------- */

typedef struct chain {
  manypy_object* model;
  int remaining;   /* calls still to submit from callbacks */
  int ok;          /* results checked right */
  int sync_ok;     /* synchronous calls made from callbacks that succeeded */
  completion done; /* signalled by the last link */
} chain;

static void chain_next(void* user_data, manypy_value* result, manypy_status* status) {
  chain* c = user_data;
  if (status == NULL) c->ok++;
  manypy_value_free(result);
  manypy_status_free(status);
  /* A synchronous call from a callback runs on this thread. */
  manypy_value* args = manypy_value_new_tuple();
  manypy_value* x = NULL;
  float one[2] = {1, 2};
  int64_t shape[2] = {1, 2};
  manypy_status* s = manypy_value_new_tensor_from_buffer(
      one, sizeof one, (DLDataType){kDLFloat, 32, 1}, 2, shape, NULL, 1, NULL, NULL, &x);
  if (s == NULL) s = manypy_value_append(args, x);
  manypy_value* out = NULL;
  if (s == NULL) s = manypy_object_call(c->model, NULL, args, NULL, NULL, &out);
  if (s == NULL) c->sync_ok++;
  manypy_status_free(s);
  manypy_value_free(out);
  if (c->remaining-- > 0) {
    s = manypy_object_call_async(c->model, NULL, args, NULL, NULL, chain_next, c);
    if (s != NULL) {
      manypy_status_free(s);
      completion_done(&c->done, NULL, manypy_status_new(MANYPY_ERR_INTERNAL, "chain refused"));
    }
  } else {
    /* The last link frees the object it was called on. */
    manypy_object_free(c->model);
    c->model = NULL;
    completion_done(&c->done, NULL, NULL);
  }
  manypy_value_free(args);
}

static void test_callbacks_call_back_into_manypy(void** state) {
  (void)state;
  chain c = {0};
  completion_init(&c.done);
  c.model = LOAD_MODEL(g_batching.package);
  c.remaining = 20;
  manypy_value* args = row_args(1);
  ASSERT_OK(manypy_object_call_async(c.model, NULL, args, NULL, NULL, chain_next, &c));
  completion_wait(&c.done);
  assert_null(c.done.status);
  assert_int_equal(c.ok, 21);
  assert_int_equal(c.sync_ok, 21);
  assert_null(c.model);
  completion_free(&c.done);
  manypy_value_free(args);
}

/* ---- handles freed with calls in flight ------------------------------------ */

typedef struct counter {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done, ok, failed;
} counter;

static void count_done(void* user_data, manypy_value* result, manypy_status* status) {
  counter* c = user_data;
  pthread_mutex_lock(&c->mu);
  c->done++;
  if (status == NULL) {
    c->ok++;
  } else {
    c->failed++;
  }
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
  manypy_value_free(result);
  manypy_status_free(status);
}

static void counter_wait(counter* c, int n) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 120;
  pthread_mutex_lock(&c->mu);
  while (c->done < n) {
    if (pthread_cond_timedwait(&c->cv, &c->mu, &until) != 0) break;
  }
  pthread_mutex_unlock(&c->mu);
  assert_int_equal(c->done, n);
}

#define IN_FLIGHT 3000

static void test_handles_freed_with_calls_in_flight(void** state) {
  (void)state;
  /* A pool of its own, destroyed, with its package and object, right after
   * thousands of calls were queued: each completes, and then the pool's
   * interpreters go back to the process. */
  manypy_pool* pool = MAKE_POOL(1, MANYPY_THREAD_MODE_DIRECT);
  manypy_package* package = LOAD_PACKAGE(pool, "batching.pt");
  manypy_object* model = LOAD_MODEL(package);
  counter c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};
  manypy_value* args = row_args(3);
  for (int k = 0; k < IN_FLIGHT; ++k) {
    ASSERT_OK(manypy_object_call_async(model, NULL, args, NULL, NULL, count_done, &c));
  }
  manypy_pool_destroy(pool);
  manypy_package_free(package);
  manypy_object_free(model);
  counter_wait(&c, IN_FLIGHT);
  assert_int_equal(c.ok, IN_FLIGHT);
  manypy_value_free(args);
  /* The interpreter went back: a new pool of 1 can lease it again. */
  manypy_pool* again = MAKE_POOL(1, MANYPY_THREAD_MODE_DIRECT);
  assert_int_equal(capi_eval_int64(again, 0, "6 * 7", __FILE__, __LINE__), 42);
  manypy_pool_destroy(again);
}

/* ---- admission control ------------------------------------------------------- */

static void test_queue_limit_refuses_with_overloaded(void** state) {
  (void)state;
  manypy_pool_options* options = manypy_pool_options_new();
  ASSERT_OK(manypy_pool_options_set_queue_limit(options, 2));
  manypy_pool* pool = NULL;
  ASSERT_OK(manypy_pool_create(options, &pool));
  manypy_pool_options_free(options);
  manypy_package* package = LOAD_PACKAGE(pool, "stuck.pt");
  manypy_object* stuck = LOAD_MODEL(package);
  counter c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};
  manypy_value* sleep_args = seconds_args(0.5);
  /* One runs, two wait: the limit. */
  for (int k = 0; k < 3; ++k) {
    ASSERT_OK(manypy_object_call_async(stuck, "sleep", sleep_args, NULL, NULL, count_done, &c));
  }
  assert_int_equal(manypy_pool_in_flight(pool), 3);
  assert_int_equal(manypy_pool_queued(pool), 2);
  double t0 = capi_now();
  manypy_status* s =
      EXPECT_CODE(manypy_object_call_async(stuck, "sleep", sleep_args, NULL, NULL, count_done, &c),
                  MANYPY_ERR_OVERLOADED);
  double refused_us = (capi_now() - t0) * 1e6;
  ASSERT_CONTAINS(manypy_status_message(s), "overloaded");
  manypy_status_free(s);
  manypy_value* out = NULL;
  manypy_status_free(EXPECT_CODE(manypy_object_call(stuck, "sleep", sleep_args, NULL, NULL, &out),
                                 MANYPY_ERR_OVERLOADED));
  manypy_status_free(
      EXPECT_CODE(manypy_pool_exec(pool, MANYPY_ANY_INTERPRETER, "pass"), MANYPY_ERR_OVERLOADED));
  print_message("refused in %.1f us\n", refused_us);
  counter_wait(&c, 3);
  assert_int_equal(c.ok, 3);
  assert_int_equal(manypy_pool_queued(pool), 0);
  assert_int_equal(manypy_pool_in_flight(pool), 0);
  /* Below the limit again: accepted. */
  ASSERT_OK(manypy_pool_exec(pool, MANYPY_ANY_INTERPRETER, "pass"));
  assert_int_equal(manypy_pool_queued(NULL), 0);
  assert_int_equal(manypy_pool_in_flight(NULL), 0);
  capi_check_invalid_argument(manypy_pool_options_set_queue_limit(NULL, 1), "null options",
                              "manypy_pool_options_set_queue_limit", "options", __FILE__, __LINE__);
  manypy_value_free(sleep_args);
  manypy_object_free(stuck);
  manypy_package_free(package);
  manypy_pool_destroy(pool);
}

/* ---- TorchScript on the host --------------------------------------------------- */

static void test_script_calls_complete_on_host_workers(void** state) {
  (void)state;
  manypy_script_module* loop = NULL;
  ASSERT_OK(manypy_script_load_file(capi_archive("loop_script.pt"), &loop));
  static completion done[32];
  float zeros[2] = {0, 0};
  int64_t shape[1] = {2};
  for (int k = 0; k < 32; ++k) {
    completion_init(&done[k]);
    manypy_value* items[2] = {F32_TENSOR(zeros, 1, shape), manypy_value_new_int64(k)};
    manypy_value* args = TUPLE_OF(2, items);
    ASSERT_OK(manypy_script_call_async(loop, NULL, args, NULL, NULL, completion_done, &done[k]));
    manypy_value_free(args);
  }
  /* Calls in flight hold the module. */
  manypy_script_free(loop);
  for (int k = 0; k < 32; ++k) {
    completion_wait(&done[k]);
    float want[2] = {(float)k, (float)k};
    ASSERT_F32_TENSOR(done[k].result, 1, shape, want, 0, "loop(x, n) adds 1 n times");
    assert_false(pthread_equal(done[k].thread, pthread_self()));
    completion_free(&done[k]);
  }
  ASSERT_OK(manypy_script_load_file(capi_archive("loop_script.pt"), &loop));
  completion never;
  completion_init(&never);
  manypy_status_free(
      EXPECT_CODE(manypy_script_call_async(loop, "nope", NULL, NULL, NULL, completion_done, &never),
                  MANYPY_ERR_NO_SUCH_NAME));
  capi_check_invalid_argument(manypy_script_call_async(loop, NULL, NULL, NULL, NULL, NULL, &never),
                              "null callback", "manypy_script_call_async", "done", __FILE__,
                              __LINE__);
  assert_int_equal(never.calls, 0);
  completion_free(&never);
  manypy_script_free(loop);
}

int main(void) {
  const struct CMUnitTest per_mode[] = {
      cmocka_unit_test(test_results_reach_each_callback_once),
      cmocka_unit_test(test_python_error_reaches_the_callback),
      cmocka_unit_test(test_refused_calls_never_call_back),
      cmocka_unit_test(test_deadline_while_queued_completes_without_running),
      cmocka_unit_test(test_cancel_while_queued_and_while_running),
      cmocka_unit_test(test_callbacks_call_back_into_manypy),
  };
  const struct CMUnitTest alone[] = {
      cmocka_unit_test(test_handles_freed_with_calls_in_flight),
      cmocka_unit_test(test_queue_limit_refuses_with_overloaded),
      cmocka_unit_test(test_script_calls_complete_on_host_workers),
  };
  int failed = cmocka_run_group_tests_name("direct", per_mode, setup_direct, teardown);
  failed += cmocka_run_group_tests_name("handoff", per_mode, setup_handoff, teardown);
  failed += cmocka_run_group_tests_name("alone", alone, NULL, NULL);
  return failed;
}
