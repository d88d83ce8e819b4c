/*
 * Weights are shared: big_weights.pt (256 MB of float32 parameters) served
 * by every interpreter of a 4-interpreter pool costs this process about one
 * copy of the weights, not four.
 *
 * Why the bound fails if replicas copied weights: the measure is the
 * process's private memory, Private_Clean + Private_Dirty from
 * /proc/self/smaps_rollup. manypy reads the archive once into private
 * memory and hands every interpreter a view of each storage record, so the
 * weights are W bytes of Private_Dirty, once. A replica that copied its weights (torch's own
 * PackageImporter reads every storage record into a new allocation) would
 * add W bytes of anonymous Private_Dirty memory per interpreter: 4 W for
 * four replicas, over the 2 W bound. Each forward() sums every weight, so
 * every page is touched in every interpreter: lazily faulted copies would
 * not escape the count either.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi_test_support.h"

#define POOL_SIZE 4
#define K 64 /* big_weights.py: forward(x) with x [batch, 64] */

static manypy_call_options* pinned(int32_t interp) {
  manypy_call_options* options = manypy_call_options_new();
  ASSERT_OK(manypy_call_options_set_interpreter(options, interp));
  return options;
}

static void test_weights_are_shared(void** state) {
  (void)state;
  double t0 = capi_now();
  manypy_pool* pool = MAKE_POOL(POOL_SIZE, MANYPY_THREAD_MODE_DIRECT);
  /* Start every interpreter, and open a small package in each so that the
   * torch.package machinery is imported everywhere before the baseline. */
  manypy_package* small = LOAD_PACKAGE(pool, "identity.pt");
  manypy_object* identity = LOAD_MODEL(small);
  for (int32_t i = 0; i < POOL_SIZE; ++i) {
    assert_int_equal(EVAL_INT64(pool, i, "1 + 1"), 2);
    manypy_value* items[1] = {manypy_value_new_int64(i)};
    manypy_value* args = LIST_OF(1, items);
    manypy_call_options* options = pinned(i);
    manypy_value* r = NULL;
    ASSERT_OK(manypy_object_call(identity, NULL, args, NULL, options, &r));
    manypy_value_free(r);
    manypy_call_options_free(options);
    manypy_value_free(args);
  }
  manypy_object_free(identity);
  manypy_package_free(small);
  fprintf(stderr, "  %d interpreters ready in %.1f s\n", POOL_SIZE, capi_now() - t0);

  long long before = capi_private_bytes();
  manypy_package* package = LOAD_PACKAGE(pool, "big_weights.pt");
  manypy_object* model = LOAD_MODEL(package);
  /* x: row 0 is e_0, row 1 is 2 e_5: out[0] = w[0, :64] + S,
   * out[1] = 2 w[5, :64] + S, with S the sum of all weights. */
  static float x[2 * K];
  memset(x, 0, sizeof x);
  x[0] = 1;
  x[K + 5] = 2;
  const int64_t x_shape[2] = {2, K};
  manypy_value* items[1] = {F32_TENSOR(x, 2, x_shape)};
  manypy_value* args = LIST_OF(1, items);
  manypy_value* results[POOL_SIZE];
  for (int32_t i = 0; i < POOL_SIZE; ++i) {
    manypy_call_options* options = pinned(i);
    double t = capi_now();
    results[i] = NULL;
    ASSERT_OK(manypy_object_call(model, NULL, args, NULL, options, &results[i]));
    fprintf(stderr, "  big_weights on interpreter %d: %.2f s\n", (int)i, capi_now() - t);
    manypy_call_options_free(options);
  }
  long long after = capi_private_bytes();

  /* Each replica's weights are at one address: one storage. */
  int64_t data[POOL_SIZE];
  for (int32_t i = 0; i < POOL_SIZE; ++i) {
    manypy_call_options* options = pinned(i);
    manypy_value* address = NULL;
    ASSERT_OK(manypy_object_call(model, "weight_address", NULL, NULL, options, &address));
    ASSERT_OK(manypy_value_get_int64(address, &data[i]));
    manypy_value_free(address);
    manypy_call_options_free(options);
  }
  /* Read through getattr, the weights are the host's own copy (the model
   * keeps the parameter): one more W. */
  manypy_value* wv = NULL;
  ASSERT_OK(manypy_object_getattr(model, "w", NULL, &wv));
  DLManagedTensor* w = NULL;
  ASSERT_OK(manypy_value_get_tensor(wv, &w));
  manypy_value_free(wv);
  long long after_getattr = capi_private_bytes();
  assert_int_equal(w->dl_tensor.ndim, 2);
  assert_int_equal(w->dl_tensor.shape[1], 1024);
  if (w->dl_tensor.strides != NULL) { /* C-contiguous, as read below */
    assert_int_equal(w->dl_tensor.strides[0], 1024);
    assert_int_equal(w->dl_tensor.strides[1], 1);
  }
  long long weight_bytes = capi_numel(&w->dl_tensor) * 4;

  long long growth = after - before;
  fprintf(stderr,
          "  weights %.1f MB; private memory %.1f MB before, %.1f MB after 4 replicas: "
          "growth %.1f MB (%.2f x the weights; the bound is 2 x); %.1f MB after a getattr\n",
          weight_bytes / 1048576.0, before / 1048576.0, after / 1048576.0, growth / 1048576.0,
          (double)growth / (double)weight_bytes, after_getattr / 1048576.0);
  for (int32_t i = 1; i < POOL_SIZE; ++i) assert_int_equal(data[i], data[0]);
  assert_true(weight_bytes >= 200LL * 1024 * 1024);
  if (growth >= 2 * weight_bytes) {
    fail_msg("private memory grew by %lld bytes for %lld bytes of weights in %d replicas", growth,
             weight_bytes, POOL_SIZE);
  }

  /* The results: every replica gave the same bytes, and they are right. */
  const float* wf = w->dl_tensor.data;
  double sum = 0;
  int64_t n = capi_numel(&w->dl_tensor);
  for (int64_t k = 0; k < n; ++k) sum += wf[k];
  float expected[2 * K];
  for (int j = 0; j < K; ++j) {
    expected[j] = (float)(wf[j] + sum);
    expected[K + j] = (float)(2.0 * wf[5 * 1024 + j] + sum);
  }
  const int64_t out_shape[2] = {2, K};
  for (int32_t i = 0; i < POOL_SIZE; ++i) {
    /* float32 sums of 64 M values: allow 1e-3 of the largest output. */
    ASSERT_F32_TENSOR(results[i], 2, out_shape, expected, 1e-3, "big_weights output");
    ASSERT_VALUES_EQUAL(results[i], results[0]);
  }
  fprintf(stderr, "  sum of the weights %.6f\n", sum);
  w->deleter(w);
  for (int32_t i = 0; i < POOL_SIZE; ++i) manypy_value_free(results[i]);
  manypy_value_free(args);
  manypy_object_free(model);
  manypy_package_free(package);
  manypy_pool_destroy(pool);
}

int main(void) {
  double t0 = capi_now();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_weights_are_shared),
  };
  int failed = cmocka_run_group_tests_name("capi_weights", tests, NULL, NULL);
  fprintf(stderr, "capi_weights: %.1f s\n", capi_now() - t0);
  return failed == 0 ? 0 : 1;
}
