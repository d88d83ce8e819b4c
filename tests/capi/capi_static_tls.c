/*
 * Static TLS exhaustion (hazard 4): run WITHOUT GLIBC_TUNABLES, a pool of 7
 * interpreters cannot load torch in all of them. The library must say so
 * with MANYPY_ERR_STATIC_TLS naming the fix, leave the out-parameter alone,
 * and keep the healthy interpreters usable by later pools. In a process of
 * its own ("capi_static_tls background"), a pool that serves early meets
 * the same failure in the background: it serves on the interpreters that
 * started, its stats count the others broken, and its callback is told why.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capi_test_support.h"

/* More than glibc's default optional static TLS holds on any torch (5 on
 * torch 1.13, 14 on torch 2.x): every namespace glibc allows. */
#define TOO_MANY 15
#define SENTINEL_POOL ((manypy_pool*)(uintptr_t)0x5e5e5e5e)

static manypy_pool* g_pool;

static int teardown_pool(void** state) {
  (void)state;
  manypy_pool_destroy(g_pool);
  g_pool = NULL;
  return 0;
}

/* What the pool's on_interpreter_failed callback was told. */
static pthread_mutex_t g_failed_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_failed_count;
static int32_t g_failed_index = -1;
static manypy_code g_failed_code;
static char g_failed_message[1024];

static void* g_failed_user_data;
static int g_freed; /* free_user_data's runs */

static void free_failed(void* user_data) {
  if (user_data == &g_failed_count) ++g_freed;
}

/* On a thread of manypy's: records, and asserts nothing (cmocka's failures
 * must happen on the test's thread). */
static void on_failed(void* user_data, int32_t interpreter, const manypy_status* why) {
  pthread_mutex_lock(&g_failed_mu);
  if (g_failed_count++ == 0) {
    g_failed_user_data = user_data;
    g_failed_index = interpreter;
    g_failed_code = manypy_status_code(why);
    snprintf(g_failed_message, sizeof g_failed_message, "%s", manypy_status_message(why));
  }
  pthread_mutex_unlock(&g_failed_mu);
}

static void test_background_start_failure(void** state) {
  (void)state;
  if (getenv("GLIBC_TUNABLES") != NULL || manypy_max_interpreters() < TOO_MANY) {
    fail_msg("run without GLIBC_TUNABLES where %d interpreters fit (ctest does)", TOO_MANY);
  }
  manypy_pool_options* options = manypy_pool_options_new();
  assert_non_null(options);
  ASSERT_OK(manypy_pool_options_set_interpreters(options, TOO_MANY));
  ASSERT_OK(manypy_pool_options_set_serve_early(options, 1));
  /* A NULL options still frees the data, once. */
  ASSERT_INVALID_ARG(
      manypy_pool_options_set_on_interpreter_failed(NULL, on_failed, &g_failed_count, free_failed),
      "manypy_pool_options_set_on_interpreter_failed", "options");
  assert_int_equal(g_freed, 1);
  g_freed = 0;
  ASSERT_OK(manypy_pool_options_set_on_interpreter_failed(options, on_failed, &g_failed_count,
                                                          free_failed));
  double t0 = capi_now();
  ASSERT_OK(manypy_pool_create(options, &g_pool));
  manypy_pool_options_free(options);
  fprintf(stderr, "  serve-early pool of %d: serving after %.2f s\n", TOO_MANY, capi_now() - t0);
  assert_int_equal(EVAL_INT64(g_pool, MANYPY_ANY_INTERPRETER, "6 * 7"), 42);

  manypy_pool_stats stats;
  do {
    usleep(20000);
    memset(&stats, 0, sizeof stats);
    stats.struct_size = sizeof stats;
    ASSERT_OK(manypy_pool_get_stats(g_pool, &stats));
  } while (stats.starting > 0 && capi_now() - t0 < 300);
  fprintf(stderr, "  after %.2f s: %zu ready, %zu broken, %zu starting\n", capi_now() - t0,
          stats.ready, stats.broken, stats.starting);
  assert_int_equal(stats.starting, 0);
  assert_int_equal(stats.interpreters, TOO_MANY);
  assert_true(stats.ready >= 1);
  assert_true(stats.broken >= 1);
  assert_int_equal(stats.ready + stats.broken, TOO_MANY);

  /* The callback was told of each, with the reason. It runs on the
   * starting thread just after the member is counted broken, so the last
   * ones may still be on their way: wait for them (the same guard). */
  int told;
  int32_t index;
  for (;;) {
    pthread_mutex_lock(&g_failed_mu);
    told = g_failed_count;
    index = g_failed_index;
    pthread_mutex_unlock(&g_failed_mu);
    if (told >= (int)stats.broken || capi_now() - t0 >= 300) break;
    usleep(20000);
  }
  assert_int_equal(told, (int)stats.broken);
  assert_ptr_equal(g_failed_user_data, &g_failed_count);
  assert_int_equal(g_failed_code, MANYPY_ERR_STATIC_TLS);
  ASSERT_CONTAINS(g_failed_message, "GLIBC_TUNABLES=glibc.rtld.optional_static_tls");
  assert_true(index >= 1 && index < TOO_MANY);

  /* The state says why: the broken member's check names the failure. */
  manypy_status* s =
      EXPECT_CODE(manypy_pool_check_interpreter(g_pool, index), MANYPY_ERR_INTERPRETER_BROKEN);
  ASSERT_CONTAINS(manypy_status_message(s), "static TLS");
  manypy_status_free(s);
  /* A call pinned to it fails at once; calls that may go anywhere are
   * served by the others, every one. */
  manypy_value* v = NULL;
  ASSERT_CODE(manypy_pool_eval(g_pool, index, "1", &v), MANYPY_ERR_INTERPRETER_BROKEN);
  assert_null(v);
  for (int k = 0; k < 50; ++k) {
    assert_true(EVAL_DOUBLE(g_pool, MANYPY_ANY_INTERPRETER,
                            "__import__('torch').ones(3).sum().item()") == 3.0);
  }
  /* The callback's data is freed once, when its last holder (the pool;
   * the options went after create) lets go. */
  assert_int_equal(g_freed, 0);
  teardown_pool(NULL);
  assert_int_equal(g_freed, 1);
}

static void test_static_tls_exhaustion_is_reported(void** state) {
  (void)state;
  const char* tunables = getenv("GLIBC_TUNABLES");
  if (tunables != NULL) {
    fail_msg("GLIBC_TUNABLES is set (%s): this test must run without it (ctest unsets it)",
             tunables);
  }
  if (manypy_max_interpreters() < TOO_MANY) {
    fprintf(stderr, "manypy_max_interpreters() = %zu < %d: nothing to test\n",
            manypy_max_interpreters(), TOO_MANY);
    skip();
  }
  manypy_pool_options* options = manypy_pool_options_new();
  assert_non_null(options);
  ASSERT_OK(manypy_pool_options_set_interpreters(options, TOO_MANY));
  manypy_pool* pool = SENTINEL_POOL;
  double t0 = capi_now();
  manypy_status* s = manypy_pool_create(options, &pool);
  manypy_pool_options_free(options);
  fprintf(stderr, "  pool of %d: %s after %.2f s\n", TOO_MANY,
          manypy_code_name(manypy_status_code(s)), capi_now() - t0);
  if (s == NULL) {
    g_pool = pool;
    fail_msg(
        "a pool of %d interpreters started without GLIBC_TUNABLES; expected "
        "MANYPY_ERR_STATIC_TLS",
        TOO_MANY);
  }
  s = EXPECT_CODE(s, MANYPY_ERR_STATIC_TLS);
  fprintf(stderr, "  message: %s\n", manypy_status_message(s));
  ASSERT_CONTAINS(manypy_status_message(s), "GLIBC_TUNABLES=glibc.rtld.optional_static_tls");
  ASSERT_CONTAINS(manypy_status_message(s), "static TLS");
  ASSERT_STARTS_WITH(manypy_status_message(s), "interpreter ");
  manypy_status_free(s);
  assert_ptr_equal(pool, SENTINEL_POOL);
}

static void test_healthy_interpreters_still_serve(void** state) {
  (void)state;
  double t0 = capi_now();
  g_pool = MAKE_POOL(2, MANYPY_THREAD_MODE_DIRECT);
  /* Reused, not started: starting one costs about a second. */
  fprintf(stderr, "  pool of 2 after the failure: %.2f s\n", capi_now() - t0);
  for (int32_t i = 0; i < 2; ++i) {
    assert_int_equal(EVAL_INT64(g_pool, i, "1 + 1"), 2);
    assert_true(EVAL_DOUBLE(g_pool, i, "__import__('torch').ones(2).sum().item()") == 2.0);
  }
  teardown_pool(NULL);
}

/* After a static-TLS failure no new interpreter is tried (each failed load
 * risks glibc's consistency): a pool that needs one more than the healthy
 * ones fails at once with the same status. */
static void test_no_further_start_is_tried(void** state) {
  (void)state;
  manypy_pool_options* options = manypy_pool_options_new();
  assert_non_null(options);
  ASSERT_OK(manypy_pool_options_set_interpreters(options, TOO_MANY));
  manypy_pool* pool = SENTINEL_POOL;
  double t0 = capi_now();
  manypy_status* s = EXPECT_CODE(manypy_pool_create(options, &pool), MANYPY_ERR_STATIC_TLS);
  double took = capi_now() - t0;
  manypy_pool_options_free(options);
  ASSERT_CONTAINS(manypy_status_message(s), "GLIBC_TUNABLES=glibc.rtld.optional_static_tls");
  manypy_status_free(s);
  assert_ptr_equal(pool, SENTINEL_POOL);
  fprintf(stderr, "  second pool of %d: refused after %.3f s\n", TOO_MANY, took);
}

/* Each group in a process of its own (two ctest entries): the first static
 * TLS failure of a process is what each meets, synchronously in
 * manypy_pool_create or in the background. */
int main(int argc, char** argv) {
  const struct CMUnitTest background[] = {
      cmocka_unit_test_teardown(test_background_start_failure, teardown_pool),
  };
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_static_tls_exhaustion_is_reported, teardown_pool),
      cmocka_unit_test_teardown(test_healthy_interpreters_still_serve, teardown_pool),
      cmocka_unit_test_teardown(test_no_further_start_is_tried, teardown_pool),
  };
  if (argc > 1 && strcmp(argv[1], "background") == 0) {
    return cmocka_run_group_tests_name("capi_static_tls_background", background, NULL, NULL);
  }
  return cmocka_run_group_tests_name("capi_static_tls", tests, NULL, NULL);
}
