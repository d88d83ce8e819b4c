/*
 * manypy_tensor, the reference-counted tensor: made from a caller's DLPack
 * tensor, a buffer (borrowed or copied) or a tensor value; its deleter or
 * release runs exactly once, when the last reference, value and result
 * sharing its memory is gone; values made from it share the memory without
 * consuming the reference; bad input is refused with the ownership taken.
 * Then references taken and dropped by many threads at once. One
 * interpreter (identity.pt).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "capi_test_support.h"

#define SENTINEL_TENSOR ((manypy_tensor*)(uintptr_t)0x6d6d6d6d)
#define SENTINEL_VALUE ((manypy_value*)(uintptr_t)0x7a7a7a7a)

static const DLDataType kF32 = {kDLFloat, 32, 1};
static float g_data[6] = {1, 2, 3, 4, 5, 6};
static const int64_t kShape[2] = {2, 3};

static capi_fixture g; /* identity.pt */

/* identity(tensor value of t): the result, owned by the caller. */
static manypy_value* identity_of(const manypy_tensor* t) {
  manypy_value* x = NULL;
  ASSERT_OK(manypy_value_new_tensor_ref(t, &x));
  manypy_value* items[1] = {x};
  manypy_value* args = TUPLE_OF(1, items);
  manypy_value* result = NULL;
  ASSERT_OK(manypy_object_call(g.model, NULL, args, NULL, NULL, &result));
  manypy_value_free(args);
  assert_int_equal(manypy_value_get_kind(result), MANYPY_VALUE_TENSOR);
  return result;
}

/* Where a tensor value's first element is. */
static const void* data_of(const manypy_value* v) {
  DLManagedTensor* m = NULL;
  ASSERT_OK(manypy_value_get_tensor(v, &m));
  const void* data = (const char*)m->dl_tensor.data + m->dl_tensor.byte_offset;
  m->deleter(m);
  return data;
}

static void test_from_managed_tensor(void** state) {
  (void)state;
  atomic_int deleted = 0;
  manypy_tensor* t = NULL;
  ASSERT_OK(manypy_tensor_new(capi_counted_tensor(g_data, kF32, 2, kShape, NULL, &deleted), &t));
  const DLTensor* dl = manypy_tensor_dl_tensor(t);
  assert_non_null(dl);
  assert_ptr_equal((const char*)dl->data + dl->byte_offset, g_data);
  assert_int_equal(dl->ndim, 2);
  assert_int_equal(dl->shape[0], 2);
  assert_int_equal(dl->shape[1], 3);
  assert_int_equal(dl->dtype.code, kDLFloat);
  assert_int_equal(dl->dtype.bits, 32);
  assert_int_equal(dl->device.device_type, kDLCPU);

  /* A second reference: the same handle. */
  assert_ptr_equal(manypy_tensor_retain(t), t);
  manypy_tensor_release(t);
  assert_int_equal(atomic_load(&deleted), 0);
  assert_ptr_equal(manypy_tensor_dl_tensor(t), dl); /* stable while held */

  /* A value shares the memory and keeps it alive without the handle. */
  manypy_value* v = NULL;
  ASSERT_OK(manypy_value_new_tensor_ref(t, &v));
  assert_ptr_equal(data_of(v), g_data);
  manypy_value* result = identity_of(t);
  assert_ptr_equal(data_of(result), g_data); /* zero copy both ways */
  ASSERT_F32_TENSOR(result, 2, kShape, g_data, 0, "identity(x)");
  manypy_tensor_release(t); /* the last reference */
  assert_int_equal(atomic_load(&deleted), 0);
  manypy_value_free(v);
  assert_int_equal(atomic_load(&deleted), 0); /* the result shares it */
  manypy_value_free(result);
  assert_int_equal(atomic_load(&deleted), 1);
}

static void test_from_buffer(void** state) {
  (void)state;
  /* Borrowed: released once, after the last user. */
  atomic_int released = 0;
  manypy_tensor* t = NULL;
  ASSERT_OK(manypy_tensor_new_from_buffer(g_data, sizeof g_data, kF32, 2, kShape, NULL, 0,
                                          capi_count_release, &released, &t));
  assert_ptr_equal(manypy_tensor_dl_tensor(t)->data, g_data);
  manypy_value* result = identity_of(t);
  manypy_tensor_release(t);
  assert_int_equal(atomic_load(&released), 0);
  manypy_value_free(result);
  assert_int_equal(atomic_load(&released), 1);

  /* Copied: released at once; the copy is the tensor's own memory. */
  float scratch[6];
  memcpy(scratch, g_data, sizeof scratch);
  released = 0;
  const int64_t strides[2] = {1, 2}; /* a transposed view of a [3, 2] buffer */
  ASSERT_OK(manypy_tensor_new_from_buffer(scratch, sizeof scratch, kF32, 2, kShape, strides, 1,
                                          capi_count_release, &released, &t));
  assert_int_equal(atomic_load(&released), 1);
  memset(scratch, 0, sizeof scratch);
  const DLTensor* dl = manypy_tensor_dl_tensor(t);
  assert_ptr_not_equal(dl->data, scratch);
  assert_null(dl->strides); /* C-contiguous */
  const float transposed[6] = {1, 3, 5, 2, 4, 6};
  assert_memory_equal(dl->data, transposed, sizeof transposed);
  result = identity_of(t);
  ASSERT_F32_TENSOR(result, 2, kShape, transposed, 0, "identity(a copied transposed view)");
  manypy_value_free(result);
  manypy_tensor_release(t);

  /* Bool: DLPack's bool code both ways. */
  static uint8_t mask[4] = {1, 0, 0, 1};
  const int64_t shape4[1] = {4};
  const DLDataType b8 = {MANYPY_DL_BOOL, 8, 1};
  ASSERT_OK(
      manypy_tensor_new_from_buffer(mask, sizeof mask, b8, 1, shape4, NULL, 0, NULL, NULL, &t));
  result = identity_of(t);
  DLManagedTensor* m = NULL;
  ASSERT_OK(manypy_value_get_tensor(result, &m));
  assert_int_equal(m->dl_tensor.dtype.code, MANYPY_DL_BOOL);
  assert_memory_equal((const char*)m->dl_tensor.data + m->dl_tensor.byte_offset, mask, 4);
  m->deleter(m);
  manypy_value_free(result);
  manypy_tensor_release(t);
}

static void test_from_value(void** state) {
  (void)state;
  manypy_value* v = NULL;
  ASSERT_OK(manypy_pool_eval(g.pool, 0, "__import__('torch').arange(6.0).reshape(2, 3) + 1", &v));
  manypy_tensor* t = NULL;
  ASSERT_OK(manypy_tensor_from_value(v, &t));
  const void* data = data_of(v);
  manypy_value_free(v); /* the tensor outlives the value */
  const DLTensor* dl = manypy_tensor_dl_tensor(t);
  assert_ptr_equal((const char*)dl->data + dl->byte_offset, data); /* zero copy */
  assert_int_equal(dl->ndim, 2);
  assert_memory_equal((const char*)dl->data + dl->byte_offset, g_data, sizeof g_data);
  /* And back into a call, twice, from one reference. */
  for (int k = 0; k < 2; ++k) {
    manypy_value* result = identity_of(t);
    ASSERT_F32_TENSOR(result, 2, kShape, g_data, 0, "identity(a result's tensor)");
    manypy_value_free(result);
  }
  manypy_tensor_release(t);

  /* Values of other kinds. */
  manypy_value* n = manypy_value_new_int64(3);
  t = SENTINEL_TENSOR;
  manypy_status* s = EXPECT_CODE(manypy_tensor_from_value(n, &t), MANYPY_ERR_WRONG_KIND);
  ASSERT_CONTAINS(manypy_status_message(s), "manypy_tensor_from_value");
  ASSERT_CONTAINS(manypy_status_message(s), "int64");
  manypy_status_free(s);
  manypy_value_free(n);
  manypy_value* list = manypy_value_new_list();
  ASSERT_CODE(manypy_tensor_from_value(list, &t), MANYPY_ERR_WRONG_KIND);
  manypy_value_free(list);
  assert_ptr_equal(t, SENTINEL_TENSOR);
}

/* Bad input: the status, the ownership taken (deleter or release run once),
 * the out-parameter untouched. */
static void test_bad_input(void** state) {
  (void)state;
  static float data[6];
  atomic_int deleted = 0;
  manypy_tensor* t = SENTINEL_TENSOR;
  DLManagedTensor* cuda = capi_counted_tensor(data, kF32, 2, kShape, NULL, &deleted);
  cuda->dl_tensor.device.device_type = kDLCUDA;
  manypy_status* s = EXPECT_CODE(manypy_tensor_new(cuda, &t), MANYPY_ERR_BAD_TENSOR);
  ASSERT_CONTAINS(manypy_status_message(s), "device type 2");
  manypy_status_free(s);
  assert_int_equal(atomic_load(&deleted), 1);
  DLManagedTensor* unmapped =
      capi_counted_tensor((void*)(uintptr_t)4096, kF32, 2, kShape, NULL, &deleted);
  ASSERT_CODE(manypy_tensor_new(unmapped, &t), MANYPY_ERR_BAD_TENSOR);
  assert_int_equal(atomic_load(&deleted), 2);
  ASSERT_INVALID_ARG(manypy_tensor_new(NULL, &t), "manypy_tensor_new", "tensor");
  ASSERT_INVALID_ARG(
      manypy_tensor_new(capi_counted_tensor(data, kF32, 2, kShape, NULL, &deleted), NULL),
      "manypy_tensor_new", "out_tensor");
  assert_int_equal(atomic_load(&deleted), 3);

  atomic_int released = 0;
  ASSERT_INVALID_ARG(manypy_tensor_new_from_buffer(data, sizeof data, kF32, 2, kShape, NULL, 2,
                                                   capi_count_release, &released, &t),
                     "manypy_tensor_new_from_buffer", "copy");
  ASSERT_INVALID_ARG(manypy_tensor_new_from_buffer(data, sizeof data, kF32, 2, kShape, NULL, 0,
                                                   capi_count_release, &released, NULL),
                     "manypy_tensor_new_from_buffer", "out_tensor");
  ASSERT_INVALID_ARG(manypy_tensor_new_from_buffer(NULL, sizeof data, kF32, 2, kShape, NULL, 1,
                                                   capi_count_release, &released, &t),
                     "manypy_tensor_new_from_buffer", "data");
  ASSERT_INVALID_ARG(manypy_tensor_new_from_buffer(data, sizeof data, kF32, 2, NULL, NULL, 0,
                                                   capi_count_release, &released, &t),
                     "manypy_tensor_new_from_buffer", "shape");
  s = EXPECT_CODE(manypy_tensor_new_from_buffer(data, 20, kF32, 2, kShape, NULL, 0,
                                                capi_count_release, &released, &t),
                  MANYPY_ERR_BAD_TENSOR);
  ASSERT_CONTAINS(manypy_status_message(s), "the buffer holds 20 bytes");
  manypy_status_free(s);
  assert_int_equal(atomic_load(&released), 5);
  assert_ptr_equal(t, SENTINEL_TENSOR);

  manypy_value* v = SENTINEL_VALUE;
  ASSERT_INVALID_ARG(manypy_value_new_tensor_ref(NULL, &v), "manypy_value_new_tensor_ref",
                     "tensor");
  ASSERT_OK(
      manypy_tensor_new_from_buffer(data, sizeof data, kF32, 2, kShape, NULL, 0, NULL, NULL, &t));
  ASSERT_INVALID_ARG(manypy_value_new_tensor_ref(t, NULL), "manypy_value_new_tensor_ref",
                     "out_value");
  assert_ptr_equal(v, SENTINEL_VALUE);
  manypy_tensor_release(t);
}

/* ---- many threads ------------------------------------------------------------ */

#define THREADS 8
#define ROUNDS 20000

typedef struct {
  manypy_tensor* shared;
  int errors;
} toucher;

/* Takes and drops references and values of the shared tensor; every value
 * made must read the same memory. */
static void* touch(void* arg) {
  toucher* w = arg;
  for (int k = 0; k < ROUNDS; ++k) {
    manypy_tensor* mine = manypy_tensor_retain(w->shared);
    manypy_value* v = NULL;
    manypy_status* s = k % 8 == 0 ? manypy_value_new_tensor_ref(mine, &v) : NULL;
    if (s != NULL) w->errors++;
    manypy_status_free(s);
    if (manypy_tensor_dl_tensor(mine)->data != (void*)g_data) w->errors++;
    if (k % 2 == 0) {
      manypy_tensor_release(mine);
      manypy_value_free(v);
    } else {
      manypy_value_free(v);
      manypy_tensor_release(mine);
    }
  }
  return NULL;
}

static void test_references_from_many_threads(void** state) {
  (void)state;
  atomic_int released = 0;
  manypy_tensor* t = NULL;
  ASSERT_OK(manypy_tensor_new_from_buffer(g_data, sizeof g_data, kF32, 2, kShape, NULL, 0,
                                          capi_count_release, &released, &t));
  toucher workers[THREADS];
  pthread_t threads[THREADS];
  for (int k = 0; k < THREADS; ++k) {
    workers[k] = (toucher){t, 0};
    assert_int_equal(pthread_create(&threads[k], NULL, touch, &workers[k]), 0);
  }
  for (int k = 0; k < THREADS; ++k) {
    assert_int_equal(pthread_join(threads[k], NULL), 0);
    assert_int_equal(workers[k].errors, 0);
  }
  assert_int_equal(atomic_load(&released), 0);
  manypy_tensor_release(t);
  assert_int_equal(atomic_load(&released), 1);
}

static int setup(void** state) {
  (void)state;
  return capi_fixture_setup(&g, 1, MANYPY_THREAD_MODE_DIRECT, "identity.pt");
}

static int teardown(void** state) {
  (void)state;
  capi_fixture_teardown(&g);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_from_managed_tensor),
      cmocka_unit_test(test_from_buffer),
      cmocka_unit_test(test_from_value),
      cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_references_from_many_threads),
  };
  return cmocka_run_group_tests_name("capi_tensor_handles", tests, setup, teardown);
}
