/*
 * Stops that model code cannot defeat (issue 36; docs/threads.md,
 * "Deadlines and cancellation"; docs/hardening.md, "Stops model code cannot
 * defeat"). Each form of samples/models/hostile.py's "stop evasion" block
 * (Hostile.evade_stop) runs until manypy stops it: removing the stop's
 * trace function in a loop, swallowing every stop, spinning inside a
 * profile function or a sys.monitoring callback (Python 3.11: its own trace
 * function), where CPython sends no trace events, and a switch interval of
 * 1000 s. Each is stopped by a 300 ms deadline (a synchronous call) and by
 * a cancel 300 ms after submission (an asynchronous call), and must end
 * with the stop's status: before issue 36 most ran for good.
 *
 * The bound checked is a liveness bound (10 s: a call that was not ended
 * would run for ever); the times are printed, against the deadline plus
 * the grace period (100 ms), for the reader. A form that swallows the stop
 * is ended by escalation, which retires its interpreter, so every case has
 * a pool of its own, of 1 interpreter; the switch interval is clamped, so
 * that form's stop comes at once and the interpreter serves on.
 *
 * And a stop is quiet: raised in a __del__ (or a weakref callback, or
 * importlib's), where Python cannot propagate it, it printed "Exception
 * ignored in: ... manypy.DeadlineExceeded" and a traceback to the host's
 * stderr. A child process, forked before this one starts any interpreter,
 * runs such a call with its fd 2 in a file, which must hold none of it.
 *
 * One thread mode per run, its name the program's argument (DIRECT, the
 * default, or HANDOFF): a process has room for 15 interpreters, and each
 * mode retires 8. ctest runs both (capi_stop_evasion, _handoff).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "capi_test_support.h"

static manypy_thread_mode g_mode = MANYPY_THREAD_MODE_DIRECT;

/* How long a stopped call may take before the test says it was not
 * stopped: far beyond any stop, far short of the ctest timeout. */
static const double kNotStoppedS = 10.0;
static const int kStopAfterMs = 300;

/* ---- one call, watched from here ------------------------------------------ */

typedef struct {
  manypy_object* model;
  const char* form;
  manypy_call_options* options;
  manypy_code code;
  char message[512];
  double began, ended; /* capi_now() */
  volatile int done;
} watched_call;

static void record(watched_call* c, manypy_value* result, manypy_status* status) {
  c->code = manypy_status_code(status);
  snprintf(c->message, sizeof c->message, "%s", status ? manypy_status_message(status) : "");
  manypy_status_free(status);
  manypy_value_free(result);
  c->ended = capi_now();
  __atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
}

static void* run_sync(void* arg) {
  watched_call* c = arg;
  manypy_value* args = manypy_value_new_tuple();
  capi_assert_ok(manypy_value_append(args, STRING(c->form)), "append", __FILE__, __LINE__);
  manypy_value* out = NULL;
  manypy_status* s = manypy_object_call(c->model, "evade_stop", args, NULL, c->options, &out);
  manypy_value_free(args);
  record(c, out, s);
  return NULL;
}

static void on_done(void* user_data, manypy_value* result, manypy_status* status) {
  record(user_data, result, status);
}

/* Waits for `c` (kNotStoppedS at most) and checks its status. */
static void expect_stopped(watched_call* c, manypy_code code, const char* how) {
  while (!__atomic_load_n(&c->done, __ATOMIC_ACQUIRE) && capi_now() - c->began < kNotStoppedS) {
    usleep(1000);
  }
  if (!__atomic_load_n(&c->done, __ATOMIC_ACQUIRE)) {
    fail_msg("%s (%s mode, %s) was not stopped: still running after %.0f s", c->form,
             g_mode == MANYPY_THREAD_MODE_DIRECT ? "DIRECT" : "HANDOFF", how, kNotStoppedS);
  }
  print_message("%-15s %-22s ended after %4.0f ms (stop at %d ms, grace 100 ms): %s\n", c->form,
                how, (c->ended - c->began) * 1e3, kStopAfterMs, c->message);
  if (c->code != code) {
    fail_msg("%s (%s): code %d, expected %d: %s", c->form, how, (int)c->code, (int)code,
             c->message);
  }
}

/* A pool of 1 interpreter in g_mode with hostile.pt's model. */
static void open_pool(capi_fixture* f) {
  if (capi_fixture_setup(f, 1, g_mode, "hostile.pt") != 0) fail_msg("no pool");
}

/* A form that swallows the stop ends by escalation, which retires the
 * interpreter, and the pool replaces it in the same index before the call
 * returns (docs/serving.md, "Retired interpreters"); one that does not
 * leaves it serving, not replaced. Either way index 0 serves. */
static void check_interpreter(capi_fixture* f, int escalates) {
  manypy_pool_stats stats = {.struct_size = sizeof stats};
  ASSERT_OK(manypy_pool_get_stats(f->pool, &stats));
  assert_int_equal(stats.replaced, escalates ? 1 : 0);
  ASSERT_OK(manypy_pool_check_interpreter(f->pool, 0));
}

/* `form` under a synchronous call with a 300 ms deadline (on a thread of
 * its own, so that a call that is never stopped fails the test). */
static void deadline_ends(const char* form, int escalates) {
  capi_fixture f;
  open_pool(&f);
  watched_call c = {f.model, form, CALL_OPTIONS(0, kStopAfterMs), MANYPY_OK, "", 0, 0, 0};
  c.began = capi_now();
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, run_sync, &c), 0);
  expect_stopped(&c, MANYPY_ERR_DEADLINE_EXCEEDED, "300 ms deadline, sync");
  assert_int_equal(pthread_join(thread, NULL), 0);
  manypy_call_options_free(c.options);
  check_interpreter(&f, escalates);
  capi_fixture_teardown(&f);
}

/* `form` under an asynchronous call whose token is cancelled 300 ms after
 * it was submitted. */
static void cancel_ends(const char* form, int escalates) {
  capi_fixture f;
  open_pool(&f);
  manypy_cancel_token* token = manypy_cancel_token_new();
  assert_non_null(token);
  watched_call c = {f.model, form, CALL_OPTIONS(0, 0), MANYPY_OK, "", 0, 0, 0};
  ASSERT_OK(manypy_call_options_set_cancel_token(c.options, token));
  manypy_value* args = manypy_value_new_tuple();
  ASSERT_OK(manypy_value_append(args, STRING(form)));
  c.began = capi_now();
  ASSERT_OK(manypy_object_call_async(f.model, "evade_stop", args, NULL, c.options, on_done, &c));
  manypy_value_free(args);
  usleep(kStopAfterMs * 1000);
  manypy_cancel_token_cancel(token);
  expect_stopped(&c, MANYPY_ERR_CANCELLED, "cancel at 300 ms, async");
  manypy_call_options_free(c.options);
  manypy_cancel_token_free(token);
  check_interpreter(&f, escalates);
  capi_fixture_teardown(&f);
}

/* ---- quiet stops ------------------------------------------------------------- */

/* In the child: a pool, and a call stopped by a 300 ms deadline while it
 * spends its time in __del__. The exit code says what failed. */
static int stop_in_finalizers(void) {
  capi_fixture f;
  if (capi_fixture_setup(&f, 1, g_mode, "hostile.pt") != 0) return 3;
  manypy_value* args = manypy_value_new_tuple();
  manypy_status* s = manypy_value_append(args, STRING("finalizers"));
  manypy_call_options* options = manypy_call_options_new();
  if (s == NULL) s = manypy_call_options_set_timeout(options, kStopAfterMs * 1000000LL);
  if (s != NULL) return 4;
  manypy_value* out = NULL;
  s = manypy_object_call(f.model, "evade_stop", args, NULL, options, &out);
  const int code = manypy_status_code(s);
  manypy_status_free(s);
  manypy_value_free(out);
  manypy_value_free(args);
  manypy_call_options_free(options);
  capi_fixture_teardown(&f);
  return code == MANYPY_ERR_DEADLINE_EXCEEDED ? 0 : 5;
}

static void test_a_stop_prints_nothing_to_stderr(void** state) {
  (void)state;
  char path[256];
  snprintf(path, sizeof path, "%s/stderr.txt", TEMP_DIR("quiet"));
  fflush(NULL);
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || dup2(fd, 2) < 0) _exit(2);
    close(fd);
    _exit(stop_in_finalizers());
  }
  int status = 0;
  assert_int_equal(waitpid(child, &status, 0), child);
  size_t size = 0;
  char* text = READ_WHOLE_FILE(path, &size);
  char* printed = malloc(size + 1);
  memcpy(printed, text, size);
  printed[size] = '\0';
  free(text);
  print_message("the child's stderr: %zu bytes\n", size);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fail_msg("the child failed (status %d): %s", status, printed);
  }
  if (strstr(printed, "DeadlineExceeded") != NULL || strstr(printed, "Exception ignored") != NULL) {
    fail_msg("a stop printed to stderr:\n%s", printed);
  }
  free(printed);
}

/* ---- the forms ---------------------------------------------------------------- */

static void test_settrace_none_in_a_loop(void** state) {
  (void)state;
  deadline_ends("settrace_none", 1);
  cancel_ends("settrace_none", 1);
}

static void test_bare_except_around_a_loop(void** state) {
  (void)state;
  deadline_ends("bare_except", 1);
  cancel_ends("bare_except", 1);
}

static void test_spin_in_a_profile_function(void** state) {
  (void)state;
  deadline_ends("profile", 1);
  cancel_ends("profile", 1);
}

static void test_spin_in_a_monitoring_callback(void** state) {
  (void)state;
  deadline_ends("monitoring", 1);
  cancel_ends("monitoring", 1);
}

/* sys.setswitchinterval(seconds) in the model: what it became. */
static double set_switch_interval(manypy_object* model, double seconds) {
  manypy_value* args = manypy_value_new_tuple();
  ASSERT_OK(manypy_value_append(args, manypy_value_new_double(seconds)));
  manypy_value* out = NULL;
  ASSERT_OK(manypy_object_call(model, "set_switch_interval", args, NULL, NULL, &out));
  manypy_value_free(args);
  double interval = 0;
  ASSERT_OK(manypy_value_get_double(out, &interval));
  manypy_value_free(out);
  return interval;
}

/* The switch interval is clamped to 10 ms (runtime.py, MAX_SWITCH_INTERVAL),
 * so the stop takes the GIL in time, is raised once in the loop, and ends
 * it cleanly: the interpreter serves on. Shorter intervals are set as
 * asked. */
static void test_long_switch_interval(void** state) {
  (void)state;
  deadline_ends("switch_interval", 0);
  cancel_ends("switch_interval", 0);
  capi_fixture f;
  open_pool(&f);
  double clamped = set_switch_interval(f.model, 1000.0);
  assert_true(clamped > 0.0099999 && clamped < 0.0100001);
  double asked = set_switch_interval(f.model, 0.001);
  assert_true(asked > 0.0009999 && asked < 0.0010001);
  capi_fixture_teardown(&f);
}

/* ---- lost interpreters -------------------------------------------------------- */

static manypy_pool_stats stats_of(manypy_pool* pool) {
  manypy_pool_stats s;
  memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  ASSERT_OK(manypy_pool_get_stats(pool, &s));
  return s;
}

/* Waits (kNotStoppedS at most) until `pool`'s stats count `lost` lost
 * interpreters; returns the stats then. */
static manypy_pool_stats wait_for_lost(manypy_pool* pool, size_t lost, double since) {
  manypy_pool_stats s = stats_of(pool);
  while (s.lost != lost && capi_now() - since < kNotStoppedS) {
    usleep(5000);
    s = stats_of(pool);
  }
  assert_int_equal(s.lost, lost);
  return s;
}

/* C code that holds the GIL for 3 s cannot be stopped: the watchdog's
 * interrupter waits for the GIL. Twice the grace period after the deadline
 * the interpreter is lost: the stats, the Prometheus text and
 * manypy_pool_check_interpreter say so, without waiting for that GIL; the
 * asynchronous caller gets the stop's status while the call still runs.
 * When the call returns, the interpreter serves again. */
static void test_a_call_holding_the_gil_makes_its_interpreter_lost(void** state) {
  (void)state;
  capi_fixture f;
  open_pool(&f);
  watched_call c = {f.model, "hold_gil", CALL_OPTIONS(0, kStopAfterMs), MANYPY_OK, "", 0, 0, 0};
  manypy_value* args = manypy_value_new_tuple();
  ASSERT_OK(manypy_value_append(args, STRING("hold_gil")));
  c.began = capi_now();
  ASSERT_OK(manypy_object_call_async(f.model, "evade_stop", args, NULL, c.options, on_done, &c));
  manypy_value_free(args);
  manypy_pool_stats s = wait_for_lost(f.pool, 1, c.began);
  print_message("lost after %.0f ms (deadline 300 ms, grace 100 ms)\n",
                (capi_now() - c.began) * 1e3);
  assert_int_equal(s.starting + s.ready + s.busy + s.broken + s.lost, 1);
  manypy_status* broken = manypy_pool_check_interpreter(f.pool, 0);
  assert_int_equal(manypy_status_code(broken), MANYPY_ERR_INTERPRETER_BROKEN);
  ASSERT_CONTAINS(manypy_status_message(broken), "it is lost: a call stopped by its deadline");
  manypy_status_free(broken);
  manypy_value* text = NULL;
  ASSERT_OK(manypy_pool_prometheus(f.pool, &text));
  const char* body = NULL;
  ASSERT_OK(manypy_value_get_string(text, &body, NULL));
  ASSERT_CONTAINS(body, "manypy_interpreters{state=\"lost\"} 1\n");
  manypy_value_free(text);
  /* Told while the call still holds the GIL (for 3 s from its start). */
  expect_stopped(&c, MANYPY_ERR_DEADLINE_EXCEEDED, "300 ms deadline, async");
  ASSERT_CONTAINS(c.message, "the call did not end");
  assert_int_equal(stats_of(f.pool).lost, 1);
  manypy_call_options_free(c.options);
  wait_for_lost(f.pool, 0, c.began);
  assert_null(manypy_pool_check_interpreter(f.pool, 0));

  /* Synchronous: in HANDOFF mode the caller is told as the asynchronous
   * one was; in DIRECT mode its thread is the one running the call, and
   * returns when the call does (docs/threads.md, "Lost interpreters"). */
  watched_call d = {f.model, "hold_gil", CALL_OPTIONS(0, kStopAfterMs), MANYPY_OK, "", 0, 0, 0};
  d.began = capi_now();
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, run_sync, &d), 0);
  expect_stopped(&d, MANYPY_ERR_DEADLINE_EXCEEDED, "300 ms deadline, sync");
  if (g_mode == MANYPY_THREAD_MODE_HANDOFF) {
    ASSERT_CONTAINS(d.message, "the call did not end");
    assert_int_equal(stats_of(f.pool).lost, 1);
  } else {
    assert_true(d.ended - d.began > 2.5); /* it held the GIL for 3 s */
    assert_int_equal(stats_of(f.pool).lost, 0);
  }
  assert_int_equal(pthread_join(thread, NULL), 0);
  manypy_call_options_free(d.options);
  wait_for_lost(f.pool, 0, d.began);
  assert_null(manypy_pool_check_interpreter(f.pool, 0));
  capi_fixture_teardown(&f);
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "HANDOFF") == 0) {
    g_mode = MANYPY_THREAD_MODE_HANDOFF;
  } else if (argc > 1 && strcmp(argv[1], "DIRECT") != 0) {
    fprintf(stderr, "usage: %s [DIRECT|HANDOFF [test name pattern]]\n", argv[0]);
    return 2;
  }
  if (argc > 2) cmocka_set_test_filter(argv[2]);
  const struct CMUnitTest tests[] = {
      /* First: it forks, before this process starts an interpreter. */
      cmocka_unit_test(test_a_stop_prints_nothing_to_stderr),
      cmocka_unit_test(test_settrace_none_in_a_loop),
      cmocka_unit_test(test_bare_except_around_a_loop),
      cmocka_unit_test(test_spin_in_a_profile_function),
      cmocka_unit_test(test_spin_in_a_monitoring_callback),
      cmocka_unit_test(test_long_switch_interval),
      cmocka_unit_test(test_a_call_holding_the_gil_makes_its_interpreter_lost),
  };
  int failed = cmocka_run_group_tests_name(
      g_mode == MANYPY_THREAD_MODE_DIRECT ? "DIRECT" : "HANDOFF", tests, NULL, NULL);
  capi_remove_temp_dirs();
  return failed;
}
