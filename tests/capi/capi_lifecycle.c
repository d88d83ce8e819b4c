/*
 * Pool lifecycle: leases come back clean, per-pool intra-op threads, thread
 * modes (HANDOFF and DIRECT) under concurrent callers, destroy waiting for
 * calls in flight. Every pool has 2 interpreters, so the process starts 2
 * and every pool reuses them; the last test holds two pools at once (4).
 */
#define _GNU_SOURCE
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capi_test_support.h"

#define POOL_SIZE 2
#define THREADS 4
#define CALLS_PER_THREAD 200

/* The pool a test is using, destroyed by the teardown if the test fails. */
static manypy_pool* g_pool;

static void destroy_pool(void) {
  manypy_pool_destroy(g_pool);
  g_pool = NULL;
}

static int teardown_pool(void** state) {
  (void)state;
  destroy_pool();
  return 0;
}

/* ---- 7. leases come back clean ------------------------------------------- */

static char g_tmpdir[64];

static void make_module_dir(void) {
  strcpy(g_tmpdir, "/tmp/manypy_capi_XXXXXX");
  assert_non_null(mkdtemp(g_tmpdir));
  char path[128];
  snprintf(path, sizeof path, "%s/mp_test_mod.py", g_tmpdir);
  FILE* f = fopen(path, "w");
  assert_non_null(f);
  fputs("VALUE = 7\n", f);
  assert_int_equal(fclose(f), 0);
}

static int remove_entry(const char* path, const struct stat* st, int flag, struct FTW* ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  if (remove(path) != 0) fprintf(stderr, "warning: could not remove %s\n", path);
  return 0;
}

/* Teardown: the pool first (it may still hold the directory in sys.path),
 * then the directory, with any __pycache__ Python wrote into it. */
static int remove_module_dir(void** state) {
  teardown_pool(state);
  if (g_tmpdir[0] != '\0') {
    nftw(g_tmpdir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
    g_tmpdir[0] = '\0';
  }
  return 0;
}

static void test_leases_come_back_clean(void** state) {
  (void)state;
  make_module_dir();
  manypy_pool_options* options = manypy_pool_options_new();
  assert_non_null(options);
  ASSERT_OK(manypy_pool_options_set_interpreters(options, POOL_SIZE));
  ASSERT_OK(manypy_pool_options_add_sys_path(options, g_tmpdir));
  manypy_status* created = manypy_pool_create(options, &g_pool);
  manypy_pool_options_free(options);
  ASSERT_OK(created);
  manypy_pool* pool = g_pool;

  char expr[192];
  snprintf(expr, sizeof expr, "'%s' in __import__('sys').path", g_tmpdir);

  ASSERT_OK(manypy_pool_exec_all(pool,
                                 "import mp_test_mod\n"
                                 "leaked_global = 99\n"));
  for (int32_t i = 0; i < POOL_SIZE; ++i) {
    assert_int_equal(EVAL_BOOL(pool, i, expr), 1);
    assert_int_equal(EVAL_INT64(pool, i, "mp_test_mod.VALUE"), 7);
    assert_int_equal(EVAL_INT64(pool, i, "leaked_global"), 99);
    assert_int_equal(EVAL_BOOL(pool, i, "'mp_test_mod' in __import__('sys').modules"), 1);
  }
  destroy_pool();

  /* Same size: the same interpreters, leased again. */
  pool = g_pool = MAKE_POOL(POOL_SIZE, MANYPY_THREAD_MODE_DIRECT);
  for (int32_t i = 0; i < POOL_SIZE; ++i) {
    assert_int_equal(EVAL_BOOL(pool, i, expr), 0);
    assert_int_equal(EVAL_BOOL(pool, i, "'mp_test_mod' in __import__('sys').modules"), 0);
    manypy_value* value = (manypy_value*)(uintptr_t)0x7a7a7a7a;
    manypy_status* s =
        EXPECT_CODE(manypy_pool_eval(pool, i, "leaked_global", &value), MANYPY_ERR_PYTHON);
    assert_string_equal(manypy_status_python_type(s), "NameError");
    manypy_status_free(s);
    assert_ptr_equal(value, (manypy_value*)(uintptr_t)0x7a7a7a7a);
    /* Not importable any more: the path entry is gone, not just the module. */
    s = EXPECT_CODE(manypy_pool_exec(pool, i, "import mp_test_mod"), MANYPY_ERR_MODULE_NOT_FOUND);
    assert_string_equal(manypy_status_python_type(s), "ModuleNotFoundError");
    ASSERT_CONTAINS(manypy_status_message(s), "mp_test_mod");
    manypy_status_free(s);
    /* torch (imported at start) is still there and working. */
    assert_true(EVAL_DOUBLE(pool, i, "__import__('torch').ones(3).sum().item()") == 3.0);
  }
  destroy_pool();
}

/* Creates a pool of POOL_SIZE in `mode` with `threads` intra-op threads (0:
 * the default) and checks torch.get_num_threads() in each interpreter. */
static void check_intra_op_threads(manypy_thread_mode mode, int threads, int64_t expected) {
  manypy_pool_options* options = manypy_pool_options_new();
  assert_non_null(options);
  ASSERT_OK(manypy_pool_options_set_interpreters(options, POOL_SIZE));
  ASSERT_OK(manypy_pool_options_set_thread_mode(options, mode));
  if (threads > 0) ASSERT_OK(manypy_pool_options_set_intra_op_threads(options, threads));
  manypy_status* created = manypy_pool_create(options, &g_pool);
  manypy_pool_options_free(options);
  ASSERT_OK(created);
  for (int32_t i = 0; i < POOL_SIZE; ++i) {
    int64_t got = EVAL_INT64(g_pool, i, "__import__('torch').get_num_threads()");
    if (got != expected) {
      fail_msg(
          "%s pool, intra-op threads %d%s: torch.get_num_threads() in interpreter %d is "
          "%lld, expected %lld",
          mode == MANYPY_THREAD_MODE_DIRECT ? "DIRECT" : "HANDOFF", threads > 0 ? threads : 1,
          threads > 0 ? "" : " (default)", (int)i, (long long)got, (long long)expected);
    }
  }
  destroy_pool();
}

/* HANDOFF: calls run on the interpreters' own threads. */
static void test_intra_op_threads_handoff(void** state) {
  (void)state;
  check_intra_op_threads(MANYPY_THREAD_MODE_HANDOFF, 2, 2);
  check_intra_op_threads(MANYPY_THREAD_MODE_HANDOFF, 0, 1);
}

/* DIRECT: calls run on this thread, which has used torch in earlier leases
 * of the same interpreters; each pool's setting must still apply. */
static void test_intra_op_threads_direct(void** state) {
  (void)state;
  check_intra_op_threads(MANYPY_THREAD_MODE_DIRECT, 0, 1);
  check_intra_op_threads(MANYPY_THREAD_MODE_DIRECT, 2, 2);
  check_intra_op_threads(MANYPY_THREAD_MODE_DIRECT, 0, 1);
}

/* ---- 9. thread modes ------------------------------------------------------ */

static pthread_barrier_t g_start;

struct worker {
  manypy_pool* pool;
  int id;
  int failures;
  int64_t tid;
  char error[2048];
};

static void* worker_main(void* arg) {
  struct worker* w = arg;
  w->tid = (int64_t)gettid();
  pthread_barrier_wait(&g_start); /* all threads call at once */
  for (int k = 0; k < CALLS_PER_THREAD; ++k) {
    /* Alternate a fixed index with MANYPY_ANY_INTERPRETER. */
    int32_t interp = (k % 2 == 0) ? (int32_t)((w->id + k / 2) % POOL_SIZE) : MANYPY_ANY_INTERPRETER;
    char expr[96];
    snprintf(expr, sizeof expr, "combine(%d, %d)", w->id, k);
    int64_t got = -1;
    char error[1024];
    if (capi_eval_int64_nofail(w->pool, interp, expr, &got, error, sizeof error) != 0) {
      if (w->failures++ == 0) snprintf(w->error, sizeof w->error, "%s", error);
      continue;
    }
    int64_t want = (int64_t)w->id * 100000 + k * 3;
    if (got != want) {
      if (w->failures++ == 0) {
        snprintf(w->error, sizeof w->error, "%s gave %lld, expected %lld", expr, (long long)got,
                 (long long)want);
      }
    }
  }
  return NULL;
}

static void run_concurrent_calls(manypy_pool* pool) {
  /* Each call runs a small torch op (which releases the GIL, so DIRECT
   * callers overlap inside one interpreter) and some allocation. */
  ASSERT_OK(manypy_pool_exec_all(pool,
                                 "import torch\n"
                                 "def combine(t, k):\n"
                                 "    x = torch.full((64,), float(k)).mul(2.0).sum().item()\n"
                                 "    assert x == 128.0 * k, (x, k)\n"
                                 "    assert len(','.join(str(i) for i in range(100))) == 289\n"
                                 "    return t * 100000 + k * 3\n"));
  struct worker workers[THREADS];
  pthread_t threads[THREADS];
  assert_int_equal(pthread_barrier_init(&g_start, NULL, THREADS), 0);
  double t0 = capi_now();
  for (int t = 0; t < THREADS; ++t) {
    memset(&workers[t], 0, sizeof workers[t]);
    workers[t].pool = pool;
    workers[t].id = t;
    assert_int_equal(pthread_create(&threads[t], NULL, worker_main, &workers[t]), 0);
  }
  for (int t = 0; t < THREADS; ++t) assert_int_equal(pthread_join(threads[t], NULL), 0);
  pthread_barrier_destroy(&g_start);
  fprintf(stderr, "  %d threads x %d calls: %.3f s\n", THREADS, CALLS_PER_THREAD, capi_now() - t0);
  int failures = 0;
  for (int t = 0; t < THREADS; ++t) {
    if (workers[t].failures != 0) {
      fprintf(stderr, "thread %d: %d failures; first:\n%s\n", t, workers[t].failures,
              workers[t].error);
      failures += workers[t].failures;
    }
  }
  assert_int_equal(failures, 0);
}

static void test_handoff_exec_eval_and_errors(void** state) {
  (void)state;
  manypy_pool* pool = g_pool = MAKE_POOL(POOL_SIZE, MANYPY_THREAD_MODE_HANDOFF);
  ASSERT_OK(manypy_pool_exec_all(pool, "def square(x):\n    return x * x\n"));
  for (int32_t i = 0; i < POOL_SIZE; ++i) {
    assert_int_equal(EVAL_INT64(pool, i, "square(12)"), 144);
    assert_true(EVAL_DOUBLE(pool, i, "__import__('torch').ones(4).sum().item()") == 4.0);
  }
  /* The call runs on a library thread, not on this one, and always on the
   * same one per interpreter. */
  const char* tid_expr = "__import__('threading').get_native_id()";
  int64_t home0 = EVAL_INT64(pool, 0, tid_expr);
  int64_t home1 = EVAL_INT64(pool, 1, tid_expr);
  assert_true(home0 != (int64_t)gettid());
  assert_true(home1 != (int64_t)gettid());
  assert_true(home0 != home1);
  assert_true(EVAL_INT64(pool, 0, tid_expr) == home0);

  manypy_status* s = EXPECT_CODE(manypy_pool_exec(pool, 1,
                                                  "def handoff_failure():\n"
                                                  "    return {}['no such key']\n"
                                                  "handoff_failure()\n"),
                                 MANYPY_ERR_PYTHON);
  assert_string_equal(manypy_status_python_type(s), "KeyError");
  ASSERT_STARTS_WITH(manypy_status_message(s), "interpreter 1: ");
  ASSERT_CONTAINS(manypy_status_traceback(s), "Traceback (most recent call last)");
  ASSERT_CONTAINS(manypy_status_traceback(s), "in handoff_failure");
  ASSERT_CONTAINS(manypy_status_traceback(s), "KeyError");
  manypy_status_free(s);
  s = EXPECT_CODE(manypy_pool_exec(pool, 0, "x = = 1"), MANYPY_ERR_SYNTAX);
  assert_string_equal(manypy_status_python_type(s), "SyntaxError");
  ASSERT_CONTAINS(manypy_status_traceback(s), "SyntaxError");
  manypy_status_free(s);
  manypy_value* v = (manypy_value*)(uintptr_t)0x7a7a7a7a;
  s = EXPECT_CODE(manypy_pool_eval(pool, 0, "{1}", &v), MANYPY_ERR_UNSUPPORTED_TYPE);
  ASSERT_CONTAINS(manypy_status_message(s), "set");
  manypy_status_free(s);
  assert_ptr_equal(v, (manypy_value*)(uintptr_t)0x7a7a7a7a);
  assert_int_equal(EVAL_INT64(pool, 0, "1 + 1"), 2);
  assert_int_equal(EVAL_INT64(pool, 1, "1 + 1"), 2);
  destroy_pool();
}

static void test_handoff_concurrent_threads(void** state) {
  (void)state;
  manypy_pool* pool = g_pool = MAKE_POOL(POOL_SIZE, MANYPY_THREAD_MODE_HANDOFF);
  run_concurrent_calls(pool);
  destroy_pool();
}

static void test_direct_concurrent_threads(void** state) {
  (void)state;
  manypy_pool* pool = g_pool = MAKE_POOL(POOL_SIZE, MANYPY_THREAD_MODE_DIRECT);
  /* DIRECT: the call runs on the calling thread. */
  assert_int_equal(EVAL_INT64(pool, 1, "__import__('threading').get_native_id()"),
                   (int64_t)gettid());
  run_concurrent_calls(pool);
  destroy_pool();
}

/* ---- destroy waits for calls in flight -------------------------------------- */

struct slow_call {
  manypy_pool* pool;
  int write_fd;
  int64_t result;
  char error[1024];
  int failed;
};

static void* slow_call_main(void* arg) {
  struct slow_call* c = arg;
  char expr[160];
  /* Tells the test it is inside the interpreter, then takes 0.6 s. */
  snprintf(expr, sizeof expr,
           "(__import__('os').write(%d, b'x'), __import__('time').sleep(0.6), 5)[2]", c->write_fd);
  c->failed = capi_eval_int64_nofail(c->pool, 0, expr, &c->result, c->error, sizeof c->error);
  return NULL;
}

static void check_destroy_waits(manypy_thread_mode mode) {
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  struct slow_call call;
  memset(&call, 0, sizeof call);
  call.pool = g_pool = MAKE_POOL(POOL_SIZE, mode);
  call.write_fd = fds[1];
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, slow_call_main, &call), 0);
  char byte = 0;
  ssize_t got = read(fds[0], &byte, 1); /* the call is now in flight */
  double t0 = capi_now();
  destroy_pool();
  double waited = capi_now() - t0;
  assert_int_equal(pthread_join(thread, NULL), 0);
  close(fds[0]);
  close(fds[1]);
  assert_int_equal(got, 1);
  if (call.failed) fail_msg("the call in flight failed: %s", call.error);
  assert_int_equal(call.result, 5);
  if (waited < 0.4) {
    fail_msg("manypy_pool_destroy returned after %.3f s, before the call ended", waited);
  }
}

static void test_destroy_waits_for_calls_in_flight(void** state) {
  (void)state;
  check_destroy_waits(MANYPY_THREAD_MODE_DIRECT);
  check_destroy_waits(MANYPY_THREAD_MODE_HANDOFF);
}

static manypy_pool* g_other_pool;

/* ---- a thread with a small stack gets an error, not a crash ----------------- */

typedef struct small_stack_call {
  manypy_pool* direct;
  manypy_pool* handoff;
  manypy_status* direct_status;
  manypy_status* handoff_status;
} small_stack_call;

static void* call_on_small_stack(void* arg) {
  small_stack_call* c = arg;
  manypy_value* v = NULL;
  c->direct_status = manypy_pool_eval(c->direct, 0, "1 + 1", &v);
  manypy_value_free(v);
  v = NULL;
  /* HANDOFF runs the call on the library's thread: the caller's stack is enough. */
  c->handoff_status = manypy_pool_eval(c->handoff, 0, "1 + 1", &v);
  manypy_value_free(v);
  return NULL;
}

static void test_small_stack_is_refused_in_direct_mode(void** state) {
  (void)state;
  small_stack_call c = {0};
  c.direct = g_pool = MAKE_POOL(1, MANYPY_THREAD_MODE_DIRECT);
  c.handoff = g_other_pool = MAKE_POOL(1, MANYPY_THREAD_MODE_HANDOFF);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 160 * 1024); /* a JVM thread this small crashed */
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, &attr, call_on_small_stack, &c), 0);
  pthread_join(thread, NULL);
  pthread_attr_destroy(&attr);
  assert_int_equal(manypy_status_code(c.direct_status), MANYPY_ERR_RESOURCE_EXHAUSTED);
  ASSERT_CONTAINS(manypy_status_message(c.direct_status), "KiB of stack left");
  ASSERT_CONTAINS(manypy_status_message(c.direct_status), "HANDOFF");
  manypy_status_free(c.direct_status);
  ASSERT_OK(c.handoff_status);
  /* The interpreter is unharmed: a normal thread still calls it. */
  assert_int_equal(EVAL_INT64(c.direct, 0, "2 + 2"), 4);
}

/* ---- two live pools lease disjoint interpreters ---------------------------- */

static int teardown_both_pools(void** state) {
  manypy_pool_destroy(g_other_pool);
  g_other_pool = NULL;
  return teardown_pool(state);
}

static void test_two_live_pools_are_disjoint(void** state) {
  (void)state;
  g_pool = MAKE_POOL(POOL_SIZE, MANYPY_THREAD_MODE_DIRECT);
  g_other_pool = MAKE_POOL(POOL_SIZE, MANYPY_THREAD_MODE_DIRECT);
  ASSERT_OK(manypy_pool_exec_all(g_pool, "import sys\nowner = 'first'"));
  ASSERT_OK(manypy_pool_exec_all(g_other_pool, "import sys\nowner = 'second'"));
  int64_t sys_ids[2 * POOL_SIZE];
  for (int32_t i = 0; i < POOL_SIZE; ++i) {
    char* a = EVAL_STRING(g_pool, i, "owner", NULL);
    char* b = EVAL_STRING(g_other_pool, i, "owner", NULL);
    assert_string_equal(a, "first");
    assert_string_equal(b, "second");
    free(a);
    free(b);
    sys_ids[i] = EVAL_INT64(g_pool, i, "id(sys)");
    sys_ids[POOL_SIZE + i] = EVAL_INT64(g_other_pool, i, "id(sys)");
  }
  /* Four different interpreters (live objects at distinct addresses). */
  for (int i = 0; i < 2 * POOL_SIZE; ++i) {
    for (int j = 0; j < i; ++j) assert_true(sys_ids[i] != sys_ids[j]);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_leases_come_back_clean, remove_module_dir),
      cmocka_unit_test_teardown(test_intra_op_threads_handoff, teardown_pool),
      cmocka_unit_test_teardown(test_intra_op_threads_direct, teardown_pool),
      cmocka_unit_test_teardown(test_handoff_exec_eval_and_errors, teardown_pool),
      cmocka_unit_test_teardown(test_handoff_concurrent_threads, teardown_pool),
      cmocka_unit_test_teardown(test_direct_concurrent_threads, teardown_pool),
      cmocka_unit_test_teardown(test_destroy_waits_for_calls_in_flight, teardown_pool),
      /* Last: they start 2 more interpreters. */
      cmocka_unit_test_teardown(test_small_stack_is_refused_in_direct_mode, teardown_both_pools),
      cmocka_unit_test_teardown(test_two_live_pools_are_disjoint, teardown_both_pools),
  };
  return cmocka_run_group_tests_name("capi_lifecycle", tests, NULL, NULL);
}
