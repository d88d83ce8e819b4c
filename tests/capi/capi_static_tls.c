/*
 * Static TLS exhaustion (hazard 4): run WITHOUT GLIBC_TUNABLES, a pool of 7
 * interpreters cannot load torch in all of them. The library must say so
 * with MANYPY_ERR_STATIC_TLS naming the fix, leave the out-parameter alone,
 * and keep the healthy interpreters usable by later pools.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi_test_support.h"

#define TOO_MANY 7
#define SENTINEL_POOL ((manypy_pool*)(uintptr_t)0x5e5e5e5e)

static manypy_pool* g_pool;

static int teardown_pool(void** state) {
  (void)state;
  manypy_pool_destroy(g_pool);
  g_pool = NULL;
  return 0;
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
    fail_msg("a pool of %d interpreters started without GLIBC_TUNABLES; expected "
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_static_tls_exhaustion_is_reported, teardown_pool),
      cmocka_unit_test_teardown(test_healthy_interpreters_still_serve, teardown_pool),
      cmocka_unit_test_teardown(test_no_further_start_is_tried, teardown_pool),
  };
  return cmocka_run_group_tests_name("capi_static_tls", tests, NULL, NULL);
}
