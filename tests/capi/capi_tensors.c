/*
 * Tensors (DLPack, CPU): ownership of caller tensors (deleters and release
 * callbacks run exactly once, and only when every user let go), zero-copy
 * through identity.pt, strided inputs, every dtype torch takes over DLPack,
 * and bad tensors. One interpreter.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "capi_test_support.h"

#define SENTINEL_VALUE ((manypy_value*)(uintptr_t)0x7a7a7a7a)

static const DLDataType kF32 = {kDLFloat, 32, 1};
static const DLDataType kI64 = {kDLInt, 64, 1};

static manypy_pool* g_pool;
static manypy_package* g_package;
static manypy_object* g_identity;

/* identity(x), x borrowed; returns the result. */
static manypy_value* identity(const manypy_value* x) {
  /* args must own its items, so wrap a tensor value by sharing it: a list
   * holding a new value over the same DLPack tensor. */
  DLManagedTensor* shared = NULL;
  ASSERT_OK(manypy_value_get_tensor(x, &shared));
  manypy_value* item = NULL;
  ASSERT_OK(manypy_value_new_tensor(shared, &item));
  manypy_value* args = manypy_value_new_list();
  ASSERT_OK(manypy_value_append(args, item));
  manypy_value* result = NULL;
  manypy_status* s = manypy_object_call(g_identity, NULL, args, NULL, NULL, &result);
  manypy_value_free(args);
  ASSERT_OK(s);
  assert_int_equal(manypy_value_get_kind(result), MANYPY_VALUE_TENSOR);
  return result;
}

/* A float32 [2, 3] tensor value over g_data23 that counts deleter calls. */
static float g_data23[6];
static const int64_t kShape23[2] = {2, 3};
static manypy_value* counted_value(atomic_int* deleted) {
  manypy_value* v = NULL;
  ASSERT_OK(
      manypy_value_new_tensor(capi_counted_tensor(g_data23, kF32, 2, kShape23, NULL, deleted), &v));
  return v;
}

/* The first item of an argument list (borrowed). */
static const manypy_value* item_of_args(const manypy_value* args) {
  const manypy_value* item = NULL;
  ASSERT_OK(manypy_value_get_item(args, 0, &item));
  return item;
}

static DLManagedTensor* tensor_of(const manypy_value* v) {
  DLManagedTensor* m = NULL;
  ASSERT_OK(manypy_value_get_tensor(v, &m));
  assert_non_null(m);
  return m;
}

static const void* data_of(const manypy_value* v) {
  DLManagedTensor* m = tensor_of(v);
  const void* data = (const char*)m->dl_tensor.data + m->dl_tensor.byte_offset;
  m->deleter(m);
  return data;
}

/* ---- ownership ----------------------------------------------------------------- */

/* The deleter waits for the value and every result sharing the memory. */
static void test_deleter_after_value_and_results(void** state) {
  (void)state;
  for (int k = 0; k < 6; ++k) g_data23[k] = (float)k;
  atomic_int deleted = 0;
  manypy_value* v = NULL;
  ASSERT_OK(manypy_value_new_tensor(
      capi_counted_tensor(g_data23, kF32, 2, kShape23, NULL, &deleted), &v));
  manypy_value* r1 = identity(v);
  manypy_value* r2 = identity(r1);
  assert_int_equal(atomic_load(&deleted), 0);
  manypy_value_free(v);
  assert_int_equal(atomic_load(&deleted), 0); /* r1, r2 share it */
  manypy_value_free(r1);
  assert_int_equal(atomic_load(&deleted), 0);
  DLManagedTensor* handed_out = tensor_of(r2);
  manypy_value_free(r2);
  assert_int_equal(atomic_load(&deleted), 0); /* handed_out shares it */
  assert_true(((const float*)handed_out->dl_tensor.data)[5] == 5.0f);
  handed_out->deleter(handed_out);
  assert_int_equal(atomic_load(&deleted), 1);

  /* The other order: results first, the value last. */
  ASSERT_OK(manypy_value_new_tensor(
      capi_counted_tensor(g_data23, kF32, 2, kShape23, NULL, &deleted), &v));
  r1 = identity(v);
  manypy_value_free(r1);
  assert_int_equal(atomic_load(&deleted), 1);
  manypy_value_free(v);
  assert_int_equal(atomic_load(&deleted), 2);

  /* A value never used: freed with the value. */
  ASSERT_OK(manypy_value_new_tensor(
      capi_counted_tensor(g_data23, kF32, 2, kShape23, NULL, &deleted), &v));
  assert_int_equal(atomic_load(&deleted), 2);
  manypy_value_free(v);
  assert_int_equal(atomic_load(&deleted), 3);
}

static void test_zero_copy_both_ways(void** state) {
  (void)state;
  atomic_int deleted = 0;
  manypy_value* v = NULL;
  ASSERT_OK(manypy_value_new_tensor(
      capi_counted_tensor(g_data23, kF32, 2, kShape23, NULL, &deleted), &v));
  assert_ptr_equal(data_of(v), g_data23);
  manypy_value* r = identity(v);
  assert_ptr_equal(data_of(r), g_data23);
  ASSERT_F32_TENSOR(r, 2, kShape23, g_data23, 0, "identity result");
  manypy_value_free(r);
  manypy_value_free(v);
  assert_int_equal(atomic_load(&deleted), 1);
}

/* A DLManagedTensor from manypy_value_get_tensor outlives the value. */
static void test_get_tensor_outlives_value(void** state) {
  (void)state;
  atomic_int deleted = 0;
  manypy_value* v = NULL;
  ASSERT_OK(manypy_value_new_tensor(
      capi_counted_tensor(g_data23, kF32, 2, kShape23, NULL, &deleted), &v));
  DLManagedTensor* a = tensor_of(v);
  DLManagedTensor* b = tensor_of(v); /* independent handles */
  assert_true(a != b);
  manypy_value_free(v);
  assert_int_equal(atomic_load(&deleted), 0);
  assert_int_equal(a->dl_tensor.ndim, 2);
  assert_int_equal(a->dl_tensor.shape[1], 3);
  a->deleter(a);
  assert_int_equal(atomic_load(&deleted), 0);
  assert_true(((const float*)b->dl_tensor.data)[4] == 4.0f);
  b->deleter(b);
  assert_int_equal(atomic_load(&deleted), 1);

  /* The same for a tensor made by Python: its memory is Python's. */
  manypy_value* made = NULL;
  ASSERT_OK(manypy_pool_eval(
      g_pool, 0, "__import__('torch').arange(1000, dtype=__import__('torch').float64)", &made));
  DLManagedTensor* m = tensor_of(made);
  manypy_value_free(made);
  /* Churn the interpreter's allocator a little. */
  manypy_value* other = NULL;
  ASSERT_OK(manypy_pool_eval(
      g_pool, 0,
      "[__import__('torch').ones(1000, dtype=__import__('torch').float64) * 7 for _ in range(10)]",
      &other));
  manypy_value_free(other);
  for (int64_t k = 0; k < 1000; ++k) {
    double x;
    memcpy(&x, capi_element(&m->dl_tensor, k), 8);
    if (x != (double)k) fail_msg("element %lld is %g after the value was freed", (long long)k, x);
  }
  m->deleter(m);
}

static float g_source[6];

static void test_from_buffer_borrowed(void** state) {
  (void)state;
  for (int k = 0; k < 6; ++k) g_source[k] = (float)k * 10;
  atomic_int released = 0;
  manypy_value* v = NULL;
  ASSERT_OK(manypy_value_new_tensor_from_buffer(g_source, sizeof g_source, kF32, 2, kShape23, NULL,
                                                0, capi_count_release, &released, &v));
  assert_int_equal(atomic_load(&released), 0);
  assert_ptr_equal(data_of(v), g_source);
  manypy_value* r = identity(v);
  assert_ptr_equal(data_of(r), g_source);
  /* Used in place: a change to the buffer shows. */
  g_source[2] = -1;
  const float expected[6] = {0, 10, -1, 30, 40, 50};
  ASSERT_F32_TENSOR(r, 2, kShape23, expected, 0, "borrowed buffer after a change");
  manypy_value_free(v);
  assert_int_equal(atomic_load(&released), 0);
  manypy_value_free(r);
  assert_int_equal(atomic_load(&released), 1);

  /* release may be NULL. */
  ASSERT_OK(manypy_value_new_tensor_from_buffer(g_source, sizeof g_source, kF32, 2, kShape23, NULL,
                                                0, NULL, NULL, &v));
  manypy_value_free(v);
}

static void test_from_buffer_copied(void** state) {
  (void)state;
  for (int k = 0; k < 6; ++k) g_source[k] = (float)k + 0.5f;
  atomic_int released = 0;
  manypy_value* v = NULL;
  ASSERT_OK(manypy_value_new_tensor_from_buffer(g_source, sizeof g_source, kF32, 2, kShape23, NULL,
                                                1, capi_count_release, &released, &v));
  assert_int_equal(atomic_load(&released), 1); /* before returning */
  assert_true(data_of(v) != (const void*)g_source);
  const float expected[6] = {0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f};
  for (int k = 0; k < 6; ++k) g_source[k] = -99; /* the copy must not see this */
  ASSERT_F32_TENSOR(v, 2, kShape23, expected, 0, "copied buffer");
  manypy_value* r = identity(v);
  ASSERT_F32_TENSOR(r, 2, kShape23, expected, 0, "identity of a copied buffer");
  manypy_value_free(v);
  manypy_value_free(r);
  assert_int_equal(atomic_load(&released), 1);

  /* A strided source (every other element of 12) copies into a contiguous
   * tensor. */
  float src[12];
  for (int k = 0; k < 12; ++k) src[k] = (float)k;
  const int64_t shape[1] = {6};
  const int64_t strides[1] = {2};
  ASSERT_OK(manypy_value_new_tensor_from_buffer(src, sizeof src, kF32, 1, shape, strides, 1,
                                                capi_count_release, &released, &v));
  assert_int_equal(atomic_load(&released), 2);
  DLManagedTensor* m = tensor_of(v);
  if (m->dl_tensor.strides != NULL) assert_int_equal(m->dl_tensor.strides[0], 1);
  m->deleter(m);
  for (int k = 0; k < 12; ++k) src[k] = -1;
  const float evens[6] = {0, 2, 4, 6, 8, 10};
  ASSERT_F32_TENSOR(v, 1, shape, evens, 0, "copy of a strided buffer");
  manypy_value_free(v);
}

/* ---- strided inputs ------------------------------------------------------------ */

static float g_matrix[12]; /* 3 x 4, row-major */

static void test_transposed_view(void** state) {
  (void)state;
  for (int k = 0; k < 12; ++k) g_matrix[k] = (float)k;
  /* The transpose of the 3 x 4 matrix: shape [4, 3], strides [1, 4]. */
  const int64_t shape[2] = {4, 3};
  const int64_t strides[2] = {1, 4};
  atomic_int deleted = 0;
  manypy_value* v = NULL;
  ASSERT_OK(manypy_value_new_tensor(
      capi_counted_tensor(g_matrix, kF32, 2, shape, strides, &deleted), &v));
  float expected[12];
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 3; ++j) expected[i * 3 + j] = (float)(j * 4 + i);
  }
  manypy_value* r = identity(v);
  ASSERT_F32_TENSOR(r, 2, shape, expected, 0, "identity of a transposed view");
  DLManagedTensor* m = tensor_of(r);
  assert_ptr_equal(m->dl_tensor.data, g_matrix);
  assert_non_null(m->dl_tensor.strides);
  assert_int_equal(m->dl_tensor.strides[0], 1);
  assert_int_equal(m->dl_tensor.strides[1], 4);
  m->deleter(m);
  manypy_value_free(r);
  manypy_value_free(v);
  assert_int_equal(atomic_load(&deleted), 1);
}

static int64_t g_longs[40];

static void test_step_two_slices(void** state) {
  (void)state;
  for (int k = 0; k < 40; ++k) g_longs[k] = 1000 + k;
  /* x[::2] of 10 elements. */
  const int64_t shape1[1] = {5};
  const int64_t strides1[1] = {2};
  atomic_int released = 0;
  manypy_value* v = NULL;
  ASSERT_OK(manypy_value_new_tensor_from_buffer(g_longs, 10 * sizeof(int64_t), kI64, 1, shape1,
                                                strides1, 0, capi_count_release, &released, &v));
  manypy_value* r = identity(v);
  DLManagedTensor* m = tensor_of(r);
  for (int64_t k = 0; k < 5; ++k) {
    assert_int_equal(*(const int64_t*)capi_element(&m->dl_tensor, k), 1000 + 2 * k);
  }
  assert_ptr_equal(m->dl_tensor.data, g_longs);
  m->deleter(m);
  manypy_value_free(r);
  manypy_value_free(v);
  assert_int_equal(atomic_load(&released), 1);

  /* x[1::2, ::3] of a 5 x 8 matrix: rows 1 and 3, columns 0, 3, 6. The
   * offset is folded into the data pointer. */
  const int64_t shape2[2] = {2, 3};
  const int64_t strides2[2] = {16, 3};
  int64_t* start = g_longs + 8;
  ASSERT_OK(manypy_value_new_tensor_from_buffer(start, 32 * sizeof(int64_t), kI64, 2, shape2,
                                                strides2, 0, capi_count_release, &released, &v));
  r = identity(v);
  m = tensor_of(r);
  const int64_t expected[6] = {1008, 1011, 1014, 1024, 1027, 1030};
  for (int64_t k = 0; k < 6; ++k) {
    assert_int_equal(*(const int64_t*)capi_element(&m->dl_tensor, k), expected[k]);
  }
  m->deleter(m);
  manypy_value_free(r);
  manypy_value_free(v);
  assert_int_equal(atomic_load(&released), 2);
}

/* DLTensor.byte_offset: the data starts byte_offset bytes after `data`. */
static void test_byte_offset(void** state) {
  (void)state;
  static float base[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  const int64_t shape[1] = {4};
  atomic_int deleted = 0;
  DLManagedTensor* t = capi_counted_tensor(base, kF32, 1, shape, NULL, &deleted);
  t->dl_tensor.byte_offset = 2 * sizeof(float);
  manypy_value* v = NULL;
  ASSERT_OK(manypy_value_new_tensor(t, &v));
  const float expected[4] = {2, 3, 4, 5};
  ASSERT_F32_TENSOR(v, 1, shape, expected, 0, "the value itself");
  manypy_value* r = identity(v);
  ASSERT_F32_TENSOR(r, 1, shape, expected, 0, "identity of a tensor with byte_offset 8");
  manypy_value_free(r);
  manypy_value_free(v);
  assert_int_equal(atomic_load(&deleted), 1);
}

static void test_zero_dim_and_empty(void** state) {
  (void)state;
  static double scalar = 6.25;
  DLDataType f64 = {kDLFloat, 64, 1};
  atomic_int released = 0;
  manypy_value* v = NULL;
  ASSERT_OK(manypy_value_new_tensor_from_buffer(&scalar, sizeof scalar, f64, 0, NULL, NULL, 0,
                                                capi_count_release, &released, &v));
  manypy_value* r = identity(v);
  DLManagedTensor* m = tensor_of(r);
  assert_int_equal(m->dl_tensor.ndim, 0);
  assert_true(*(const double*)m->dl_tensor.data == 6.25);
  m->deleter(m);
  manypy_value_free(r);
  manypy_value_free(v);
  assert_int_equal(atomic_load(&released), 1);

  /* No elements: data may be NULL and data_size 0. */
  const int64_t shape[2] = {3, 0};
  ASSERT_OK(manypy_value_new_tensor_from_buffer(NULL, 0, kF32, 2, shape, NULL, 0,
                                                capi_count_release, &released, &v));
  r = identity(v);
  ASSERT_F32_TENSOR(r, 2, shape, NULL, 0, "a [3, 0] tensor");
  manypy_value_free(r);
  manypy_value_free(v);
  assert_int_equal(atomic_load(&released), 2);
}

/* ---- dtypes ----------------------------------------------------------------------- */

struct dtype_case {
  const char* name; /* torch name */
  DLDataType dtype;
};

static const struct dtype_case kDtypes[] = {
    {"int8", {kDLInt, 8, 1}},
    {"int16", {kDLInt, 16, 1}},
    {"int32", {kDLInt, 32, 1}},
    {"int64", {kDLInt, 64, 1}},
    {"uint8", {kDLUInt, 8, 1}},
    {"float16", {kDLFloat, 16, 1}},
    {"float32", {kDLFloat, 32, 1}},
    {"float64", {kDLFloat, 64, 1}},
    {"bfloat16", {kDLBfloat, 16, 1}},
    {"complex64", {kDLComplex, 64, 1}},
    {"complex128", {kDLComplex, 128, 1}},
    {"bool", {MANYPY_DL_BOOL, 8, 1}},
};
#define N_DTYPES (sizeof kDtypes / sizeof kDtypes[0])

/* Each dtype in and out of identity: the same dtype and identical bytes. */
static void test_every_dtype_round_trips(void** state) {
  (void)state;
  unsigned char bytes[5 * 16];
  for (size_t d = 0; d < N_DTYPES; ++d) {
    const DLDataType dt = kDtypes[d].dtype;
    for (size_t k = 0; k < sizeof bytes; ++k) {
      /* A bool byte is 0 or 1. */
      bytes[k] = (unsigned char)(dt.code == MANYPY_DL_BOOL ? k % 3 == 1 : k * 37 + 11);
    }
    const int64_t shape[1] = {5};
    size_t nbytes = 5 * (size_t)dt.bits / 8;
    atomic_int released = 0;
    manypy_value* v = NULL;
    manypy_status* s = manypy_value_new_tensor_from_buffer(bytes, nbytes, dt, 1, shape, NULL, 1,
                                                           capi_count_release, &released, &v);
    if (s != NULL) {
      capi_print_status(kDtypes[d].name, s, __FILE__, __LINE__);
      manypy_status_free(s);
      fail_msg("dtype %s was refused", kDtypes[d].name);
    }
    manypy_value* args = manypy_value_new_list();
    ASSERT_OK(manypy_value_append(args, v));
    manypy_value* r = NULL;
    s = manypy_object_call(g_identity, NULL, args, NULL, NULL, &r);
    if (s != NULL) {
      capi_print_status(kDtypes[d].name, s, __FILE__, __LINE__);
      manypy_status_free(s);
      fail_msg("identity failed for dtype %s", kDtypes[d].name);
    }
    DLManagedTensor* m = tensor_of(r);
    const DLDataType got = m->dl_tensor.dtype;
    if (got.code != dt.code || got.bits != dt.bits || got.lanes != dt.lanes) {
      fail_msg("%s came back as code %d bits %d lanes %d", kDtypes[d].name, got.code, got.bits,
               got.lanes);
    }
    assert_int_equal(m->dl_tensor.ndim, 1);
    assert_int_equal(m->dl_tensor.shape[0], 5);
    if (memcmp(m->dl_tensor.data, bytes, nbytes) != 0) {
      fail_msg("%s: the bytes changed", kDtypes[d].name);
    }
    ASSERT_VALUES_EQUAL(r, item_of_args(args));
    m->deleter(m);
    manypy_value_free(r);
    manypy_value_free(args);
  }
}

/* Tensors made by Python, of each dtype: the DLPack dtype and the bytes are
 * what torch stores (the host decodes nothing). */
static void test_every_dtype_from_python(void** state) {
  (void)state;
  ASSERT_OK(manypy_pool_exec(g_pool, 0, "import torch"));
  static const struct {
    const char* expression;
    DLDataType dtype;
    size_t nbytes;
    const char* bytes;
  } cases[] = {
      {"torch.tensor([-128, -1, 0, 127], dtype=torch.int8)", {kDLInt, 8, 1}, 4, "\x80\xff\x00\x7f"},
      {"torch.tensor([-2, 258], dtype=torch.int16)", {kDLInt, 16, 1}, 4, "\xfe\xff\x02\x01"},
      {"torch.tensor([-2], dtype=torch.int32)", {kDLInt, 32, 1}, 4, "\xfe\xff\xff\xff"},
      {"torch.tensor([2**40 + 1], dtype=torch.int64)",
       {kDLInt, 64, 1},
       8,
       "\x01\x00\x00\x00\x00\x01\x00\x00"},
      {"torch.tensor([0, 200, 255], dtype=torch.uint8)", {kDLUInt, 8, 1}, 3, "\x00\xc8\xff"},
      {"torch.tensor([1.0, -2.0, 0.5], dtype=torch.float16)",
       {kDLFloat, 16, 1},
       6,
       "\x00\x3c\x00\xc0\x00\x38"},
      {"torch.tensor([1.0, -2.0], dtype=torch.float32)",
       {kDLFloat, 32, 1},
       8,
       "\x00\x00\x80\x3f\x00\x00\x00\xc0"},
      {"torch.tensor([0.5], dtype=torch.float64)",
       {kDLFloat, 64, 1},
       8,
       "\x00\x00\x00\x00\x00\x00\xe0\x3f"},
      {"torch.tensor([1.0, -2.0, 0.5], dtype=torch.bfloat16)",
       {kDLBfloat, 16, 1},
       6,
       "\x80\x3f\x00\xc0\x00\x3f"},
      {"torch.tensor([1 + 2j], dtype=torch.complex64)",
       {kDLComplex, 64, 1},
       8,
       "\x00\x00\x80\x3f\x00\x00\x00\x40"},
      {"torch.tensor([0.5 - 1j], dtype=torch.complex128)",
       {kDLComplex, 128, 1},
       16,
       "\x00\x00\x00\x00\x00\x00\xe0\x3f\x00\x00\x00\x00\x00\x00\xf0\xbf"},
      {"torch.tensor([True, False, True])", {MANYPY_DL_BOOL, 8, 1}, 3, "\x01\x00\x01"},
      {"torch.tensor([[True, False], [False, False]]).t()",
       {MANYPY_DL_BOOL, 8, 1},
       4,
       "\x01\x00\x00\x00"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
    manypy_value* v = NULL;
    ASSERT_OK(manypy_pool_eval(g_pool, 0, cases[k].expression, &v));
    DLManagedTensor* m = tensor_of(v);
    const DLDataType got = m->dl_tensor.dtype;
    if (got.code != cases[k].dtype.code || got.bits != cases[k].dtype.bits ||
        got.lanes != cases[k].dtype.lanes) {
      fail_msg("%s: DLPack dtype code %d bits %d lanes %d", cases[k].expression, got.code, got.bits,
               got.lanes);
    }
    if (memcmp(m->dl_tensor.data, cases[k].bytes, cases[k].nbytes) != 0) {
      fail_msg("%s: unexpected bytes", cases[k].expression);
    }
    /* And back into Python, through identity: still equal. */
    manypy_value* r = identity(v);
    ASSERT_VALUES_EQUAL(r, v);
    manypy_value_free(r);
    m->deleter(m);
    manypy_value_free(v);
  }
}

/* ---- bool: padding masks ------------------------------------------------------- */

static const DLDataType kBool = {MANYPY_DL_BOOL, 8, 1};

/* The 0/1 bytes of a bool tensor value (C-contiguous), checked for dtype and
 * shape; caller frees. */
static unsigned char* bool_bytes(const manypy_value* v, int32_t ndim, const int64_t* shape) {
  DLManagedTensor* m = tensor_of(v);
  const DLTensor* t = &m->dl_tensor;
  if (t->dtype.code != kBool.code || t->dtype.bits != 8 || t->dtype.lanes != 1) {
    fail_msg("expected a bool tensor, got code %d bits %d lanes %d", t->dtype.code, t->dtype.bits,
             t->dtype.lanes);
  }
  assert_int_equal(t->ndim, ndim);
  for (int32_t k = 0; k < ndim; ++k) assert_int_equal(t->shape[k], shape[k]);
  int64_t n = capi_numel(t);
  unsigned char* out = malloc((size_t)n);
  assert_non_null(out);
  for (int64_t k = 0; k < n; ++k) out[k] = *(const unsigned char*)capi_element(t, k);
  m->deleter(m);
  return out;
}

/* A packaged nn.TransformerEncoder called with a bool src_key_padding_mask,
 * handed over zero-copy, gives eager Python's output; ~mask comes back as a
 * bool tensor. */
static void test_bool_padding_mask(void** state) {
  (void)state;
  manypy_package* package = LOAD_PACKAGE(g_pool, "encoder.pt");
  manypy_object* encoder = LOAD_MODEL(package);
  const int64_t src_shape[3] = {3, 7, 32}, mask_shape[2] = {3, 7};
  float* src = READ_F32("encoder.src.bin", 3 * 7 * 32);
  float* expected = READ_F32("encoder.expected.out.bin", 3 * 7 * 32);
  size_t mask_size = 0;
  unsigned char* mask = READ_WHOLE_FILE(ARCHIVE("encoder.mask.bin"), &mask_size);
  assert_int_equal(mask_size, 21);

  atomic_int released = 0;
  manypy_value* mask_value = NULL;
  ASSERT_OK(manypy_value_new_tensor_from_buffer(mask, mask_size, kBool, 2, mask_shape, NULL, 0,
                                                capi_count_release, &released, &mask_value));
  assert_ptr_equal(data_of(mask_value), mask);  // borrowed, not copied
  DLManagedTensor* shared = tensor_of(mask_value);
  manypy_value* mask_again = NULL;
  ASSERT_OK(manypy_value_new_tensor(shared, &mask_again));
  manypy_value* items[2] = {F32_TENSOR(src, 3, src_shape), mask_value};
  manypy_value* args = TUPLE_OF(2, items);
  manypy_value* out = NULL;
  ASSERT_OK(manypy_object_call(encoder, NULL, args, NULL, NULL, &out));
  ASSERT_F32_TENSOR(out, 3, src_shape, expected, 1e-5, "encoder(src, bool mask)");
  manypy_value_free(out);

  manypy_value* invert_items[1] = {mask_again};
  manypy_value* invert_args = TUPLE_OF(1, invert_items);
  ASSERT_OK(manypy_object_call(encoder, "invert", invert_args, NULL, NULL, &out));
  unsigned char* inverted = bool_bytes(out, 2, mask_shape);
  for (size_t k = 0; k < mask_size; ++k) assert_int_equal(inverted[k], !mask[k]);
  free(inverted);

  /* The bool result goes back in as it came out: ~~mask == mask. */
  manypy_value* again_items[1] = {NULL};
  DLManagedTensor* result = tensor_of(out);
  ASSERT_OK(manypy_value_new_tensor(result, &again_items[0]));
  manypy_value* again_args = TUPLE_OF(1, again_items);
  manypy_value* twice = NULL;
  ASSERT_OK(manypy_object_call(encoder, "invert", again_args, NULL, NULL, &twice));
  unsigned char* back = bool_bytes(twice, 2, mask_shape);
  assert_memory_equal(back, mask, mask_size);
  free(back);

  /* TorchScript on the host: the same masks through libtorch's own DLPack. */
  manypy_script_module* invert = NULL;
  ASSERT_OK(manypy_script_load_file(ARCHIVE("invert_script.pt"), &invert));
  manypy_value* scripted = NULL;
  ASSERT_OK(manypy_script_call(invert, NULL, again_args, NULL, NULL, &scripted));
  unsigned char* host = bool_bytes(scripted, 2, mask_shape);
  assert_memory_equal(host, mask, mask_size);
  free(host);
  manypy_value_free(scripted);
  manypy_script_free(invert);

  manypy_value_free(twice);
  manypy_value_free(again_args);
  manypy_value_free(out);
  manypy_value_free(invert_args);
  manypy_value_free(args);
  manypy_object_free(encoder);
  manypy_package_free(package);
  assert_int_equal(atomic_load(&released), 1);
  free(mask);
  free(expected);
  free(src);
}

/* A bool buffer is not checked for 0/1 bytes (that would cost a pass over
 * the data): any byte crosses into Python and back unchanged, zero-copy,
 * and nothing crashes. */
static void test_bool_bytes_other_than_0_and_1(void** state) {
  (void)state;
  unsigned char bytes[256];
  for (int k = 0; k < 256; ++k) bytes[k] = (unsigned char)k;
  const int64_t shape[1] = {256};
  manypy_value* v = NULL;
  ASSERT_OK(manypy_value_new_tensor_from_buffer(bytes, sizeof bytes, kBool, 1, shape, NULL, 0, NULL,
                                                NULL, &v));
  manypy_value* r = identity(v);
  assert_ptr_equal(data_of(r), bytes);
  manypy_value_free(r);
  manypy_value_free(v);
}

/* ---- bad tensors ------------------------------------------------------------------ */

/* new_tensor with a broken DLManagedTensor: BAD_TENSOR whose message holds
 * `needle`, the deleter run once, out_value untouched. */
static void check_bad_managed(DLManagedTensor* t, atomic_int* deleted, const char* needle,
                              const char* what) {
  int before = atomic_load(deleted);
  manypy_value* v = SENTINEL_VALUE;
  manypy_status* s = manypy_value_new_tensor(t, &v);
  if (s == NULL) {
    manypy_value_free(v);
    fail_msg("manypy_value_new_tensor accepted %s", what);
  }
  if (manypy_status_code(s) != MANYPY_ERR_BAD_TENSOR) {
    capi_print_status(what, s, __FILE__, __LINE__);
    manypy_code code = manypy_status_code(s);
    manypy_status_free(s);
    fail_msg("%s: %s, expected MANYPY_ERR_BAD_TENSOR", what, manypy_code_name(code));
  }
  char message[1024];
  snprintf(message, sizeof message, "%s", manypy_status_message(s));
  manypy_status_free(s);
  if (strstr(message, needle) == NULL) {
    fail_msg("%s: message does not contain \"%s\": %s", what, needle, message);
  }
  assert_ptr_equal(v, SENTINEL_VALUE);
  if (atomic_load(deleted) != before + 1) {
    fail_msg("%s: the deleter ran %d times, expected once", what, atomic_load(deleted) - before);
  }
}

static void test_bad_managed_tensors(void** state) {
  (void)state;
  static float data[6];
  atomic_int deleted = 0;
  DLManagedTensor* t = capi_counted_tensor(data, kF32, 2, kShape23, NULL, &deleted);
  t->dl_tensor.device.device_type = kDLCUDA;
  check_bad_managed(t, &deleted, "device type 2", "a CUDA tensor");

  const DLDataType u16 = {kDLUInt, 16, 1};
  t = capi_counted_tensor(data, u16, 2, kShape23, NULL, &deleted);
  check_bad_managed(t, &deleted, "uint(code 1) with 16 bits x 1 lanes has no torch equivalent",
                    "a uint16 tensor");

  const DLDataType f32x2 = {kDLFloat, 32, 2};
  t = capi_counted_tensor(data, f32x2, 2, kShape23, NULL, &deleted);
  check_bad_managed(t, &deleted, "32 bits x 2 lanes", "a 2-lane tensor");

  const DLDataType bf32 = {kDLBfloat, 32, 1};
  t = capi_counted_tensor(data, bf32, 2, kShape23, NULL, &deleted);
  check_bad_managed(t, &deleted, "bfloat(code 4) with 32 bits", "a 32-bit bfloat tensor");

  const int64_t negative[2] = {2, -3};
  t = capi_counted_tensor(data, kF32, 2, negative, NULL, &deleted);
  check_bad_managed(t, &deleted, "dimension 1 has negative size -3", "a negative dimension");

  int64_t ones[65];
  for (int k = 0; k < 65; ++k) ones[k] = 1;
  t = capi_counted_tensor(data, kF32, 65, ones, NULL, &deleted);
  check_bad_managed(t, &deleted, "65 dimensions", "65 dimensions");

  t = capi_counted_tensor(data, kF32, -1, NULL, NULL, &deleted);
  check_bad_managed(t, &deleted, "-1 dimensions", "ndim -1");

  t = capi_counted_tensor(data, kF32, 2, kShape23, NULL, &deleted);
  t->dl_tensor.shape = NULL;
  check_bad_managed(t, &deleted, "shape is NULL", "a NULL shape");
  assert_int_equal(atomic_load(&deleted), 8);
}

/* new_tensor_from_buffer with bad arguments: `code` with `needle` in the
 * message, release run once, out_value untouched. */
static void check_bad_buffer(void* data, size_t data_size, DLDataType dtype, int32_t ndim,
                             const int64_t* shape, const int64_t* strides, int copy,
                             manypy_code code, const char* needle, const char* what) {
  atomic_int released = 0;
  manypy_value* v = SENTINEL_VALUE;
  manypy_status* s = manypy_value_new_tensor_from_buffer(
      data, data_size, dtype, ndim, shape, strides, copy, capi_count_release, &released, &v);
  if (s == NULL) {
    manypy_value_free(v);
    fail_msg("manypy_value_new_tensor_from_buffer accepted %s", what);
  }
  if (manypy_status_code(s) != code) {
    capi_print_status(what, s, __FILE__, __LINE__);
    manypy_code got = manypy_status_code(s);
    manypy_status_free(s);
    fail_msg("%s: %s, expected %s", what, manypy_code_name(got), manypy_code_name(code));
  }
  char message[1024];
  snprintf(message, sizeof message, "%s", manypy_status_message(s));
  manypy_status_free(s);
  if (strstr(message, needle) == NULL) {
    fail_msg("%s: message does not contain \"%s\": %s", what, needle, message);
  }
  assert_ptr_equal(v, SENTINEL_VALUE);
  if (atomic_load(&released) != 1) {
    fail_msg("%s: release ran %d times, expected once", what, atomic_load(&released));
  }
}

static void test_bad_buffers(void** state) {
  (void)state;
  static float data[64];
  for (int copy = 0; copy <= 1; ++copy) {
    const DLDataType u16 = {kDLUInt, 16, 1};
    check_bad_buffer(data, sizeof data, u16, 2, kShape23, NULL, copy, MANYPY_ERR_BAD_TENSOR,
                     "uint(code 1) with 16 bits x 1 lanes", "uint16");
    const DLDataType lanes2 = {kDLFloat, 32, 2};
    check_bad_buffer(data, sizeof data, lanes2, 2, kShape23, NULL, copy, MANYPY_ERR_BAD_TENSOR,
                     "2 lanes", "2 lanes");
    const int64_t negative[2] = {-1, 3};
    check_bad_buffer(data, sizeof data, kF32, 2, negative, NULL, copy, MANYPY_ERR_BAD_TENSOR,
                     "dimension 0 has negative size -1", "a negative dimension");
    int64_t ones[65];
    for (int k = 0; k < 65; ++k) ones[k] = 1;
    check_bad_buffer(data, sizeof data, kF32, 65, ones, NULL, copy, MANYPY_ERR_BAD_TENSOR,
                     "ndim is 65", "65 dimensions");
    check_bad_buffer(data, sizeof data, kF32, -2, ones, NULL, copy, MANYPY_ERR_BAD_TENSOR,
                     "ndim is -2", "ndim -2");
    /* data_size: [2, 3] float32 needs 24 bytes. */
    check_bad_buffer(data, 20, kF32, 2, kShape23, NULL, copy, MANYPY_ERR_BAD_TENSOR,
                     "address bytes [0, 24) but the buffer holds 20 bytes",
                     "a buffer 4 bytes too small");
    /* Strided: 5 elements with stride 3 reach element 12, byte 52. */
    const int64_t shape5[1] = {5};
    const int64_t stride3[1] = {3};
    check_bad_buffer(data, 48, kF32, 1, shape5, stride3, copy, MANYPY_ERR_BAD_TENSOR,
                     "address bytes [0, 52) but the buffer holds 48 bytes",
                     "a strided view past the end");
    /* A negative stride (torch 1.13 cannot take one over DLPack). */
    const int64_t back[1] = {-1};
    check_bad_buffer(data + 2, 40, kF32, 1, shape5, back, copy, MANYPY_ERR_BAD_TENSOR,
                     "negative stride -1", "a negative stride");
    /* Overflowing sizes are refused, not wrapped. */
    const int64_t huge[2] = {INT64_MAX / 2, 4};
    check_bad_buffer(data, sizeof data, kF32, 2, huge, NULL, copy, MANYPY_ERR_BAD_TENSOR,
                     "too large", "a shape whose size overflows int64");
  }
  /* The exact fit is accepted. */
  manypy_value* v = NULL;
  ASSERT_OK(
      manypy_value_new_tensor_from_buffer(data, 24, kF32, 2, kShape23, NULL, 0, NULL, NULL, &v));
  manypy_value_free(v);
  const int64_t shape5[1] = {5};
  const int64_t stride3[1] = {3};
  ASSERT_OK(
      manypy_value_new_tensor_from_buffer(data, 52, kF32, 1, shape5, stride3, 0, NULL, NULL, &v));
  manypy_value_free(v);
}

/* NULL arguments: INVALID_ARGUMENT naming the function and the argument;
 * ownership is still taken (deleter / release run once). */
static void test_null_arguments(void** state) {
  (void)state;
  manypy_value* v = SENTINEL_VALUE;
  ASSERT_INVALID_ARG(manypy_value_new_tensor(NULL, &v), "manypy_value_new_tensor", "tensor");
  assert_ptr_equal(v, SENTINEL_VALUE);
  atomic_int deleted = 0;
  ASSERT_INVALID_ARG(manypy_value_new_tensor(
                         capi_counted_tensor(g_data23, kF32, 2, kShape23, NULL, &deleted), NULL),
                     "manypy_value_new_tensor", "out_value");
  assert_int_equal(atomic_load(&deleted), 1);

  atomic_int released = 0;
  ASSERT_INVALID_ARG(manypy_value_new_tensor_from_buffer(g_data23, 24, kF32, 2, kShape23, NULL, 0,
                                                         capi_count_release, &released, NULL),
                     "manypy_value_new_tensor_from_buffer", "out_value");
  assert_int_equal(atomic_load(&released), 1);
  ASSERT_INVALID_ARG(manypy_value_new_tensor_from_buffer(g_data23, 24, kF32, 2, NULL, NULL, 0,
                                                         capi_count_release, &released, &v),
                     "manypy_value_new_tensor_from_buffer", "shape");
  assert_int_equal(atomic_load(&released), 2);
  ASSERT_INVALID_ARG(manypy_value_new_tensor_from_buffer(NULL, 24, kF32, 2, kShape23, NULL, 1,
                                                         capi_count_release, &released, &v),
                     "manypy_value_new_tensor_from_buffer", "data");
  assert_int_equal(atomic_load(&released), 3);
  assert_ptr_equal(v, SENTINEL_VALUE);
}

/* A tensor made by Python that DLPack cannot carry (sparse), and one that
 * torch refuses to export (needs grad is fine: detached). */
static void test_unrepresentable_results(void** state) {
  (void)state;
  manypy_value* v = SENTINEL_VALUE;
  manypy_status* s =
      EXPECT_CODE(manypy_pool_eval(g_pool, 0, "__import__('torch').ones(2, 2).to_sparse()", &v),
                  MANYPY_ERR_BAD_TENSOR);
  manypy_status_free(s);
  assert_ptr_equal(v, SENTINEL_VALUE);
  /* The interpreter goes on. */
  v = NULL;
  ASSERT_OK(manypy_pool_eval(g_pool, 0, "__import__('torch').ones(2)", &v));
  manypy_value_free(v);
}

/* A model may keep a tensor it was given: the deleter then waits for the
 * model to let go, after the caller freed every value. Identity keeps it as
 * an attribute, set through __setattr__. Read back while the model holds
 * it, it is a copy: the model may change or reallocate what it keeps
 * (docs/models.md, "Values and tensors"). */
static void test_model_keeps_tensor(void** state) {
  (void)state;
  atomic_int deleted = 0;
  manypy_value* t = NULL;
  ASSERT_OK(manypy_value_new_tensor(
      capi_counted_tensor(g_data23, kF32, 2, kShape23, NULL, &deleted), &t));
  manypy_value* name = NULL;
  ASSERT_OK(manypy_value_new_string("kept", 4, &name));
  manypy_value* args = manypy_value_new_list();
  ASSERT_OK(manypy_value_append(args, name));
  ASSERT_OK(manypy_value_append(args, t));
  manypy_value* r = NULL;
  ASSERT_OK(manypy_object_call(g_identity, "__setattr__", args, NULL, NULL, &r));
  manypy_value_free(r);
  manypy_value_free(args);
  assert_int_equal(atomic_load(&deleted), 0); /* the model holds it */
  manypy_value* kept = NULL;
  ASSERT_OK(manypy_object_getattr(g_identity, "kept", NULL, &kept));
  assert_ptr_not_equal(data_of(kept), g_data23);
  ASSERT_F32_TENSOR(kept, 2, kShape23, g_data23, 0, "the kept tensor, read back");
  manypy_value_free(kept);
  assert_int_equal(atomic_load(&deleted), 0);
  args = manypy_value_new_list();
  ASSERT_OK(manypy_value_new_string("kept", 4, &name));
  ASSERT_OK(manypy_value_append(args, name));
  ASSERT_OK(manypy_object_call(g_identity, "__delattr__", args, NULL, NULL, &r));
  manypy_value_free(r);
  manypy_value_free(args);
  assert_int_equal(atomic_load(&deleted), 1);
}

/* Failing calls still release every tensor they were given, exactly once,
 * once the caller frees its values. */
static void test_deleters_after_failed_calls(void** state) {
  (void)state;
  atomic_int deleted = 0;
  int expected = 0;
#define COUNTED() counted_value(&deleted)
  /* Too many arguments: TypeError. */
  manypy_value* items2[2] = {COUNTED(), COUNTED()};
  manypy_value* two = LIST_OF(2, items2);
  manypy_value* r = SENTINEL_VALUE;
  manypy_status* s =
      EXPECT_CODE(manypy_object_call(g_identity, NULL, two, NULL, NULL, &r), MANYPY_ERR_PYTHON);
  assert_string_equal(manypy_status_python_type(s), "TypeError");
  manypy_status_free(s);
  assert_int_equal(atomic_load(&deleted), expected);
  manypy_value_free(two);
  assert_int_equal(atomic_load(&deleted), expected += 2);
  /* A missing method. */
  manypy_value* items1[1] = {COUNTED()};
  manypy_value* one = LIST_OF(1, items1);
  manypy_value* kwargs = manypy_value_new_dict();
  ASSERT_OK(manypy_value_dict_set(kwargs, "y", COUNTED()));
  ASSERT_CODE(manypy_object_call(g_identity, "nope", one, kwargs, NULL, &r),
              MANYPY_ERR_NO_SUCH_NAME);
  /* x given twice: positionally and by keyword. */
  ASSERT_OK(manypy_value_dict_set(kwargs, "x", COUNTED()));
  assert_int_equal(atomic_load(&deleted), expected);
  ASSERT_CODE(manypy_object_call(g_identity, NULL, one, kwargs, NULL, &r), MANYPY_ERR_PYTHON);
  /* A pinned interpreter that does not exist. */
  manypy_call_options* options = manypy_call_options_new();
  ASSERT_OK(manypy_call_options_set_interpreter(options, 5));
  ASSERT_CODE(manypy_object_call(g_identity, NULL, one, NULL, options, &r),
              MANYPY_ERR_OUT_OF_RANGE);
  manypy_call_options_free(options);
  assert_int_equal(atomic_load(&deleted), expected);
  manypy_value_free(one);
  manypy_value_free(kwargs);
  assert_int_equal(atomic_load(&deleted), expected += 3);
  /* An argument that fails to convert in the interpreter, between two
   * tensors (a string the interpreter cannot decode, if new_string lets
   * one through; else a plain failure to build it). */
  manypy_value* bad = NULL;
  s = manypy_value_new_string("\xed\xa0\x80", 3, &bad);
  if (s == NULL) {
    manypy_value* items3[3] = {COUNTED(), bad, COUNTED()};
    manypy_value* three = LIST_OF(3, items3);
    s = manypy_object_call(g_identity, NULL, three, NULL, NULL, &r);
    if (s == NULL) fail_msg("a call with a surrogate in a string succeeded");
    fprintf(stderr, "  a string holding a UTF-16 surrogate, in a call: %s: %s\n",
            manypy_code_name(manypy_status_code(s)), manypy_status_message(s));
    manypy_status_free(s);
    manypy_value_free(three);
    assert_int_equal(atomic_load(&deleted), expected += 2);
  } else {
    manypy_status_free(s);
  }
  /* args of the wrong kind. */
  manypy_value* t = COUNTED();
  ASSERT_CODE(manypy_object_call(g_identity, NULL, t, NULL, NULL, &r), MANYPY_ERR_INVALID_ARGUMENT);
  manypy_value_free(t);
  assert_int_equal(atomic_load(&deleted), expected += 1);
  /* TorchScript calls that fail. */
  manypy_script_module* module = NULL;
  ASSERT_OK(manypy_script_load_file(capi_archive("python_heavy_script.pt"), &module));
  manypy_value* sitems[2] = {COUNTED(), STRING("not an int")};
  manypy_value* sargs = LIST_OF(2, sitems);
  ASSERT_CODE(manypy_script_call(module, "nope", sargs, NULL, NULL, &r), MANYPY_ERR_NO_SUCH_NAME);
  ASSERT_CODE(manypy_script_call(module, NULL, sargs, NULL, NULL, &r), MANYPY_ERR_PYTHON);
  manypy_script_free(module);
  manypy_value_free(sargs);
  assert_int_equal(atomic_load(&deleted), expected += 1);
  assert_ptr_equal(r, SENTINEL_VALUE);
#undef COUNTED
}

/* ---- inputs torch itself cannot take (each in a child process) --------------------- */

/* torch 1.13's from_blob computes the storage size in a noexcept function;
 * a layout it cannot size (negative strides, sizes overflowing int64) makes
 * it throw there, which ends the process (std::terminate). manypy must
 * refuse such a tensor (MANYPY_ERR_BAD_TENSOR) or handle it; the process
 * must survive either way. These cases run in a child process (this
 * program, re-executed) so that a crash fails one test, not the program. */

/* Child: an exit status of 0 means acceptable behaviour. */
static int child_call_with(DLManagedTensor* t, const float* expected, int64_t n, int script) {
  manypy_value* v = NULL;
  manypy_status* s = manypy_value_new_tensor(t, &v);
  if (s != NULL) {
    int ok = manypy_status_code(s) == MANYPY_ERR_BAD_TENSOR;
    fprintf(stderr, "child: manypy_value_new_tensor: %s: %s\n",
            manypy_code_name(manypy_status_code(s)), manypy_status_message(s));
    manypy_status_free(s);
    return ok ? 0 : 1;
  }
  manypy_value* args = manypy_value_new_list();
  s = manypy_value_append(args, v);
  if (s != NULL) {
    fprintf(stderr, "child: manypy_value_append: %s\n", manypy_status_message(s));
    manypy_status_free(s);
    manypy_value_free(args);
    return 1;
  }
  manypy_value* r = NULL;
  manypy_script_module* module = NULL;
  manypy_pool* pool = NULL;
  manypy_package* package = NULL;
  manypy_object* identity = NULL;
  if (script) {
    s = manypy_script_load_file(capi_archive("python_heavy_script.pt"), &module);
    if (s == NULL) s = manypy_script_call(module, NULL, args, NULL, NULL, &r);
  } else {
    s = manypy_pool_create(NULL, &pool);
    if (s == NULL) s = manypy_package_load_file(pool, capi_archive("identity.pt"), &package);
    if (s == NULL) s = manypy_package_load_pickle(package, "model", "model.pkl", &identity);
    if (s == NULL) s = manypy_object_call(identity, NULL, args, NULL, NULL, &r);
  }
  int rc = 0;
  if (s != NULL) {
    rc = manypy_status_code(s) == MANYPY_ERR_BAD_TENSOR ? 0 : 1;
    fprintf(stderr, "child: call: %s: %s\n", manypy_code_name(manypy_status_code(s)),
            manypy_status_message(s));
    manypy_status_free(s);
  } else if (expected != NULL) {
    DLManagedTensor* m = NULL;
    s = manypy_value_get_tensor(r, &m);
    if (s != NULL) {
      fprintf(stderr, "child: manypy_value_get_tensor: %s\n", manypy_status_message(s));
      manypy_status_free(s);
      return 1;
    }
    for (int64_t k = 0; k < n; ++k) {
      if (*(const float*)capi_element(&m->dl_tensor, k) != expected[k]) rc = 1;
    }
    fprintf(stderr, "child: the call succeeded; values %s\n", rc ? "WRONG" : "right");
    m->deleter(m);
  }
  manypy_value_free(r);
  manypy_value_free(args);
  manypy_object_free(identity);
  manypy_package_free(package);
  manypy_pool_destroy(pool);
  manypy_script_free(module);
  return rc;
}

static int run_child(const char* which) {
  static float buf[5 * 64];
  atomic_int deleted = 0;
  for (int k = 0; k < 5 * 64; ++k) buf[k] = (float)k;
  if (strcmp(which, "negative-stride-object") == 0) {
    /* x[::-1] of [0, 1, 2, 3, 4]. */
    const int64_t shape[1] = {5};
    const int64_t strides[1] = {-1};
    const float expected[5] = {4, 3, 2, 1, 0};
    return child_call_with(capi_counted_tensor(buf + 4, kF32, 1, shape, strides, &deleted),
                           expected, 5, 0);
  }
  if (strcmp(which, "negative-stride-script") == 0) {
    const int64_t shape[2] = {4, 64};
    const int64_t strides[2] = {-64, 1};
    return child_call_with(capi_counted_tensor(buf + 3 * 64, kF32, 2, shape, strides, &deleted),
                           NULL, 0, 1);
  }
  if (strcmp(which, "huge-shape-object") == 0) {
    const int64_t shape[2] = {INT64_MAX / 2, 4};
    return child_call_with(capi_counted_tensor(buf, kF32, 2, shape, NULL, &deleted), NULL, 0, 0);
  }
  fprintf(stderr, "unknown child case %s\n", which);
  return 2;
}

static const char* g_self; /* argv[0] */

static void check_child(const char* which) {
  char command[4096];
  snprintf(command, sizeof command, "'%s' --child %s", g_self, which);
  int status = system(command);
  if (status == -1) fail_msg("cannot run %s", command);
  if (WIFSIGNALED(status)) {
    fail_msg("%s: the process died of signal %d (%s)", which, WTERMSIG(status),
             strsignal(WTERMSIG(status)));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    /* system() runs a shell: a signal may show as exit status 128 + n. */
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (code > 128)
      fail_msg("%s: the process died of signal %d (%s)", which, code - 128, strsignal(code - 128));
    fail_msg("%s: wrong behaviour (exit status %d, see the child's output above)", which, code);
  }
}

static void test_negative_strides_through_an_object(void** state) {
  (void)state;
  check_child("negative-stride-object");
}

static void test_negative_strides_through_torchscript(void** state) {
  (void)state;
  check_child("negative-stride-script");
}

static void test_huge_shape_through_an_object(void** state) {
  (void)state;
  check_child("huge-shape-object");
}

/* ---- setup ------------------------------------------------------------------------- */

static int pool_setup(void** state) {
  (void)state;
  double t0 = capi_now();
  manypy_status* s = manypy_pool_create(NULL, &g_pool);
  if (s == NULL) s = manypy_package_load_file(g_pool, capi_archive("identity.pt"), &g_package);
  if (s == NULL) s = manypy_package_load_pickle(g_package, "model", "model.pkl", &g_identity);
  if (s != NULL) {
    capi_print_status("setting up the pool and identity.pt", s, __FILE__, __LINE__);
    manypy_status_free(s);
    return -1;
  }
  fprintf(stderr, "capi_tensors: pool and identity.pt ready in %.2f s\n", capi_now() - t0);
  return 0;
}

static int pool_teardown(void** state) {
  (void)state;
  manypy_object_free(g_identity);
  manypy_package_free(g_package);
  manypy_pool_destroy(g_pool);
  return 0;
}

int main(int argc, char** argv) {
  g_self = argv[0];
  if (argc == 3 && strcmp(argv[1], "--child") == 0) return run_child(argv[2]);
  double t0 = capi_now();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_deleter_after_value_and_results),
      cmocka_unit_test(test_zero_copy_both_ways),
      cmocka_unit_test(test_get_tensor_outlives_value),
      cmocka_unit_test(test_from_buffer_borrowed),
      cmocka_unit_test(test_from_buffer_copied),
      cmocka_unit_test(test_transposed_view),
      cmocka_unit_test(test_step_two_slices),
      cmocka_unit_test(test_byte_offset),
      cmocka_unit_test(test_zero_dim_and_empty),
      cmocka_unit_test(test_every_dtype_round_trips),
      cmocka_unit_test(test_every_dtype_from_python),
      cmocka_unit_test(test_bool_padding_mask),
      cmocka_unit_test(test_bool_bytes_other_than_0_and_1),
      cmocka_unit_test(test_bad_managed_tensors),
      cmocka_unit_test(test_bad_buffers),
      cmocka_unit_test(test_null_arguments),
      cmocka_unit_test(test_unrepresentable_results),
      cmocka_unit_test(test_model_keeps_tensor),
      cmocka_unit_test(test_deleters_after_failed_calls),
      cmocka_unit_test(test_negative_strides_through_an_object),
      cmocka_unit_test(test_negative_strides_through_torchscript),
      cmocka_unit_test(test_huge_shape_through_an_object),
  };
  int failed = cmocka_run_group_tests_name("capi_tensors", tests, pool_setup, pool_teardown);
  fprintf(stderr, "capi_tensors: %.1f s\n", capi_now() - t0);
  return failed == 0 ? 0 : 1;
}
