/*
 * Stress: 8 threads x 2000 calls of identity.pt over a 4-interpreter pool
 * (DIRECT), then 8 x 2000 in HANDOFF mode on the same interpreters. Every
 * call has its own input (an id, a string and a borrowed tensor over the
 * call's own buffer), so a result routed to the wrong caller shows; every
 * result is checked, and every borrowed buffer's release must have run
 * exactly once by the time the caller freed its values. Half the threads
 * pin an interpreter, half let the pool choose. Then python_heavy.pt (kwargs,
 * dict results, real work) from 8 threads sharing one args value, checked
 * against the expected files. Then 300 HANDOFF threads that each make one
 * python_heavy call and exit. Last, the pool handle is destroyed while
 * threads call an object and load objects from its package. Zero errors
 * allowed; run times are printed,
 * never asserted.
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi_test_support.h"

#define POOL_SIZE 4
#define THREADS 8

static const DLDataType kI64 = {kDLInt, 64, 1};

struct worker {
  manypy_object* identity;
  int thread;
  int calls;
  int32_t interpreter; /* MANYPY_ANY_INTERPRETER or an index */
  int errors;
  int done;
  char first_error[1024];
};

static void record_error(struct worker* w, const char* format, ...) {
  if (w->errors++ == 0) {
    va_list va;
    va_start(va, format);
    vsnprintf(w->first_error, sizeof w->first_error, format, va);
    va_end(va);
  }
}

/* One call: identity((id, "t<thread>-c<call>", tensor[t, c, t*c, -c])).
 * Returns 0 if everything checked out. No cmocka assertions: this runs on
 * worker threads. */
static int one_call(struct worker* w, const manypy_call_options* options, int call) {
  int64_t buffer[4] = {w->thread, call, (int64_t)w->thread * call, -call};
  atomic_int released = 0;
  const int64_t shape[1] = {4};
  char text[64];
  int n = snprintf(text, sizeof text, "t%d-c%d \xc3\xa9", w->thread, call);
  int64_t id = (int64_t)w->thread * 1000000 + call;

  manypy_value* tensor = NULL;
  manypy_value* str = NULL;
  manypy_status* s = manypy_value_new_tensor_from_buffer(
      buffer, sizeof buffer, kI64, 1, shape, NULL, 0, capi_count_release, &released, &tensor);
  if (s == NULL) s = manypy_value_new_string(text, (size_t)n, &str);
  if (s != NULL) {
    record_error(w, "call %d: building the input: %s", call, manypy_status_message(s));
    manypy_status_free(s);
    manypy_value_free(tensor);
    return -1;
  }
  manypy_value* x = manypy_value_new_tuple();
  manypy_value* args = manypy_value_new_list();
  manypy_value* result = NULL;
  s = manypy_value_append(x, manypy_value_new_int64(id));
  if (s == NULL) s = manypy_value_append(x, str);
  if (s == NULL) s = manypy_value_append(x, tensor);
  if (s == NULL) s = manypy_value_append(args, x);
  if (s == NULL) s = manypy_object_call(w->identity, NULL, args, NULL, options, &result);
  int rc = 0;
  if (s != NULL) {
    record_error(w, "call %d: %s: %s", call, manypy_code_name(manypy_status_code(s)),
                 manypy_status_message(s));
    manypy_status_free(s);
    rc = -1;
  } else {
    const manypy_value* sent = NULL;
    char why[512];
    if ((s = manypy_value_get_item(args, 0, &sent)) != NULL) {
      record_error(w, "call %d: get_item: %s", call, manypy_status_message(s));
      manypy_status_free(s);
      rc = -1;
    } else if (!capi_values_equal(result, sent, why, sizeof why)) {
      record_error(w, "call %d: the result differs from the input: %s", call, why);
      rc = -1;
    } else {
      /* The tensor came back over the caller's own buffer. */
      const manypy_value* t = NULL;
      DLManagedTensor* m = NULL;
      s = manypy_value_get_item(result, 2, &t);
      if (s == NULL) s = manypy_value_get_tensor(t, &m);
      if (s != NULL) {
        record_error(w, "call %d: result tensor: %s", call, manypy_status_message(s));
        manypy_status_free(s);
        rc = -1;
      } else {
        if (m->dl_tensor.data != (void*)buffer) {
          record_error(w, "call %d: the result tensor is not the caller's buffer", call);
          rc = -1;
        }
        m->deleter(m);
      }
    }
  }
  if (atomic_load(&released) != 0 && rc == 0) {
    record_error(w, "call %d: release ran while the values were alive", call);
    rc = -1;
  }
  manypy_value_free(result);
  manypy_value_free(args);
  if (atomic_load(&released) != 1) {
    record_error(w, "call %d: release ran %d times after the values were freed", call,
                 atomic_load(&released));
    rc = -1;
  }
  return rc;
}

static void* run_worker(void* arg) {
  struct worker* w = arg;
  manypy_call_options* options = manypy_call_options_new();
  manypy_status* s = manypy_call_options_set_interpreter(options, w->interpreter);
  if (s != NULL) {
    record_error(w, "set_interpreter: %s", manypy_status_message(s));
    manypy_status_free(s);
  } else {
    for (int call = 0; call < w->calls; ++call) {
      if (one_call(w, options, call) == 0) ++w->done;
    }
  }
  manypy_call_options_free(options);
  return NULL;
}

static void run_stress(manypy_thread_mode mode, int calls_per_thread, const char* name) {
  manypy_pool* pool = MAKE_POOL(POOL_SIZE, mode);
  manypy_package* package = LOAD_PACKAGE(pool, "identity.pt");
  manypy_object* identity = LOAD_MODEL(package);
  /* Start every interpreter and load every replica before timing. */
  for (int32_t i = 0; i < POOL_SIZE; ++i) {
    manypy_call_options* options = manypy_call_options_new();
    ASSERT_OK(manypy_call_options_set_interpreter(options, i));
    int has = 0;
    manypy_value* v = NULL;
    ASSERT_OK(manypy_object_getattr(identity, "training", options, &v));
    manypy_value_free(v);
    ASSERT_OK(manypy_object_hasattr(identity, "forward", &has));
    assert_int_equal(has, 1);
    manypy_call_options_free(options);
  }

  struct worker workers[THREADS];
  pthread_t threads[THREADS];
  double t0 = capi_now();
  for (int t = 0; t < THREADS; ++t) {
    memset(&workers[t], 0, sizeof workers[t]);
    workers[t].identity = identity;
    workers[t].thread = t;
    workers[t].calls = calls_per_thread;
    workers[t].interpreter = t < THREADS / 2 ? (int32_t)(t % POOL_SIZE) : MANYPY_ANY_INTERPRETER;
    assert_int_equal(pthread_create(&threads[t], NULL, run_worker, &workers[t]), 0);
  }
  for (int t = 0; t < THREADS; ++t) pthread_join(threads[t], NULL);
  double seconds = capi_now() - t0;

  int errors = 0, done = 0;
  for (int t = 0; t < THREADS; ++t) {
    errors += workers[t].errors;
    done += workers[t].done;
    if (workers[t].errors) {
      fprintf(stderr, "  thread %d: %d errors; first: %s\n", t, workers[t].errors,
              workers[t].first_error);
    }
  }
  fprintf(stderr,
          "  %s: %d threads x %d calls over %d interpreters: %d verified, %d errors in "
          "%.2f s (%.0f calls/s)\n",
          name, THREADS, calls_per_thread, POOL_SIZE, done, errors, seconds,
          THREADS * calls_per_thread / seconds);
  manypy_object_free(identity);
  manypy_package_free(package);
  manypy_pool_destroy(pool);
  assert_int_equal(errors, 0);
  assert_int_equal(done, THREADS * calls_per_thread);
}

static void test_stress_direct(void** state) {
  (void)state;
  run_stress(MANYPY_THREAD_MODE_DIRECT, 2000, "DIRECT");
}

static void test_stress_handoff(void** state) {
  (void)state;
  run_stress(MANYPY_THREAD_MODE_HANDOFF, 2000, "HANDOFF");
}

/* ---- python_heavy: kwargs, dict results, real work ---------------------------- */

static float* g_heavy_input;
static float* g_heavy_logits;
static float* g_heavy_norm;

struct heavy_worker {
  manypy_object* model;
  const manypy_value* args;
  const manypy_value* kwargs;
  int calls;
  int errors;
  char first_error[1024];
};

/* Non-asserting: float32 tensor `v` of n elements within rtol of want. */
static int close_to(const manypy_value* v, const float* want, int64_t n, double rtol, char* why,
                    size_t size) {
  DLManagedTensor* m = NULL;
  manypy_status* s = manypy_value_get_tensor(v, &m);
  if (s != NULL) {
    snprintf(why, size, "get_tensor: %s", manypy_status_message(s));
    manypy_status_free(s);
    return 0;
  }
  int ok = capi_numel(&m->dl_tensor) == n && m->dl_tensor.dtype.code == kDLFloat &&
           m->dl_tensor.dtype.bits == 32;
  if (!ok) snprintf(why, size, "wrong shape or dtype");
  for (int64_t k = 0; ok && k < n; ++k) {
    float got;
    memcpy(&got, capi_element(&m->dl_tensor, k), 4);
    if (!(fabs((double)got - want[k]) <= rtol * (fabs(want[k]) + 1e-3))) {
      snprintf(why, size, "element %lld: %.9g, expected %.9g", (long long)k, got, want[k]);
      ok = 0;
    }
  }
  m->deleter(m);
  return ok;
}

static void* run_heavy_worker(void* arg) {
  struct heavy_worker* w = arg;
  for (int call = 0; call < w->calls; ++call) {
    manypy_value* result = NULL;
    manypy_status* s = manypy_object_call(w->model, NULL, w->args, w->kwargs, NULL, &result);
    char why[512] = "";
    const manypy_value *logits = NULL, *norm = NULL, *steps = NULL;
    int64_t steps_value = 0;
    if (s == NULL) s = manypy_value_dict_get(result, "logits", &logits);
    if (s == NULL) s = manypy_value_dict_get(result, "norm", &norm);
    if (s == NULL) s = manypy_value_dict_get(result, "steps", &steps);
    if (s == NULL) s = manypy_value_get_int64(steps, &steps_value);
    if (s != NULL) {
      snprintf(why, sizeof why, "%s: %s", manypy_code_name(manypy_status_code(s)),
               manypy_status_message(s));
      manypy_status_free(s);
    } else if (steps_value != 5) {
      snprintf(why, sizeof why, "steps %lld", (long long)steps_value);
    } else if (close_to(logits, g_heavy_logits, 40, 1e-5, why, sizeof why) &&
               close_to(norm, g_heavy_norm, 4, 1e-5, why, sizeof why)) {
      why[0] = '\0';
    }
    if (why[0] != '\0' && w->errors++ == 0) {
      snprintf(w->first_error, sizeof w->first_error, "call %d: %s", call, why);
    }
    manypy_value_free(result);
  }
  return NULL;
}

static void test_stress_python_heavy(void** state) {
  (void)state;
  const int calls = 200;
  g_heavy_input = READ_F32("python_heavy.input.bin", 4 * 64);
  g_heavy_logits = READ_F32("python_heavy.expected.logits.bin", 4 * 10);
  g_heavy_norm = READ_F32("python_heavy.expected.norm.bin", 4);
  manypy_pool* pool = MAKE_POOL(POOL_SIZE, MANYPY_THREAD_MODE_DIRECT);
  manypy_package* package = LOAD_PACKAGE(pool, "python_heavy.pt");
  manypy_object* model = LOAD_MODEL(package);
  const int64_t shape[2] = {4, 64};
  manypy_value* items[1] = {F32_TENSOR(g_heavy_input, 2, shape)};
  manypy_value* args = LIST_OF(1, items);
  manypy_value* kwargs = capi_heavy_kwargs();

  struct heavy_worker workers[THREADS];
  pthread_t threads[THREADS];
  double t0 = capi_now();
  for (int t = 0; t < THREADS; ++t) {
    memset(&workers[t], 0, sizeof workers[t]);
    workers[t].model = model;
    workers[t].args = args; /* one read-only value shared by every thread */
    workers[t].kwargs = kwargs;
    workers[t].calls = calls;
    assert_int_equal(pthread_create(&threads[t], NULL, run_heavy_worker, &workers[t]), 0);
  }
  for (int t = 0; t < THREADS; ++t) pthread_join(threads[t], NULL);
  double seconds = capi_now() - t0;
  int errors = 0;
  for (int t = 0; t < THREADS; ++t) {
    errors += workers[t].errors;
    if (workers[t].errors) {
      fprintf(stderr, "  thread %d: %d errors; first: %s\n", t, workers[t].errors,
              workers[t].first_error);
    }
  }
  fprintf(stderr,
          "  python_heavy: %d threads x %d calls over %d interpreters: %d errors in "
          "%.2f s (%.0f calls/s)\n",
          THREADS, calls, POOL_SIZE, errors, seconds, THREADS * calls / seconds);
  manypy_value_free(kwargs);
  manypy_value_free(args);
  manypy_object_free(model);
  manypy_package_free(package);
  manypy_pool_destroy(pool);
  free(g_heavy_input);
  free(g_heavy_logits);
  free(g_heavy_norm);
  assert_int_equal(errors, 0);
}

/* ---- HANDOFF: threads that call once, free the result's tensors and exit -------- */

/* Freeing a tensor an interpreter made runs that namespace's torch, which
 * takes the interpreter's GIL (torch drops the tensor's Python object under
 * it). So a thread must be prepared for the namespace first even in HANDOFF
 * mode, where it never enters it to call. Unprepared, the namespace libc
 * allocated the thread's pthread key block, the host libc freed it as the
 * thread exited, and glibc aborted ("double free or corruption (out)"),
 * within a few hundred threads (found by tests/soak's thread churn). */
static void test_handoff_threads_free_results_and_exit(void** state) {
  (void)state;
  const int threads = 300;
  g_heavy_input = READ_F32("python_heavy.input.bin", 4 * 64);
  g_heavy_logits = READ_F32("python_heavy.expected.logits.bin", 4 * 10);
  g_heavy_norm = READ_F32("python_heavy.expected.norm.bin", 4);
  manypy_pool* pool = MAKE_POOL(2, MANYPY_THREAD_MODE_HANDOFF);
  manypy_package* package = LOAD_PACKAGE(pool, "python_heavy.pt");
  manypy_object* model = LOAD_MODEL(package);
  const int64_t shape[2] = {4, 64};
  manypy_value* items[1] = {F32_TENSOR(g_heavy_input, 2, shape)};
  manypy_value* args = LIST_OF(1, items);
  manypy_value* kwargs = capi_heavy_kwargs();
  int errors = 0;
  double t0 = capi_now();
  for (int t = 0; t < threads; ++t) {
    struct heavy_worker w;
    memset(&w, 0, sizeof w);
    w.model = model;
    w.args = args;
    w.kwargs = kwargs;
    w.calls = 1;
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, run_heavy_worker, &w), 0);
    pthread_join(thread, NULL);
    if (w.errors && errors++ == 0) fprintf(stderr, "  thread %d: %s\n", t, w.first_error);
  }
  fprintf(stderr, "  HANDOFF: %d threads, one python_heavy call each: %d errors in %.2f s\n",
          threads, errors, capi_now() - t0);
  manypy_value_free(kwargs);
  manypy_value_free(args);
  manypy_object_free(model);
  manypy_package_free(package);
  manypy_pool_destroy(pool);
  free(g_heavy_input);
  free(g_heavy_logits);
  free(g_heavy_norm);
  assert_int_equal(errors, 0);
}

/* ---- the pool handle goes while objects are being called and loaded ------------ */

struct churn_worker {
  manypy_object* identity; /* call it */
  manypy_package* package; /* or load and free objects from it */
  atomic_int* progress;
  int calls;
  int errors;
  char first_error[512];
};

static void* run_churn_worker(void* arg) {
  struct churn_worker* w = arg;
  for (int call = 0; call < w->calls; ++call) {
    manypy_status* s = NULL;
    if (w->identity != NULL) {
      manypy_value* args = manypy_value_new_list();
      s = manypy_value_append(args, manypy_value_new_int64(call));
      manypy_value* r = NULL;
      if (s == NULL) s = manypy_object_call(w->identity, NULL, args, NULL, NULL, &r);
      int64_t got = -1;
      if (s == NULL) s = manypy_value_get_int64(r, &got);
      if (s == NULL && got != call && w->errors++ == 0) {
        snprintf(w->first_error, sizeof w->first_error, "call %d returned %lld", call,
                 (long long)got);
      }
      manypy_value_free(r);
      manypy_value_free(args);
    } else {
      manypy_object* o = NULL;
      s = manypy_package_load_pickle(w->package, "model", "model.pkl", &o);
      manypy_object_free(o);
    }
    if (s != NULL) {
      if (w->errors++ == 0) {
        snprintf(w->first_error, sizeof w->first_error, "call %d: %s: %s", call,
                 manypy_code_name(manypy_status_code(s)), manypy_status_message(s));
      }
      manypy_status_free(s);
    }
    atomic_fetch_add(w->progress, 1);
  }
  return NULL;
}

static void test_pool_handle_destroyed_during_calls(void** state) {
  (void)state;
  manypy_pool* pool = MAKE_POOL(POOL_SIZE, MANYPY_THREAD_MODE_DIRECT);
  manypy_package* package = LOAD_PACKAGE(pool, "identity.pt");
  manypy_object* identity = LOAD_MODEL(package);
  atomic_int progress = 0;
  struct churn_worker workers[4];
  pthread_t threads[4];
  for (int t = 0; t < 4; ++t) {
    memset(&workers[t], 0, sizeof workers[t]);
    workers[t].identity = t < 3 ? identity : NULL;
    workers[t].package = package;
    workers[t].progress = &progress;
    workers[t].calls = t < 3 ? 3000 : 100;
    assert_int_equal(pthread_create(&threads[t], NULL, run_churn_worker, &workers[t]), 0);
  }
  /* Once calls are flowing, drop the pool handle (the package and the
   * object keep the pool alive). The package goes only after its user
   * thread is done. */
  while (atomic_load(&progress) < 200) sched_yield();
  manypy_pool_destroy(pool);
  int at_destroy = atomic_load(&progress);
  pthread_join(threads[3], NULL);
  manypy_package_free(package);
  for (int t = 0; t < 3; ++t) pthread_join(threads[t], NULL);
  int errors = 0;
  for (int t = 0; t < 4; ++t) {
    errors += workers[t].errors;
    if (workers[t].errors) {
      fprintf(stderr, "  thread %d: %d errors; first: %s\n", t, workers[t].errors,
              workers[t].first_error);
    }
  }
  fprintf(stderr, "  pool handle destroyed after %d of %d operations; %d errors\n", at_destroy,
          3 * 3000 + 100, errors);
  /* The object still works, alone. */
  manypy_value* args = manypy_value_new_list();
  ASSERT_OK(manypy_value_append(args, manypy_value_new_int64(77)));
  manypy_value* r = NULL;
  ASSERT_OK(manypy_object_call(identity, NULL, args, NULL, NULL, &r));
  int64_t got = 0;
  ASSERT_OK(manypy_value_get_int64(r, &got));
  assert_int_equal(got, 77);
  manypy_value_free(r);
  manypy_value_free(args);
  manypy_object_free(identity);
  assert_int_equal(errors, 0);
  assert_int_equal(atomic_load(&progress), 3 * 3000 + 100);
}

int main(void) {
  double t0 = capi_now();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stress_direct),
      cmocka_unit_test(test_stress_handoff),
      cmocka_unit_test(test_stress_python_heavy),
      cmocka_unit_test(test_handoff_threads_free_results_and_exit),
      cmocka_unit_test(test_pool_handle_destroyed_during_calls),
  };
  int failed = cmocka_run_group_tests_name("capi_stress", tests, NULL, NULL);
  fprintf(stderr, "capi_stress: %.1f s\n", capi_now() - t0);
  return failed == 0 ? 0 : 1;
}
