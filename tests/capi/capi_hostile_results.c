/*
 * Results that attack the host (docs/security.md, "Results"): an object
 * whose __class__ claims to be torch.Tensor, tensor subclasses whose
 * methods would run while the result is converted (and empty the list being
 * converted), and tensors the model keeps after returning them and then
 * grows, repoints or frees. Conversion must not trust them: exact type
 * checks, snapshots of containers, and result tensors that are the host's
 * alone. Also: bool results on torch 1.13 no longer leak.
 *
 * hostile.pt (samples/models/hostile.py) holds the model; one interpreter.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capi_test_support.h"

static capi_fixture g;

static int setup(void** state) {
  (void)state;
  return capi_fixture_setup(&g, 1, MANYPY_THREAD_MODE_DIRECT, "hostile.pt");
}

static int teardown(void** state) {
  (void)state;
  capi_fixture_teardown(&g);
  return 0;
}

/* model.<method>(argument) (argument NULL: none; owned by the call). */
static manypy_status* call(const char* method, manypy_value* argument, manypy_value** out) {
  manypy_value* args = manypy_value_new_tuple();
  if (argument != NULL)
    capi_assert_ok(manypy_value_append(args, argument), "append", __FILE__, __LINE__);
  manypy_status* s = manypy_object_call(g.model, method, args, NULL, NULL, out);
  manypy_value_free(args);
  return s;
}

static void expect_unsupported(const char* method, manypy_value* argument, const char* named) {
  manypy_value* out = NULL;
  manypy_status* s = EXPECT_CODE(call(method, argument, &out), MANYPY_ERR_UNSUPPORTED_TYPE);
  ASSERT_CONTAINS(manypy_status_message(s), named);
  manypy_status_free(s);
  assert_null(out);
}

/* ---- types that lie -------------------------------------------------------- */

static void test_object_claiming_to_be_a_tensor(void** state) {
  (void)state;
  expect_unsupported("fake_tensor", NULL, "'FakeTensor'");
  expect_unsupported("fake_tensors_in_a_list", NULL, "'FakeTensor'");
}

static void test_tensor_subclasses_are_refused(void** state) {
  (void)state;
  expect_unsupported("tensor_subclass", NULL, "subclass of torch.Tensor");
  /* Their __torch_function__ empties the list being converted: nothing of
   * theirs runs, and the host survives. */
  expect_unsupported("list_cleared_during_conversion", manypy_value_new_int64(64), "ClearsList");
}

/* ---- tensors the model keeps ----------------------------------------------- */

#define KEPT (1 << 20) /* 4 MB: freeing it unmaps it */

/* The first n floats of `result` are start, start + 1, ... */
static void assert_counts_from(const manypy_value* result, int64_t n, float start,
                               const char* what) {
  DLManagedTensor* t = NULL;
  ASSERT_OK(manypy_value_get_tensor(result, &t));
  assert_int_equal(t->dl_tensor.ndim, 1);
  assert_int_equal(t->dl_tensor.shape[0], n);
  const float* data = (const float*)((const char*)t->dl_tensor.data + t->dl_tensor.byte_offset);
  for (int64_t k = 0; k < n; ++k) {
    if (data[k] != start + (float)k) {
      fail_msg("%s: element %lld is %g, expected %g", what, (long long)k, data[k],
               start + (float)k);
    }
  }
  t->deleter(t);
}

static void test_kept_results_are_the_hosts(void** state) {
  (void)state;
  const char* changes[4] = {"resize", "set", "out", "fill"};
  for (int c = 0; c < 4; ++c) {
    manypy_value *whole = NULL, *view = NULL, *none = NULL;
    ASSERT_OK(call("keep", manypy_value_new_int64(KEPT), &whole));
    ASSERT_OK(call("keep_and_return_a_view", manypy_value_new_int64(KEPT), &view));
    ASSERT_OK(call("change_kept", STRING(changes[c]), &none));
    manypy_value_free(none);
    char what[64];
    snprintf(what, sizeof what, "a kept result after '%s'", changes[c]);
    assert_counts_from(whole, KEPT, 0, what);
    assert_counts_from(view, KEPT - 1, 1, what);
    manypy_value_free(view);
    manypy_value_free(whole);
  }
}

static void test_parameter_result_is_a_copy(void** state) {
  (void)state;
  manypy_value* out = NULL;
  ASSERT_OK(call("parameter", NULL, &out));
  assert_counts_from(out, 6, 0, "the model's parameter");
  manypy_value* again = NULL;
  ASSERT_OK(call("parameter", NULL, &again));
  DLManagedTensor *a = NULL, *b = NULL;
  ASSERT_OK(manypy_value_get_tensor(out, &a));
  ASSERT_OK(manypy_value_get_tensor(again, &b));
  assert_ptr_not_equal(a->dl_tensor.data, b->dl_tensor.data); /* each the caller's own */
  a->deleter(a);
  b->deleter(b);
  manypy_value_free(again);
  manypy_value_free(out);
}

/* torch's to_dlpack exports a conjugated or negated view as the memory
 * under it (the values before the conjugation): they cross as what they
 * stand for. */
static void test_conjugated_results_cross_as_their_values(void** state) {
  (void)state;
  manypy_value* out = NULL;
  ASSERT_OK(manypy_pool_eval(g.pool, 0, "__import__('torch').tensor([1+2j, 3-4j]).conj()", &out));
  DLManagedTensor* t = NULL;
  ASSERT_OK(manypy_value_get_tensor(out, &t));
  assert_int_equal(t->dl_tensor.dtype.code, kDLComplex);
  const float* c = (const float*)t->dl_tensor.data; /* complex64: re, im */
  assert_true(c[0] == 1 && c[1] == -2 && c[2] == 3 && c[3] == 4);
  t->deleter(t);
  manypy_value_free(out);
  ASSERT_OK(
      manypy_pool_eval(g.pool, 0, "__import__('torch').tensor([1+2j, 3-4j]).conj().imag", &out));
  const float minus[2] = {-2, 4};
  const int64_t shape[1] = {2};
  ASSERT_F32_TENSOR(out, 1, shape, minus, 0, "the imaginary parts of a conjugate");
  manypy_value_free(out);
}

/* ---- bool results -------------------------------------------------------- */

static long resident_kb(void) {
  FILE* f = fopen("/proc/self/statm", "r");
  long pages = 0, resident = 0;
  if (f == NULL || fscanf(f, "%ld %ld", &pages, &resident) != 2) fail_msg("cannot read statm");
  fclose(f);
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* torch 1.13's to_dlpack allocated its record of a bool tensor, holding
 * the tensor, before it refused bool: every bool result leaked. 100 results
 * of 4 MB must not grow the process by 400 MB. */
static void test_bool_results_do_not_leak(void** state) {
  (void)state;
  manypy_value* warm = NULL;
  ASSERT_OK(manypy_pool_eval(
      g.pool, 0, "__import__('torch').ones(1 << 22, dtype=__import__('torch').bool)", &warm));
  manypy_value_free(warm);
  long before = resident_kb();
  for (int k = 0; k < 100; ++k) {
    manypy_value* out = NULL;
    ASSERT_OK(manypy_pool_eval(
        g.pool, 0, "__import__('torch').ones(1 << 22, dtype=__import__('torch').bool)", &out));
    DLManagedTensor* t = NULL;
    ASSERT_OK(manypy_value_get_tensor(out, &t));
    assert_int_equal(t->dl_tensor.dtype.code, MANYPY_DL_BOOL);
    assert_int_equal(((const unsigned char*)t->dl_tensor.data)[12345], 1);
    t->deleter(t);
    manypy_value_free(out);
  }
  long grown = resident_kb() - before;
  print_message("100 bool results of 4 MB: resident memory grew %ld KB\n", grown);
  assert_true(grown < 64 * 1024);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_object_claiming_to_be_a_tensor),
      cmocka_unit_test(test_tensor_subclasses_are_refused),
      cmocka_unit_test(test_kept_results_are_the_hosts),
      cmocka_unit_test(test_parameter_result_is_a_copy),
      cmocka_unit_test(test_conjugated_results_cross_as_their_values),
      cmocka_unit_test(test_bool_results_do_not_leak),
  };
  return cmocka_run_group_tests_name("capi_hostile_results", tests, setup, teardown);
}
