/*
 * Pool churn: 200 one-interpreter pools, then 50 two-interpreter pools, one
 * after the other in one process, each running evals whose results are
 * checked. Interpreters are process-wide and must be reused (a process can
 * hold at most manypy_max_interpreters()), and each lease must start clean.
 * Then package churn: packages opened and freed leave nothing behind in the
 * interpreter.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi_test_support.h"

#define SMALL_ROUNDS 200
#define PAIR_ROUNDS 50

static manypy_pool* g_pool;

static int teardown_pool(void** state) {
  (void)state;
  manypy_pool_destroy(g_pool);
  g_pool = NULL;
  return 0;
}

/* In interpreter `i` of g_pool: the previous lease's global is gone, a new
 * one is set, and an expression involving `round` gives the right result. */
static void one_round(int round, int32_t i) {
  assert_int_equal(EVAL_INT64(g_pool, i, "globals().get('churn_global', -1)"), -1);
  char source[64];
  snprintf(source, sizeof source, "churn_global = %d", round);
  ASSERT_OK(manypy_pool_exec(g_pool, i, source));
  char expr[96];
  snprintf(expr, sizeof expr, "churn_global * 7 + %d", (int)i);
  assert_int_equal(EVAL_INT64(g_pool, i, expr), (int64_t)round * 7 + i);
}

static void test_churn_single(void** state) {
  (void)state;
  double t0 = capi_now();
  for (int round = 0; round < SMALL_ROUNDS; ++round) {
    g_pool = MAKE_POOL(1, MANYPY_THREAD_MODE_DIRECT);
    one_round(round, 0);
    teardown_pool(NULL);
    if (round == 0) fprintf(stderr, "  first 1-interpreter pool: %.2f s\n", capi_now() - t0);
  }
  fprintf(stderr, "  %d 1-interpreter pools: %.2f s\n", SMALL_ROUNDS, capi_now() - t0);
}

static void test_churn_pairs(void** state) {
  (void)state;
  double t0 = capi_now();
  for (int round = 0; round < PAIR_ROUNDS; ++round) {
    g_pool = MAKE_POOL(2, MANYPY_THREAD_MODE_DIRECT);
    one_round(round, 0);
    one_round(round, 1);
    teardown_pool(NULL);
    if (round == 0) fprintf(stderr, "  first 2-interpreter pool: %.2f s\n", capi_now() - t0);
  }
  fprintf(stderr, "  %d 2-interpreter pools: %.2f s\n", PAIR_ROUNDS, capi_now() - t0);
}

/* torch.package registers the source of every module it imports with
 * linecache, and the entry holds the package's importer: until manypy
 * dropped those entries on closing a package, every package ever opened
 * stayed alive in each interpreter that opened it (tests/soak found it;
 * docs/memory.md). */
static void test_churn_packages(void** state) {
  (void)state;
  static const char kCount[] =
      "import gc, linecache\n"
      "def churn_importers():\n"
      "    gc.collect()\n"
      "    return sum(type(o).__name__ == 'PackageImporter' for o in gc.get_objects())\n";
  g_pool = MAKE_POOL(1, MANYPY_THREAD_MODE_DIRECT);
  ASSERT_OK(manypy_pool_exec(g_pool, 0, kCount));
  const int64_t lines = EVAL_INT64(g_pool, 0, "len(linecache.cache)");
  for (int round = 0; round < 20; ++round) {
    manypy_package* package = LOAD_PACKAGE(g_pool, "identity.pt");
    manypy_object* model = LOAD_MODEL(package); /* opens the package in the interpreter */
    manypy_object_free(model);
    manypy_package_free(package);
  }
  assert_int_equal(EVAL_INT64(g_pool, 0, "churn_importers()"), 0);
  assert_int_equal(EVAL_INT64(g_pool, 0, "len(linecache.cache)"), lines);
  /* A package whose pool handle went first: the package, then the lease, end. */
  manypy_package* package = LOAD_PACKAGE(g_pool, "identity.pt");
  manypy_object* model = LOAD_MODEL(package);
  teardown_pool(NULL);
  manypy_object_free(model);
  manypy_package_free(package);
  g_pool = MAKE_POOL(1, MANYPY_THREAD_MODE_DIRECT);
  ASSERT_OK(manypy_pool_exec(g_pool, 0, kCount));
  assert_int_equal(EVAL_INT64(g_pool, 0, "churn_importers()"), 0);
  assert_int_equal(EVAL_INT64(g_pool, 0, "len(linecache.cache)"), lines);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_churn_single, teardown_pool),
      cmocka_unit_test_teardown(test_churn_pairs, teardown_pool),
      cmocka_unit_test_teardown(test_churn_packages, teardown_pool),
  };
  return cmocka_run_group_tests_name("capi_churn", tests, NULL, NULL);
}
