/*
 * One argument value, and one tensor in it, used by many threads at once:
 * 6 threads x 500 rounds over a pool of 3 interpreters, in DIRECT and then
 * in HANDOFF mode. Each round of a thread does one of: call identity.pt
 * with the shared args value itself; with a clone of it (made on that
 * thread while the others read the original); with args of its own around
 * a new value of the shared manypy_tensor (a reference taken and dropped
 * around it); or evaluate on the pool with shared call options. Every
 * result is checked against the expected value, and every result tensor
 * must be the shared memory itself (zero copy: nobody copied or moved it).
 * The buffer's release must run exactly once, after the last of the args,
 * the handle and every result is gone. No time is asserted.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "capi_test_support.h"

#define POOL_SIZE 3
#define THREADS 6
#define ROUNDS 500

static const DLDataType kF32 = {kDLFloat, 32, 1};
static float g_buffer[64];
static const int64_t kShape[2] = {4, 16};

typedef struct shared {
  manypy_object* identity;
  manypy_pool* pool;
  const manypy_value* args;     /* (x,) */
  const manypy_value* expected; /* x, as identity must return it */
  manypy_tensor* tensor;        /* over g_buffer */
  const manypy_call_options* options;
} shared;

typedef struct worker {
  const shared* s;
  int thread;
  int errors;
  char first_error[512];
} worker;

static void record(worker* w, const char* what, manypy_status* status) {
  if (w->errors++ == 0) {
    snprintf(w->first_error, sizeof w->first_error, "thread %d: %s: %s", w->thread, what,
             status ? manypy_status_message(status) : "");
  }
  manypy_status_free(status);
}

/* Every tensor in `v` must be g_buffer itself. */
static int tensors_are_the_buffer(const manypy_value* v) {
  manypy_value_kind kind = manypy_value_get_kind(v);
  if (kind == MANYPY_VALUE_TENSOR) {
    DLManagedTensor* m = NULL;
    if (manypy_value_get_tensor(v, &m) != NULL) return 0;
    int same = (const char*)m->dl_tensor.data + m->dl_tensor.byte_offset == (const char*)g_buffer;
    m->deleter(m);
    return same;
  }
  if (kind != MANYPY_VALUE_LIST && kind != MANYPY_VALUE_TUPLE && kind != MANYPY_VALUE_DICT)
    return 1;
  size_t n = 0;
  if (manypy_value_length(v, &n) != NULL) return 0;
  for (size_t k = 0; k < n; ++k) {
    const manypy_value* item = NULL;
    if (manypy_value_get_item(v, k, &item) != NULL || !tensors_are_the_buffer(item)) return 0;
  }
  return 1;
}

/* identity(*args) must give `expected`, over the shared memory. */
static void call_and_check(worker* w, const manypy_value* args, const manypy_value* expected,
                           const char* what) {
  manypy_value* result = NULL;
  manypy_status* status = manypy_object_call(w->s->identity, NULL, args, NULL, NULL, &result);
  if (status != NULL) {
    record(w, what, status);
    return;
  }
  char why[256];
  if (!capi_values_equal(result, expected, why, sizeof why)) {
    record(w, what, NULL);
    snprintf(w->first_error + strlen(w->first_error),
             sizeof w->first_error - strlen(w->first_error), "result differs: %s", why);
  } else if (!tensors_are_the_buffer(result)) {
    record(w, what, NULL);
  }
  manypy_value_free(result);
}

static void* run(void* arg) {
  worker* w = arg;
  const shared* s = w->s;
  for (int round = 0; round < ROUNDS; ++round) {
    switch ((round + w->thread) % 4) {
      case 0:
        call_and_check(w, s->args, s->expected, "the shared args");
        break;
      case 1: {
        manypy_value* clone = NULL;
        manypy_status* status = manypy_value_clone(s->args, &clone);
        if (status != NULL) {
          record(w, "manypy_value_clone", status);
          break;
        }
        call_and_check(w, clone, s->expected, "a clone of the shared args");
        manypy_value_free(clone);
        break;
      }
      case 2: {
        manypy_tensor* mine = manypy_tensor_retain(s->tensor);
        manypy_value* t = NULL;
        manypy_status* status = manypy_value_new_tensor_ref(mine, &t);
        manypy_tensor_release(mine); /* the value keeps the memory */
        manypy_value* args = manypy_value_new_tuple();
        if (status == NULL) status = manypy_value_append(args, t); /* takes t */
        const manypy_value* tensor_item = NULL;
        if (status == NULL) status = manypy_value_get_item(s->expected, 2, &tensor_item);
        if (status != NULL) {
          record(w, "args around the shared tensor", status);
        } else {
          call_and_check(w, args, tensor_item, "a new value of the shared tensor");
        }
        manypy_value_free(args);
        break;
      }
      default: {
        char expression[64];
        snprintf(expression, sizeof expression, "sum(range(%d))", round);
        manypy_value* v = NULL;
        int64_t n = -1;
        manypy_status* status = manypy_pool_eval_with_options(s->pool, expression, s->options, &v);
        if (status == NULL) status = manypy_value_get_int64(v, &n);
        if (status != NULL) {
          record(w, expression, status);
        } else if (n != (int64_t)round * (round - 1) / 2) {
          record(w, expression, NULL);
        }
        manypy_value_free(v);
      }
    }
  }
  return NULL;
}

static void run_threads(manypy_thread_mode mode) {
  manypy_pool* pool = MAKE_POOL(POOL_SIZE, mode);
  manypy_package* package = LOAD_PACKAGE(pool, "identity.pt");
  manypy_object* identity = LOAD_MODEL(package);
  for (int k = 0; k < 64; ++k) g_buffer[k] = (float)k - 31.5f;

  atomic_int released = 0;
  manypy_tensor* tensor = NULL;
  ASSERT_OK(manypy_tensor_new_from_buffer(g_buffer, sizeof g_buffer, kF32, 2, kShape, NULL, 0,
                                          capi_count_release, &released, &tensor));
  /* x = (7, "é shared", t, {"t": t, "nested": [t, None, 2.5, b"\0"]}) */
  manypy_value* x = manypy_value_new_tuple();
  manypy_value* t1 = NULL;
  manypy_value* t2 = NULL;
  manypy_value* t3 = NULL;
  ASSERT_OK(manypy_value_new_tensor_ref(tensor, &t1));
  ASSERT_OK(manypy_value_new_tensor_ref(tensor, &t2));
  ASSERT_OK(manypy_value_new_tensor_ref(tensor, &t3));
  ASSERT_OK(manypy_value_append(x, manypy_value_new_int64(7)));
  ASSERT_OK(manypy_value_append(x, STRING("\xc3\xa9 shared")));
  ASSERT_OK(manypy_value_append(x, t1));
  manypy_value* nested = manypy_value_new_list();
  ASSERT_OK(manypy_value_append(nested, t2));
  ASSERT_OK(manypy_value_append(nested, manypy_value_new_none()));
  ASSERT_OK(manypy_value_append(nested, manypy_value_new_double(2.5)));
  ASSERT_OK(manypy_value_append(nested, manypy_value_new_bytes("\0", 1)));
  manypy_value* dict = manypy_value_new_dict();
  ASSERT_OK(manypy_value_dict_set(dict, "t", t3));
  ASSERT_OK(manypy_value_dict_set(dict, "nested", nested));
  ASSERT_OK(manypy_value_append(x, dict));
  manypy_value* expected = NULL;
  ASSERT_OK(manypy_value_clone(x, &expected));
  manypy_value* items[1] = {x};
  manypy_value* args = TUPLE_OF(1, items);

  manypy_call_options* options = manypy_call_options_new();
  ASSERT_OK(manypy_call_options_set_timeout(options, 60 * 1000000000LL)); /* bounded, never hit */
  shared s = {identity, pool, args, expected, tensor, options};
  worker workers[THREADS];
  pthread_t threads[THREADS];
  for (int k = 0; k < THREADS; ++k) {
    workers[k] = (worker){&s, k, 0, ""};
    assert_int_equal(pthread_create(&threads[k], NULL, run, &workers[k]), 0);
  }
  int errors = 0;
  for (int k = 0; k < THREADS; ++k) {
    assert_int_equal(pthread_join(threads[k], NULL), 0);
    if (workers[k].errors) fprintf(stderr, "%s\n", workers[k].first_error);
    errors += workers[k].errors;
  }
  assert_int_equal(errors, 0);

  /* The memory goes with the last user: the args, the expected value and
   * the handle, in that order. */
  assert_int_equal(atomic_load(&released), 0);
  manypy_value_free(args);
  manypy_value_free(expected);
  assert_int_equal(atomic_load(&released), 0);
  manypy_tensor_release(tensor);
  assert_int_equal(atomic_load(&released), 1);

  manypy_call_options_free(options);
  manypy_object_free(identity);
  manypy_package_free(package);
  manypy_pool_destroy(pool);
}

static void test_direct(void** state) {
  (void)state;
  run_threads(MANYPY_THREAD_MODE_DIRECT);
}

static void test_handoff(void** state) {
  (void)state;
  run_threads(MANYPY_THREAD_MODE_HANDOFF);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_direct),
      cmocka_unit_test(test_handoff),
  };
  return cmocka_run_group_tests_name("capi_shared_values", tests, NULL, NULL);
}
