/*
 * Replicated objects: python_heavy.pt on every interpreter of a
 * 3-interpreter pool with the inputs, kwargs and expected outputs of
 * python_heavy.json; resnet18.pt on two; methods, attributes, errors; and
 * handles (pool, package, object) released in any order (a fourth
 * interpreter, for pools of their own).
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi_test_support.h"

#define POOL_SIZE 3
#define SENTINEL_VALUE ((manypy_value*)(uintptr_t)0x7a7a7a7a)

static manypy_pool* g_pool;
static manypy_package* g_heavy_package;
static manypy_object* g_heavy;

static capi_heavy_case g_heavy_case; /* python_heavy.json */
static const int64_t kHeavyInput[2] = {4, 64};

/* resnet18.json: input [1, 3, 224, 224]; output [1, 1000]. */
static const int64_t kResnetInput[4] = {1, 3, 224, 224};
static const int64_t kResnetOut[2] = {1, 1000};

static manypy_call_options* pinned(int32_t interp) {
  manypy_call_options* options = manypy_call_options_new();
  assert_non_null(options);
  ASSERT_OK(manypy_call_options_set_interpreter(options, interp));
  return options;
}

static manypy_value* heavy_args(void) { return HEAVY_ARGS(&g_heavy_case); }

static void check_heavy_result(const manypy_value* result, const char* what) {
  CHECK_HEAVY_RESULT(&g_heavy_case, result, what);
}

/* ---- python_heavy ------------------------------------------------------------- */

static void test_python_heavy_on_every_interpreter(void** state) {
  (void)state;
  manypy_value* args = heavy_args();
  manypy_value* kwargs = capi_heavy_kwargs();
  for (int32_t i = 0; i < POOL_SIZE; ++i) {
    manypy_call_options* options = pinned(i);
    manypy_value* result = NULL;
    ASSERT_OK(manypy_object_call(g_heavy, NULL, args, kwargs, options, &result));
    char what[64];
    snprintf(what, sizeof what, "python_heavy on interpreter %d", (int)i);
    check_heavy_result(result, what);
    manypy_value_free(result);
    manypy_call_options_free(options);
  }
  /* And unpinned. */
  for (int k = 0; k < 3; ++k) {
    manypy_value* result = NULL;
    ASSERT_OK(manypy_object_call(g_heavy, NULL, args, kwargs, NULL, &result));
    check_heavy_result(result, "python_heavy, any interpreter");
    manypy_value_free(result);
  }
  manypy_value_free(kwargs);
  manypy_value_free(args);
}

/* The kwargs matter: the defaults (steps=8, normalize=True) give other
 * outputs, so a host that dropped them would fail the test above. */
static void test_python_heavy_kwargs_matter(void** state) {
  (void)state;
  manypy_value* args = heavy_args();
  manypy_value* result = NULL;
  ASSERT_OK(manypy_object_call(g_heavy, NULL, args, NULL, NULL, &result));
  const manypy_value* steps = NULL;
  ASSERT_OK(manypy_value_dict_get(result, "steps", &steps));
  int64_t s = 0;
  ASSERT_OK(manypy_value_get_int64(steps, &s));
  assert_int_equal(s, 8);
  const manypy_value* logits = NULL;
  ASSERT_OK(manypy_value_dict_get(result, "logits", &logits));
  DLManagedTensor* m = NULL;
  ASSERT_OK(manypy_value_get_tensor(logits, &m));
  int differs = 0;
  for (int64_t k = 0; k < 40; ++k) {
    float x;
    memcpy(&x, capi_element(&m->dl_tensor, k), 4);
    if (fabs(x - g_heavy_case.logits[k]) > 1e-3) differs = 1;
  }
  m->deleter(m);
  assert_true(differs);
  manypy_value_free(result);

  /* Positional steps and normalize: the same as the keywords. */
  manypy_value* items[3] = {F32_TENSOR(g_heavy_case.input, 2, kHeavyInput),
                            manypy_value_new_int64(5), manypy_value_new_bool(0)};
  manypy_value* positional = TUPLE_OF(3, items);
  ASSERT_OK(manypy_object_call(g_heavy, NULL, positional, NULL, NULL, &result));
  check_heavy_result(result, "python_heavy with positional steps and normalize");
  manypy_value_free(result);
  manypy_value_free(positional);
  manypy_value_free(args);
}

static void test_method_by_name(void** state) {
  (void)state;
  manypy_value* args = heavy_args();
  manypy_value* kwargs = capi_heavy_kwargs();
  manypy_call_options* options = pinned(1);
  manypy_value* result = NULL;
  ASSERT_OK(manypy_object_call(g_heavy, "forward", args, kwargs, options, &result));
  check_heavy_result(result, "python_heavy.forward on interpreter 1");
  manypy_value_free(result);
  /* A method with no arguments: NULL args. */
  ASSERT_OK(manypy_object_call(g_heavy, "extra_repr", NULL, NULL, options, &result));
  assert_int_equal(manypy_value_get_kind(result), MANYPY_VALUE_STRING);
  manypy_value_free(result);
  ASSERT_OK(manypy_object_call(g_heavy, "_get_name", NULL, NULL, options, &result));
  const char* name = NULL;
  ASSERT_OK(manypy_value_get_string(result, &name, NULL));
  assert_string_equal(name, "PythonHeavy");
  manypy_value_free(result);
  manypy_call_options_free(options);
  manypy_value_free(kwargs);
  manypy_value_free(args);
}

static void test_getattr(void** state) {
  (void)state;
  for (int32_t i = 0; i < POOL_SIZE; ++i) {
    manypy_call_options* options = pinned(i);
    manypy_value* training = NULL;
    ASSERT_OK(manypy_object_getattr(g_heavy, "training", options, &training));
    assert_int_equal(manypy_value_get_kind(training), MANYPY_VALUE_BOOL);
    int b = -1;
    ASSERT_OK(manypy_value_get_bool(training, &b));
    assert_int_equal(b, 0); /* eval mode */
    manypy_value_free(training);
    manypy_call_options_free(options);
  }
  /* A tensor attribute: step_b is zeros(64). */
  manypy_value* step_b = NULL;
  ASSERT_OK(manypy_object_getattr(g_heavy, "step_b", NULL, &step_b));
  float zeros[64] = {0};
  const int64_t shape64[1] = {64};
  ASSERT_F32_TENSOR(step_b, 1, shape64, zeros, 0, "step_b");
  manypy_value_free(step_b);
  /* An int attribute of a submodule is out of reach, but the model's own
   * plain attributes are values: none here except training; `head` is a
   * module, which has no value form. */
  manypy_value* head = SENTINEL_VALUE;
  manypy_status* s =
      EXPECT_CODE(manypy_object_getattr(g_heavy, "head", NULL, &head), MANYPY_ERR_UNSUPPORTED_TYPE);
  ASSERT_CONTAINS(manypy_status_message(s), "Linear");
  manypy_status_free(s);
  assert_ptr_equal(head, SENTINEL_VALUE);
  /* Missing. */
  s = EXPECT_CODE(manypy_object_getattr(g_heavy, "no_such_attribute", NULL, &head),
                  MANYPY_ERR_NO_SUCH_NAME);
  ASSERT_CONTAINS(manypy_status_message(s), "no_such_attribute");
  manypy_status_free(s);
  assert_ptr_equal(head, SENTINEL_VALUE);
}

/* Replicas share the archive's storage: step_w read from two interpreters
 * is the same memory. */
static void test_weights_are_one_storage(void** state) {
  (void)state;
  int64_t address[POOL_SIZE];
  for (int32_t i = 0; i < POOL_SIZE; ++i) {
    manypy_call_options* options = pinned(i);
    manypy_value* a = NULL;
    ASSERT_OK(manypy_object_call(g_heavy, "weight_address", NULL, NULL, options, &a));
    ASSERT_OK(manypy_value_get_int64(a, &address[i]));
    manypy_value_free(a);
    manypy_call_options_free(options);
  }
  for (int32_t i = 1; i < POOL_SIZE; ++i) assert_int_equal(address[i], address[0]);
  /* A weight read through getattr is the host's own copy: the model keeps
   * (and may change) the weight itself. */
  manypy_value *w = NULL, *again = NULL;
  ASSERT_OK(manypy_object_getattr(g_heavy, "step_w", NULL, &w));
  ASSERT_OK(manypy_object_getattr(g_heavy, "step_w", NULL, &again));
  DLManagedTensor* m = NULL;
  ASSERT_OK(manypy_value_get_tensor(w, &m));
  assert_int_equal(m->dl_tensor.ndim, 2);
  assert_int_equal(m->dl_tensor.shape[0], 64);
  assert_int_equal(m->dl_tensor.shape[1], 64);
  assert_true((int64_t)(uintptr_t)m->dl_tensor.data != address[0]);
  m->deleter(m);
  ASSERT_VALUES_EQUAL(w, again);
  manypy_value_free(again);
  manypy_value_free(w);
}

/* manypy.h: an in-place change to a weight is seen by every replica (they
 * share the storage). load_state_dict copies into the parameters in place.
 * A package of its own, so g_heavy keeps its weights. */
static void test_inplace_weight_change_seen_by_every_replica(void** state) {
  (void)state;
  manypy_package* package = LOAD_PACKAGE(g_pool, "python_heavy.pt");
  manypy_object* model = LOAD_MODEL(package);
  /* Load the replicas everywhere first. */
  for (int32_t i = 0; i < POOL_SIZE; ++i) {
    manypy_call_options* options = pinned(i);
    manypy_value* v = NULL;
    ASSERT_OK(manypy_object_getattr(model, "training", options, &v));
    manypy_value_free(v);
    manypy_call_options_free(options);
  }
  float ones[64];
  for (int k = 0; k < 64; ++k) ones[k] = 1.0f + (float)k;
  const int64_t shape64[1] = {64};
  manypy_value* state_dict = manypy_value_new_dict();
  ASSERT_OK(manypy_value_dict_set(state_dict, "step_b", F32_TENSOR(ones, 1, shape64)));
  manypy_value* items[1] = {state_dict};
  manypy_value* args = LIST_OF(1, items);
  manypy_value* kwargs = manypy_value_new_dict();
  ASSERT_OK(manypy_value_dict_set(kwargs, "strict", manypy_value_new_bool(0)));
  manypy_call_options* on_one = pinned(1);
  manypy_value* r = NULL;
  ASSERT_OK(manypy_object_call(model, "load_state_dict", args, kwargs, on_one, &r));
  /* _IncompatibleKeys(missing_keys=[...], unexpected_keys=[]): a tuple. */
  assert_int_equal(manypy_value_get_kind(r), MANYPY_VALUE_TUPLE);
  manypy_value_free(r);
  manypy_call_options_free(on_one);
  for (int32_t i = 0; i < POOL_SIZE; ++i) {
    manypy_call_options* options = pinned(i);
    manypy_value* b = NULL;
    ASSERT_OK(manypy_object_getattr(model, "step_b", options, &b));
    char what[64];
    snprintf(what, sizeof what, "step_b seen from interpreter %d", (int)i);
    ASSERT_F32_TENSOR(b, 1, shape64, ones, 0, what);
    manypy_value_free(b);
    manypy_call_options_free(options);
  }
  manypy_value_free(kwargs);
  manypy_value_free(args);
  manypy_object_free(model);
  manypy_package_free(package);
  /* The archive file and the other package are untouched. */
  manypy_value* b = NULL;
  ASSERT_OK(manypy_object_getattr(g_heavy, "step_b", NULL, &b));
  float zeros[64] = {0};
  ASSERT_F32_TENSOR(b, 1, shape64, zeros, 0, "g_heavy's step_b");
  manypy_value_free(b);
  package = LOAD_PACKAGE(g_pool, "python_heavy.pt");
  model = LOAD_MODEL(package);
  ASSERT_OK(manypy_object_getattr(model, "step_b", NULL, &b));
  ASSERT_F32_TENSOR(b, 1, shape64, zeros, 0, "step_b of python_heavy.pt loaded again");
  manypy_value_free(b);
  manypy_object_free(model);
  manypy_package_free(package);
}

static void test_hasattr(void** state) {
  (void)state;
  int has = -1;
  ASSERT_OK(manypy_object_hasattr(g_heavy, "forward", &has));
  assert_int_equal(has, 1);
  has = -1;
  ASSERT_OK(manypy_object_hasattr(g_heavy, "step_w", &has));
  assert_int_equal(has, 1);
  has = -1;
  ASSERT_OK(manypy_object_hasattr(g_heavy, "no_such_attribute", &has));
  assert_int_equal(has, 0);
}

/* Each interpreter holds its own replica: an attribute set on one is not
 * seen by the others. */
static void test_replicas_are_separate_objects(void** state) {
  (void)state;
  for (int32_t i = 0; i < POOL_SIZE; ++i) {
    manypy_value* items[2] = {STRING("capi_marker"), manypy_value_new_int64(100 + i)};
    manypy_value* args = LIST_OF(2, items);
    manypy_call_options* options = pinned(i);
    manypy_value* r = NULL;
    ASSERT_OK(manypy_object_call(g_heavy, "__setattr__", args, NULL, options, &r));
    assert_int_equal(manypy_value_get_kind(r), MANYPY_VALUE_NONE);
    manypy_value_free(r);
    manypy_call_options_free(options);
    manypy_value_free(args);
  }
  for (int32_t i = 0; i < POOL_SIZE; ++i) {
    manypy_call_options* options = pinned(i);
    manypy_value* marker = NULL;
    ASSERT_OK(manypy_object_getattr(g_heavy, "capi_marker", options, &marker));
    int64_t x = 0;
    ASSERT_OK(manypy_value_get_int64(marker, &x));
    assert_int_equal(x, 100 + i);
    manypy_value_free(marker);
    manypy_value* r = NULL;
    manypy_value* items[1] = {STRING("capi_marker")};
    manypy_value* args = LIST_OF(1, items);
    ASSERT_OK(manypy_object_call(g_heavy, "__delattr__", args, NULL, options, &r));
    manypy_value_free(r);
    manypy_value_free(args);
    manypy_call_options_free(options);
  }
}

/* ---- errors ----------------------------------------------------------------------- */

static void test_missing_method(void** state) {
  (void)state;
  manypy_value* args = heavy_args();
  manypy_value* result = SENTINEL_VALUE;
  manypy_status* s =
      EXPECT_CODE(manypy_object_call(g_heavy, "no_such_method", args, NULL, NULL, &result),
                  MANYPY_ERR_NO_SUCH_NAME);
  ASSERT_CONTAINS(manypy_status_message(s), "no_such_method");
  manypy_status_free(s);
  assert_ptr_equal(result, SENTINEL_VALUE);
  manypy_value_free(args);
}

static void test_wrong_arguments(void** state) {
  (void)state;
  manypy_value* result = SENTINEL_VALUE;
  /* No x. */
  manypy_status* s =
      EXPECT_CODE(manypy_object_call(g_heavy, NULL, NULL, NULL, NULL, &result), MANYPY_ERR_PYTHON);
  assert_string_equal(manypy_status_python_type(s), "TypeError");
  ASSERT_CONTAINS(manypy_status_message(s), "forward()");
  ASSERT_CONTAINS(manypy_status_message(s), "'x'");
  ASSERT_CONTAINS(manypy_status_traceback(s), "TypeError");
  manypy_status_free(s);
  /* Too many. */
  manypy_value* items[4] = {F32_TENSOR(g_heavy_case.input, 2, kHeavyInput),
                            manypy_value_new_int64(1), manypy_value_new_bool(1),
                            manypy_value_new_none()};
  manypy_value* four = LIST_OF(4, items);
  s = EXPECT_CODE(manypy_object_call(g_heavy, "forward", four, NULL, NULL, &result),
                  MANYPY_ERR_PYTHON);
  assert_string_equal(manypy_status_python_type(s), "TypeError");
  ASSERT_CONTAINS(manypy_status_message(s), "positional argument");
  manypy_status_free(s);
  manypy_value_free(four);
  /* An unknown keyword. */
  manypy_value* args = heavy_args();
  manypy_value* kwargs = manypy_value_new_dict();
  ASSERT_OK(manypy_value_dict_set(kwargs, "stepz", manypy_value_new_int64(5)));
  s = EXPECT_CODE(manypy_object_call(g_heavy, NULL, args, kwargs, NULL, &result),
                  MANYPY_ERR_PYTHON);
  assert_string_equal(manypy_status_python_type(s), "TypeError");
  ASSERT_CONTAINS(manypy_status_message(s), "stepz");
  manypy_status_free(s);
  manypy_value_free(kwargs);
  /* A wrong shape: torch raises inside forward. */
  static float small[4 * 63];
  const int64_t bad_shape[2] = {4, 63};
  manypy_value* bad_items[1] = {F32_TENSOR(small, 2, bad_shape)};
  manypy_value* bad = LIST_OF(1, bad_items);
  s = EXPECT_CODE(manypy_object_call(g_heavy, NULL, bad, NULL, NULL, &result), MANYPY_ERR_PYTHON);
  assert_string_equal(manypy_status_python_type(s), "RuntimeError");
  ASSERT_CONTAINS(manypy_status_traceback(s), "in forward");
  manypy_status_free(s);
  manypy_value_free(bad);
  assert_ptr_equal(result, SENTINEL_VALUE);
  /* Every interpreter still serves. */
  manypy_value* kw = capi_heavy_kwargs();
  for (int32_t i = 0; i < POOL_SIZE; ++i) {
    manypy_call_options* options = pinned(i);
    manypy_value* r = NULL;
    ASSERT_OK(manypy_object_call(g_heavy, NULL, args, kw, options, &r));
    check_heavy_result(r, "python_heavy after errors");
    manypy_value_free(r);
    manypy_call_options_free(options);
  }
  manypy_value_free(kw);
  manypy_value_free(args);
}

static void test_args_must_be_sequence(void** state) {
  (void)state;
  manypy_value* result = SENTINEL_VALUE;
  manypy_value* num = manypy_value_new_int64(1);
  manypy_status* s = EXPECT_CODE(manypy_object_call(g_heavy, NULL, num, NULL, NULL, &result),
                                 MANYPY_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(manypy_status_message(s), "args must be a list or tuple");
  ASSERT_CONTAINS(manypy_status_message(s), "int64");
  manypy_status_free(s);
  manypy_value* dict = capi_heavy_kwargs();
  s = EXPECT_CODE(manypy_object_call(g_heavy, NULL, dict, NULL, NULL, &result),
                  MANYPY_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(manypy_status_message(s), "args must be a list or tuple");
  manypy_status_free(s);
  /* A tensor as args (a common mistake: forgetting the list). */
  manypy_value* tensor = F32_TENSOR(g_heavy_case.input, 2, kHeavyInput);
  ASSERT_CODE(manypy_object_call(g_heavy, NULL, tensor, NULL, NULL, &result),
              MANYPY_ERR_INVALID_ARGUMENT);
  /* kwargs must be a dict. */
  manypy_value* args = heavy_args();
  s = EXPECT_CODE(manypy_object_call(g_heavy, NULL, args, args, NULL, &result),
                  MANYPY_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(manypy_status_message(s), "kwargs must be a dict");
  manypy_status_free(s);
  assert_ptr_equal(result, SENTINEL_VALUE);
  manypy_value_free(args);
  manypy_value_free(tensor);
  manypy_value_free(dict);
  manypy_value_free(num);
}

static void test_unsupported_result(void** state) {
  (void)state;
  manypy_value* result = SENTINEL_VALUE;
  manypy_status* s =
      EXPECT_CODE(manypy_object_call(g_heavy, "parameters", NULL, NULL, NULL, &result),
                  MANYPY_ERR_UNSUPPORTED_TYPE);
  ASSERT_CONTAINS(manypy_status_message(s), "generator");
  manypy_status_free(s);
  assert_ptr_equal(result, SENTINEL_VALUE);
}

static void test_call_options(void** state) {
  (void)state;
  manypy_call_options* options = manypy_call_options_new();
  manypy_status* s =
      EXPECT_CODE(manypy_call_options_set_interpreter(options, -2), MANYPY_ERR_OUT_OF_RANGE);
  ASSERT_CONTAINS(manypy_status_message(s), "manypy_call_options_set_interpreter");
  ASSERT_CONTAINS(manypy_status_message(s), "-2");
  manypy_status_free(s);
  ASSERT_INVALID_ARG(manypy_call_options_set_interpreter(NULL, 0),
                     "manypy_call_options_set_interpreter", "options");
  /* An index past the pool: the call fails, naming it. */
  ASSERT_OK(manypy_call_options_set_interpreter(options, POOL_SIZE));
  manypy_value* result = SENTINEL_VALUE;
  manypy_value* args = heavy_args();
  s = EXPECT_CODE(manypy_object_call(g_heavy, NULL, args, NULL, options, &result),
                  MANYPY_ERR_OUT_OF_RANGE);
  ASSERT_CONTAINS(manypy_status_message(s), "3");
  manypy_status_free(s);
  ASSERT_CODE(manypy_object_getattr(g_heavy, "training", options, &result),
              MANYPY_ERR_OUT_OF_RANGE);
  assert_ptr_equal(result, SENTINEL_VALUE);
  /* Back to any interpreter. */
  ASSERT_OK(manypy_call_options_set_interpreter(options, MANYPY_ANY_INTERPRETER));
  ASSERT_OK(manypy_object_call(g_heavy, NULL, args, NULL, options, &result));
  manypy_value_free(result);
  manypy_value_free(args);
  manypy_call_options_free(options);
  manypy_call_options_free(NULL);
}

static void test_null_arguments(void** state) {
  (void)state;
  manypy_value* result = SENTINEL_VALUE;
  ASSERT_INVALID_ARG(manypy_object_call(NULL, NULL, NULL, NULL, NULL, &result),
                     "manypy_object_call", "object");
  ASSERT_INVALID_ARG(manypy_object_call(g_heavy, NULL, NULL, NULL, NULL, NULL),
                     "manypy_object_call", "out_result");
  ASSERT_INVALID_ARG(manypy_object_getattr(NULL, "training", NULL, &result),
                     "manypy_object_getattr", "object");
  ASSERT_INVALID_ARG(manypy_object_getattr(g_heavy, NULL, NULL, &result), "manypy_object_getattr",
                     "name");
  ASSERT_INVALID_ARG(manypy_object_getattr(g_heavy, "training", NULL, NULL),
                     "manypy_object_getattr", "out_value");
  int has = 7;
  ASSERT_INVALID_ARG(manypy_object_hasattr(NULL, "x", &has), "manypy_object_hasattr", "object");
  ASSERT_INVALID_ARG(manypy_object_hasattr(g_heavy, NULL, &has), "manypy_object_hasattr", "name");
  ASSERT_INVALID_ARG(manypy_object_hasattr(g_heavy, "x", NULL), "manypy_object_hasattr", "out_has");
  assert_int_equal(has, 7);
  assert_ptr_equal(result, SENTINEL_VALUE);
}

/* ---- resnet18 ------------------------------------------------------------------------- */

static void test_resnet18_on_two_interpreters(void** state) {
  (void)state;
  double t0 = capi_now();
  float* input = READ_F32("resnet18.input.bin", 3 * 224 * 224);
  float* expected = READ_F32("resnet18.expected.out.bin", 1000);
  manypy_package* package = LOAD_PACKAGE(g_pool, "resnet18.pt");
  manypy_object* resnet = LOAD_MODEL(package);
  manypy_value* items[1] = {F32_TENSOR(input, 4, kResnetInput)};
  manypy_value* args = LIST_OF(1, items);
  for (int32_t i = 0; i < 2; ++i) {
    manypy_call_options* options = pinned(i);
    manypy_value* result = NULL;
    ASSERT_OK(manypy_object_call(resnet, NULL, args, NULL, options, &result));
    char what[64];
    snprintf(what, sizeof what, "resnet18 on interpreter %d", (int)i);
    double e = ASSERT_F32_TENSOR(result, 2, kResnetOut, expected, 1e-4, what);
    fprintf(stderr, "  %s: max |diff| %.3g\n", what, e);
    manypy_value_free(result);
    /* forward by name: the same. */
    ASSERT_OK(manypy_object_call(resnet, "forward", args, NULL, options, &result));
    ASSERT_F32_TENSOR(result, 2, kResnetOut, expected, 1e-4, what);
    manypy_value_free(result);
    manypy_call_options_free(options);
  }
  manypy_value* training = NULL;
  ASSERT_OK(manypy_object_getattr(resnet, "training", NULL, &training));
  int b = -1;
  ASSERT_OK(manypy_value_get_bool(training, &b));
  assert_int_equal(b, 0);
  manypy_value_free(training);
  manypy_value_free(args);
  manypy_object_free(resnet);
  manypy_package_free(package);
  free(input);
  free(expected);
  fprintf(stderr, "  resnet18: %.1f s\n", capi_now() - t0);
}

/* ---- handles in any order (pools of their own: one more interpreter) -------- */

static manypy_value* identity_of_int(manypy_object* identity, int64_t x) {
  manypy_value* items[1] = {manypy_value_new_int64(x)};
  manypy_value* args = LIST_OF(1, items);
  manypy_value* r = NULL;
  manypy_status* s = manypy_object_call(identity, NULL, args, NULL, NULL, &r);
  manypy_value_free(args);
  ASSERT_OK(s);
  return r;
}

static void assert_identity_works(manypy_object* identity, int64_t x) {
  manypy_value* r = identity_of_int(identity, x);
  int64_t got = 0;
  ASSERT_OK(manypy_value_get_int64(r, &got));
  assert_int_equal(got, x);
  manypy_value_free(r);
}

/* Pool handle first, then the package, then the object. */
static void test_handles_pool_first(void** state) {
  (void)state;
  manypy_pool* pool = MAKE_POOL(1, MANYPY_THREAD_MODE_DIRECT);
  manypy_package* package = LOAD_PACKAGE(pool, "identity.pt");
  manypy_object* identity = LOAD_MODEL(package);
  manypy_pool_destroy(pool);
  assert_identity_works(identity, 1);
  /* The package still loads objects without its pool handle. */
  manypy_object* second = LOAD_MODEL(package);
  assert_identity_works(second, 2);
  manypy_package_free(package);
  assert_identity_works(identity, 3);
  assert_identity_works(second, 4);
  manypy_object_free(second);
  int has = -1;
  ASSERT_OK(manypy_object_hasattr(identity, "forward", &has));
  assert_int_equal(has, 1);
  manypy_object_free(identity);
}

/* The reverse: the object first, then the package, then the pool. */
static void test_handles_object_first(void** state) {
  (void)state;
  manypy_pool* pool = MAKE_POOL(1, MANYPY_THREAD_MODE_HANDOFF);
  manypy_package* package = LOAD_PACKAGE(pool, "identity.pt");
  manypy_object* identity = LOAD_MODEL(package);
  assert_identity_works(identity, 5);
  manypy_object_free(identity);
  /* The package is unharmed: load again. */
  identity = LOAD_MODEL(package);
  assert_identity_works(identity, 6);
  manypy_object_free(identity);
  manypy_package_free(package);
  assert_int_equal(EVAL_INT64(pool, 0, "7 * 6"), 42);
  manypy_pool_destroy(pool);
}

/* The package first, then the pool, then the object. */
static void test_handles_package_first(void** state) {
  (void)state;
  manypy_pool* pool = MAKE_POOL(1, MANYPY_THREAD_MODE_DIRECT);
  manypy_package* package = LOAD_PACKAGE(pool, "identity.pt");
  manypy_object* identity = LOAD_MODEL(package);
  manypy_package_free(package);
  assert_identity_works(identity, 7);
  manypy_pool_destroy(pool);
  assert_identity_works(identity, 8);
  manypy_object_free(identity);
  /* Everything went back: a new pool gets the interpreter, and serves. */
  pool = MAKE_POOL(1, MANYPY_THREAD_MODE_DIRECT);
  package = LOAD_PACKAGE(pool, "identity.pt");
  identity = LOAD_MODEL(package);
  assert_identity_works(identity, 9);
  manypy_object_free(identity);
  manypy_package_free(package);
  manypy_pool_destroy(pool);
}

/* ---- setup ------------------------------------------------------------------------------ */

/* Every test may use the expected files, so the group setup reads them (a
 * failed read fails the setup: cmocka's group fixtures may assert), and
 * each test runs alone in any order (cmocka's filter). */
static int group_setup(void** state) {
  (void)state;
  double t0 = capi_now();
  g_heavy_case = HEAVY_CASE_LOAD();
  manypy_status* s = capi_create_pool(POOL_SIZE, &g_pool);
  if (s == NULL) {
    s = manypy_package_load_file(g_pool, capi_archive("python_heavy.pt"), &g_heavy_package);
  }
  if (s == NULL) s = manypy_package_load_pickle(g_heavy_package, "model", "model.pkl", &g_heavy);
  if (s != NULL) {
    capi_print_status("setting up the pool and python_heavy.pt", s, __FILE__, __LINE__);
    manypy_status_free(s);
    return -1;
  }
  fprintf(stderr, "capi_objects: pool of %d and python_heavy.pt in %.2f s\n", POOL_SIZE,
          capi_now() - t0);
  return 0;
}

static int group_teardown(void** state) {
  (void)state;
  manypy_object_free(g_heavy);
  manypy_package_free(g_heavy_package);
  manypy_pool_destroy(g_pool);
  return 0;
}

/* python_heavy.json says what the expected files hold. */
static void test_expected_files_are_for_these_kwargs(void** state) {
  (void)state;
  size_t size = 0;
  char* json = READ_WHOLE_FILE(ARCHIVE("python_heavy.json"), &size);
  ASSERT_CONTAINS(json, "\"steps\": 5");
  ASSERT_CONTAINS(json, "\"normalize\": false");
  free(json);
}

/* capi_objects [PATTERN]: only the tests whose names match PATTERN (cmocka's
 * filter, * as a wildcard), e.g. to check that one runs alone. */
int main(int argc, char** argv) {
  double t0 = capi_now();
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_expected_files_are_for_these_kwargs),
      cmocka_unit_test(test_python_heavy_on_every_interpreter),
      cmocka_unit_test(test_python_heavy_kwargs_matter),
      cmocka_unit_test(test_method_by_name),
      cmocka_unit_test(test_getattr),
      cmocka_unit_test(test_weights_are_one_storage),
      cmocka_unit_test(test_inplace_weight_change_seen_by_every_replica),
      cmocka_unit_test(test_hasattr),
      cmocka_unit_test(test_replicas_are_separate_objects),
      cmocka_unit_test(test_missing_method),
      cmocka_unit_test(test_wrong_arguments),
      cmocka_unit_test(test_args_must_be_sequence),
      cmocka_unit_test(test_unsupported_result),
      cmocka_unit_test(test_call_options),
      cmocka_unit_test(test_null_arguments),
      cmocka_unit_test(test_resnet18_on_two_interpreters),
      cmocka_unit_test(test_handles_pool_first),
      cmocka_unit_test(test_handles_object_first),
      cmocka_unit_test(test_handles_package_first),
  };
  int failed = cmocka_run_group_tests_name("capi_objects", tests, group_setup, group_teardown);
  capi_heavy_case_free(&g_heavy_case);
  fprintf(stderr, "capi_objects: %.1f s\n", capi_now() - t0);
  return failed == 0 ? 0 : 1;
}
