/*
 * Deep recursion through C ends in RecursionError, never in a stack
 * overflow (docs/threads.md, "Deep recursion"). Model code raises the
 * recursion limit to 10**6, then recurses 300,000 deep through C
 * (`list(map(f, ...))`): before the fix that overflowed the stack of the
 * thread running the call and killed the process (SIGSEGV), in both thread
 * modes. Now the call fails with MANYPY_ERR_PYTHON, a RecursionError and
 * its traceback, on host threads with the stacks hosts give by default
 * (glibc's 8 MiB, Rust's 2 MiB, a JVM's 1 MiB, and 512 KiB), and the
 * interpreter serves on.
 *
 * Its own ctest entry: on a build without the fix the process dies, which
 * fails the entry.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi_test_support.h"

static manypy_pool* g_pool;

static const char* const kSource =
    "import sys\n"
    "sys.setrecursionlimit(10 ** 6)\n"
    "def through_c(n):\n"
    "    return list(map(through_c, [n - 1])) if n > 0 else []\n"
    "def through_sorted(n):\n"
    "    return sorted([0], key=lambda v: through_sorted(n - 1)) if n > 0 else []\n"
    "def in_python(n):\n"
    "    return in_python(n - 1) + 1 if n > 0 else 0\n";

/* What a thread saw, for the test thread to check (cmocka asserts only
 * there). */
typedef struct outcome {
  manypy_code deep;   /* through_c(300000) */
  manypy_code sorted; /* through_sorted(300000): the most stack a level, of those measured */
  char type[128];
  int has_traceback;
  manypy_code shallow; /* through_c(20): still fine */
  manypy_code python;  /* in_python(100), no C between the frames */
  manypy_code lowered; /* sys.setrecursionlimit(1000) inside a call */
  int64_t after;       /* 6 * 7 after all that */
  char why[512];       /* the first unexpected failure */
} outcome;

static manypy_code run(const char* source, int eval, outcome* o, int64_t* value) {
  manypy_status* s = NULL;
  if (eval) {
    manypy_value* out = NULL;
    s = manypy_pool_eval(g_pool, 0, source, &out);
    if (s == NULL && value != NULL) s = manypy_value_get_int64(out, value);
    manypy_value_free(out);
  } else {
    s = manypy_pool_exec(g_pool, 0, source);
  }
  manypy_code code = s ? manypy_status_code(s) : MANYPY_OK;
  if (s != NULL && o != NULL && o->why[0] == '\0') {
    snprintf(o->why, sizeof o->why, "%s: %s: %s", source, manypy_code_name(code),
             manypy_status_message(s));
  }
  manypy_status_free(s);
  return code;
}

static void* recurse(void* arg) {
  outcome* o = arg;
  if (run(kSource, 0, o, NULL) != MANYPY_OK) return NULL;
  o->why[0] = '\0';
  manypy_value* out = NULL;
  manypy_status* s = manypy_pool_eval(g_pool, 0, "through_c(300000)", &out);
  o->deep = s ? manypy_status_code(s) : MANYPY_OK;
  if (s != NULL) {
    const char* type = manypy_status_python_type(s);
    snprintf(o->type, sizeof o->type, "%s", type ? type : "(none)");
    const char* tb = manypy_status_traceback(s);
    o->has_traceback = tb != NULL && strstr(tb, "through_c") != NULL;
    if (o->deep != MANYPY_ERR_PYTHON) {
      snprintf(o->why, sizeof o->why, "%s", manypy_status_message(s));
    }
  }
  manypy_status_free(s);
  manypy_value_free(out);
  o->sorted = run("through_sorted(300000)", 1, NULL, NULL);
  o->shallow = run("len(through_c(20))", 1, o, NULL);
  o->python = run("in_python(100)", 1, o, NULL);
  o->lowered = run("sys.setrecursionlimit(1000)", 0, o, NULL);
  o->after = -1;
  (void)run("6 * 7", 1, o, &o->after);
  return NULL;
}

/* Runs `recurse` on a new thread with a `stack` bytes stack. */
static void recurse_on_thread(size_t stack, outcome* o) {
  memset(o, 0, sizeof *o);
  pthread_attr_t attr;
  assert_int_equal(pthread_attr_init(&attr), 0);
  assert_int_equal(pthread_attr_setstacksize(&attr, stack), 0);
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, &attr, recurse, o), 0);
  assert_int_equal(pthread_join(thread, NULL), 0);
  pthread_attr_destroy(&attr);
}

static void check(const outcome* o, size_t stack) {
  if (o->deep != MANYPY_ERR_PYTHON || strcmp(o->type, "RecursionError") != 0) {
    fail_msg("a %zu KiB thread: through_c(300000) gave %s %s (%s)", stack / 1024,
             manypy_code_name(o->deep), o->type, o->why);
  }
  assert_true(o->has_traceback);
  if (o->sorted != MANYPY_ERR_PYTHON) {
    fail_msg("a %zu KiB thread: through_sorted(300000) gave %s", stack / 1024,
             manypy_code_name(o->sorted));
  }
  if (o->shallow != MANYPY_OK || o->python != MANYPY_OK || o->lowered != MANYPY_OK) {
    fail_msg("a %zu KiB thread: %s", stack / 1024, o->why);
  }
  assert_int_equal(o->after, 42);
}

static void test_host_threads(void** state) {
  (void)state;
  const size_t stacks[] = {8u << 20, 2u << 20, 1u << 20, 512u << 10};
  for (size_t k = 0; k < sizeof stacks / sizeof stacks[0]; ++k) {
    outcome o;
    recurse_on_thread(stacks[k], &o);
    check(&o, stacks[k]);
  }
}

static int setup_mode(manypy_thread_mode mode) {
  manypy_pool_options* options = manypy_pool_options_new();
  manypy_status* s = manypy_pool_options_set_thread_mode(options, mode);
  if (s == NULL) s = manypy_pool_create(options, &g_pool);
  manypy_pool_options_free(options);
  if (s != NULL) {
    capi_print_status("setup", s, __FILE__, __LINE__);
    manypy_status_free(s);
    return -1;
  }
  return 0;
}

static int setup_direct(void** state) {
  (void)state;
  return setup_mode(MANYPY_THREAD_MODE_DIRECT);
}

static int setup_handoff(void** state) {
  (void)state;
  return setup_mode(MANYPY_THREAD_MODE_HANDOFF);
}

static int teardown(void** state) {
  (void)state;
  manypy_pool_destroy(g_pool);
  g_pool = NULL;
  return 0;
}

int main(void) {
  /* DIRECT: the calls run on the host's threads. HANDOFF: on the
   * interpreter's own thread, whatever the caller's stack. */
  const struct CMUnitTest direct[] = {cmocka_unit_test(test_host_threads)};
  const struct CMUnitTest handoff[] = {cmocka_unit_test(test_host_threads)};
  int failed = cmocka_run_group_tests_name("DIRECT", direct, setup_direct, teardown);
  failed += cmocka_run_group_tests_name("HANDOFF", handoff, setup_handoff, teardown);
  return failed;
}
