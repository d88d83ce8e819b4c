/*
 * The process stays the host's (docs/security.md): model code cannot change
 * what belongs to the whole host process rather than to its interpreter.
 * - faulthandler.dump_traceback_later is refused as enable and register are
 *   (before: its timer ended the host one second later, with status 1);
 * - os.chdir and os.fchdir are refused (before: the host's next relative
 *   manypy_package_load_file failed with MANYPY_ERR_NOT_FOUND);
 * - signal.pthread_sigmask may read a thread's mask but not change it
 *   (before: it changed the host thread's mask in DIRECT mode);
 * - ctypes.CDLL(None) is the interpreter's own libpython (before: the host
 *   program, where Python's functions are not, or are another Python's).
 * Every case runs in DIRECT mode (calls on this thread) and in HANDOFF mode
 * (calls on the interpreter's own thread).
 *
 * hostile.pt (samples/models/hostile.py, "process-wide state") holds the
 * model.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capi_test_support.h"

static capi_fixture g;
static manypy_thread_mode g_mode;

static int setup_direct(void** state) {
  (void)state;
  g_mode = MANYPY_THREAD_MODE_DIRECT;
  return capi_fixture_setup(&g, 1, g_mode, "hostile.pt");
}

static int setup_handoff(void** state) {
  (void)state;
  g_mode = MANYPY_THREAD_MODE_HANDOFF;
  return capi_fixture_setup(&g, 1, g_mode, "hostile.pt");
}

static int teardown(void** state) {
  (void)state;
  capi_fixture_teardown(&g);
  return 0;
}

/* model.<method>(*items): the status, owned by the caller; *out (may be
 * NULL) gets the result. */
static manypy_status* call(const char* method, size_t count, manypy_value** items,
                           manypy_value** out) {
  manypy_value* args = count ? TUPLE_OF(count, items) : NULL;
  manypy_value* result = NULL;
  manypy_status* s = manypy_object_call(g.model, method, args, NULL, NULL, &result);
  manypy_value_free(args);
  if (out != NULL) {
    *out = result;
  } else {
    manypy_value_free(result);
  }
  return s;
}

/* The call must fail with a Python exception of `type` whose message names
 * manypy. */
static void expect_refused(manypy_status* s, const char* type) {
  assert_non_null(s);
  if (manypy_status_code(s) != MANYPY_ERR_PYTHON) {
    capi_print_status("expected a refusal", s, __FILE__, __LINE__);
    fail_msg("%s, expected MANYPY_ERR_PYTHON", manypy_code_name(manypy_status_code(s)));
  }
  assert_string_equal(manypy_status_python_type(s), type);
  ASSERT_CONTAINS(manypy_status_message(s), "(manypy)");
  manypy_status_free(s);
}

/* ---- faulthandler -------------------------------------------------------- */

static void test_dump_traceback_later_is_refused(void** state) {
  (void)state;
  manypy_value* items[2] = {manypy_value_new_double(1.0), manypy_value_new_bool(1)};
  /* Unrefused, its timer would end this process a second later (status 1). */
  expect_refused(call("dump_traceback_later", 2, items, NULL), "ValueError");
  /* Cancelling a timer that is not there is harmless, and works. */
  ASSERT_OK(call("cancel_dump_traceback_later", 0, NULL, NULL));
  /* The rest of faulthandler's handlers stay refused too. */
  ASSERT_CODE(manypy_pool_exec(g.pool, 0, "import faulthandler\nfaulthandler.enable()"),
              MANYPY_ERR_PYTHON);
}

/* ---- the working directory ----------------------------------------------- */

static void test_chdir_is_refused(void** state) {
  (void)state;
  char original[PATH_MAX], before[PATH_MAX], after[PATH_MAX];
  assert_non_null(getcwd(original, sizeof original));
  /* The host works from the archives' directory and names them relatively. */
  assert_int_equal(chdir(capi_archives_dir()), 0);
  assert_non_null(getcwd(before, sizeof before));
  for (int k = 0; k < 2; ++k) {
    manypy_value* items[1] = {STRING("/")};
    expect_refused(call(k == 0 ? "chdir" : "fchdir", 1, items, NULL), "manypy.ProcessStateRefused");
    assert_non_null(getcwd(after, sizeof after));
    assert_string_equal(after, before);
  }
  /* The error is a PermissionError, which code that changes directory
   * where it may not already expects. */
  ASSERT_OK(manypy_pool_exec(g.pool, 0,
                             "import os\n"
                             "try:\n"
                             "    os.chdir('/')\n"
                             "    refused_as = 'nothing'\n"
                             "except PermissionError as e:\n"
                             "    refused_as = type(e).__name__\n"));
  char* refused_as = EVAL_STRING(g.pool, 0, "refused_as", NULL);
  assert_string_equal(refused_as, "ProcessStateRefused");
  free(refused_as);
  /* The host's relative load still finds its file. */
  manypy_package* package = NULL;
  ASSERT_OK(manypy_package_load_file(g.pool, "identity.pt", &package));
  manypy_package_free(package);
  assert_int_equal(chdir(original), 0);
}

/* ---- signal masks ---------------------------------------------------------- */

static int blocked_here(int signum) {
  sigset_t now;
  assert_int_equal(pthread_sigmask(SIG_BLOCK, NULL, &now), 0);
  return sigismember(&now, signum);
}

/* Whether `signum` is among the model's thread's blocked signals. */
static int blocked_for_the_model(int signum) {
  manypy_value* out = NULL;
  ASSERT_OK(call("signal_mask", 0, NULL, &out));
  size_t n = 0;
  ASSERT_OK(manypy_value_length(out, &n));
  int found = 0;
  for (size_t i = 0; i < n; ++i) {
    const manypy_value* item = NULL;
    ASSERT_OK(manypy_value_get_item(out, i, &item));
    int64_t s = 0;
    ASSERT_OK(manypy_value_get_int64(item, &s));
    found |= s == signum;
  }
  manypy_value_free(out);
  return found;
}

static manypy_status* mask_call(const char* method, int signum) {
  manypy_value* items[1] = {manypy_value_new_int64(signum)};
  return call(method, 1, items, NULL);
}

static void test_signal_masks_stay_the_hosts(void** state) {
  (void)state;
  /* The host blocks SIGUSR2 on this thread (as a host that takes SIGTERM
   * with sigwait blocks it on every thread). In DIRECT mode the model runs
   * on this thread and must not unblock it. */
  sigset_t usr2;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  assert_int_equal(pthread_sigmask(SIG_BLOCK, &usr2, NULL), 0);
  if (g_mode == MANYPY_THREAD_MODE_DIRECT) {
    assert_true(blocked_for_the_model(SIGUSR2));
    expect_refused(mask_call("unblock_signal", SIGUSR2), "ValueError");
    assert_true(blocked_here(SIGUSR2));
  }
  expect_refused(mask_call("block_signal", SIGUSR1), "ValueError");
  assert_false(blocked_here(SIGUSR1));
  assert_false(blocked_for_the_model(SIGUSR1));
  /* What changes nothing works: unblocking what is not blocked, blocking
   * what is, reading the mask (signal_mask above). */
  ASSERT_OK(mask_call("unblock_signal", SIGUSR1));
  if (g_mode == MANYPY_THREAD_MODE_DIRECT) ASSERT_OK(mask_call("block_signal", SIGUSR2));
  /* CPython's own errors are kept. */
  ASSERT_CODE(mask_call("block_signal", 100000), MANYPY_ERR_PYTHON);
  assert_int_equal(pthread_sigmask(SIG_UNBLOCK, &usr2, NULL), 0);
}

/* ---- dlopen(NULL) -------------------------------------------------------- */

static void test_cdll_none_is_the_interpreters_own(void** state) {
  (void)state;
  manypy_value* out = NULL;
  ASSERT_OK(call("dlopen_program", 0, NULL, &out));
  const char* problems = NULL;
  size_t length = 0;
  ASSERT_OK(manypy_value_get_string(out, &problems, &length));
  if (length != 0) fail_msg("ctypes.CDLL(None): %s", problems);
  manypy_value_free(out);
}

#define CASES                                                                                      \
  cmocka_unit_test(test_dump_traceback_later_is_refused), cmocka_unit_test(test_chdir_is_refused), \
      cmocka_unit_test(test_signal_masks_stay_the_hosts),                                          \
      cmocka_unit_test(test_cdll_none_is_the_interpreters_own)

int main(void) {
  const struct CMUnitTest direct[] = {CASES};
  const struct CMUnitTest handoff[] = {CASES};
  int failed = cmocka_run_group_tests_name("DIRECT", direct, setup_direct, teardown);
  failed += cmocka_run_group_tests_name("HANDOFF", handoff, setup_handoff, teardown);
  return failed;
}
