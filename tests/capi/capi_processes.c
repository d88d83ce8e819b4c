/*
 * Processes and signals (docs/security.md, "Forked children" and "Signal
 * handlers belong to the host"): model code that forks (a DataLoader's
 * workers, a multiprocessing pool, os.fork) gets its children back as
 * Python would, and no child ever returns into the host's code (it would
 * run this program a second time); model code cannot change the host's
 * signal handlers (SIGTERM, SIGINT, SIGCHLD). Every case runs in DIRECT and
 * in HANDOFF mode, where calls run on the interpreter's own thread, the one
 * that started Python.
 *
 * hostile.pt (samples/models/hostile.py) holds the model.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capi_test_support.h"

static pid_t g_host_pid;
static char g_escaped[64];

static capi_fixture g;

/* Runs in a process that is not this test's: a child that returned into the
 * host's code. It leaves a mark for the test process and ends. */
static void end_if_escaped(void) {
  if (getpid() == g_host_pid) return;
  FILE* f = fopen(g_escaped, "a");
  if (f != NULL) {
    fprintf(f, "process %d ran the host's code\n", (int)getpid());
    fclose(f);
  }
  _exit(0);
}

static void assert_nothing_escaped(void) {
  end_if_escaped();
  if (access(g_escaped, F_OK) == 0) fail_msg("a forked child ran the host's code (%s)", g_escaped);
}

/* model.<method>(int argument) as an int64 result. */
static int64_t call_int(const char* method, int64_t argument) {
  manypy_value* items[1] = {manypy_value_new_int64(argument)};
  manypy_value* args = TUPLE_OF(1, items);
  manypy_value* out = NULL;
  manypy_status* s = manypy_object_call(g.model, method, args, NULL, NULL, &out);
  end_if_escaped();
  ASSERT_OK(s);
  int64_t value = 0;
  ASSERT_OK(manypy_value_get_int64(out, &value));
  manypy_value_free(out);
  manypy_value_free(args);
  assert_nothing_escaped();
  return value;
}

static int setup_direct(void** state) {
  (void)state;
  return capi_fixture_setup(&g, 1, MANYPY_THREAD_MODE_DIRECT, "hostile.pt");
}

static int setup_handoff(void** state) {
  (void)state;
  return capi_fixture_setup(&g, 1, MANYPY_THREAD_MODE_HANDOFF, "hostile.pt");
}

static int teardown(void** state) {
  (void)state;
  capi_fixture_teardown(&g);
  return 0;
}

/* ---- forked children ------------------------------------------------------ */

static void test_data_loader_workers(void** state) {
  (void)state;
  assert_int_equal(call_int("data_loader", 2), 140); /* 0 + 1 + 4 + ... + 49 */
  assert_int_equal(call_int("data_loader", 0), 140); /* and in-process */
}

static void test_multiprocessing_pool(void** state) {
  (void)state;
  assert_int_equal(call_int("process_pool", 2), 36); /* |-8| + ... + |-1| */
}

static void test_child_that_returns_ends_there(void** state) {
  (void)state;
  manypy_value* out = NULL;
  manypy_status* s = manypy_object_call(g.model, "fork_and_return", NULL, NULL, NULL, &out);
  end_if_escaped();
  ASSERT_OK(s);
  int64_t status = -1;
  ASSERT_OK(manypy_value_get_int64(out, &status));
  assert_int_equal(status, 0); /* its code returned without an error */
  manypy_value_free(out);
  assert_nothing_escaped();
}

static void test_child_exits_with_its_status(void** state) {
  (void)state;
  assert_int_equal(call_int("fork_and_exit", 7), 7);
  /* The host itself still refuses os._exit. */
  manypy_status* s =
      EXPECT_CODE(manypy_pool_exec(g.pool, 0, "import os\nos._exit(3)"), MANYPY_ERR_PYTHON);
  assert_string_equal(manypy_status_python_type(s), "manypy.ProcessExitRefused");
  manypy_status_free(s);
}

/* A multiprocessing.Process child runs its target and ends with its code,
 * 0 here. It ended with 1 whenever threading knew the forking thread as a
 * foreign thread, as it always knows an interpreter's home thread (HANDOFF
 * mode): its bootstrap failed as the process shut down (runtime.py,
 * main_thread_in_forked_children). */
static void test_process_child_exits_with_its_code(void** state) {
  (void)state;
  /* In DIRECT mode this registers this thread with threading, as anything
   * that asks for the current thread (logging, torch) does. */
  assert_true(EVAL_BOOL(g.pool, 0, "__import__('threading').current_thread() is not None"));
  for (int k = 0; k < 2; ++k) {
    manypy_value* out = NULL;
    manypy_status* s = manypy_object_call(g.model, "process_exit_code", NULL, NULL, NULL, &out);
    end_if_escaped();
    ASSERT_OK(s);
    int64_t code = -1;
    ASSERT_OK(manypy_value_get_int64(out, &code));
    assert_int_equal(code, 0);
    manypy_value_free(out);
  }
  assert_nothing_escaped();
}

/* ---- signal handlers -------------------------------------------------------- */

static void host_handler(int signum) { (void)signum; }

static int same_disposition(const struct sigaction* a, const struct sigaction* b) {
  return a->sa_handler == b->sa_handler && a->sa_flags == b->sa_flags;
}

static void test_signal_handlers_stay_the_hosts(void** state) {
  (void)state;
  const int signals[3] = {SIGTERM, SIGINT, SIGCHLD};
  struct sigaction before[3], after;
  struct sigaction mine;
  memset(&mine, 0, sizeof mine);
  mine.sa_handler = host_handler;
  assert_int_equal(sigaction(SIGTERM, &mine, NULL), 0); /* one the host installed itself */
  for (int k = 0; k < 3; ++k) {
    assert_int_equal(sigaction(signals[k], NULL, &before[k]), 0);
    manypy_value* items[1] = {manypy_value_new_int64(signals[k])};
    manypy_value* args = TUPLE_OF(1, items);
    manypy_value* out = NULL;
    manypy_status* s = EXPECT_CODE(
        manypy_object_call(g.model, "set_signal", args, NULL, NULL, &out), MANYPY_ERR_PYTHON);
    assert_string_equal(manypy_status_python_type(s), "ValueError");
    manypy_status_free(s);
    manypy_value_free(args);
    assert_int_equal(sigaction(signals[k], NULL, &after), 0);
    if (!same_disposition(&before[k], &after)) {
      fail_msg("the model changed the host's handler of signal %d", signals[k]);
    }
  }
  /* faulthandler would install handlers for SIGSEGV and friends. */
  ASSERT_CODE(manypy_pool_exec(g.pool, 0, "import faulthandler\nfaulthandler.enable()"),
              MANYPY_ERR_PYTHON);
  /* A DataLoader sets a SIGCHLD handler only from Python's main thread, which
   * no thread of an interpreter is. */
  assert_int_equal(call_int("data_loader", 2), 140);
  assert_int_equal(sigaction(SIGCHLD, NULL, &after), 0);
  assert_true(same_disposition(&before[2], &after));
  assert_false(EVAL_BOOL(g.pool, 0,
                         "__import__('threading').current_thread() is "
                         "__import__('threading').main_thread()"));
  signal(SIGTERM, SIG_DFL);
}

#define CASES                                                                              \
  cmocka_unit_test(test_data_loader_workers), cmocka_unit_test(test_multiprocessing_pool), \
      cmocka_unit_test(test_child_that_returns_ends_there),                                \
      cmocka_unit_test(test_child_exits_with_its_status),                                  \
      cmocka_unit_test(test_process_child_exits_with_its_code),                            \
      cmocka_unit_test(test_signal_handlers_stay_the_hosts)

int main(void) {
  g_host_pid = getpid();
  snprintf(g_escaped, sizeof g_escaped, "/tmp/capi_processes_escaped_%d", (int)g_host_pid);
  unlink(g_escaped);
  const struct CMUnitTest direct[] = {CASES};
  const struct CMUnitTest handoff[] = {CASES};
  int failed = cmocka_run_group_tests_name("DIRECT", direct, setup_direct, teardown);
  failed += cmocka_run_group_tests_name("HANDOFF", handoff, setup_handoff, teardown);
  unlink(g_escaped);
  return failed;
}
