#define _GNU_SOURCE
#include "cbench.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int fail(manypy_status* s, char* error, size_t error_size) {
  snprintf(error, error_size, "%s", manypy_status_message(s));
  manypy_status_free(s);
  return -1;
}

/* Releases one result tensor the way a consumer would after reading it. */
static manypy_status* take_tensor(const manypy_value* value) {
  DLManagedTensor* t = NULL;
  manypy_status* s = manypy_value_get_tensor(value, &t);
  if (!s) t->deleter(t);
  return s;
}

int cbench_identity(manypy_object* model, float* input, int64_t calls, int64_t* latencies_ns,
                    char* error, size_t error_size) {
  static const int64_t shape[2] = {2, 3};
  for (int64_t i = 0; i < calls; ++i) {
    int64_t start = now_ns();
    manypy_value* x = NULL;
    manypy_status* s = manypy_value_new_tensor_from_buffer(
        input, 6 * sizeof(float), (DLDataType){kDLFloat, 32, 1}, 2, shape, NULL, 0, NULL, NULL, &x);
    if (s) return fail(s, error, error_size);
    manypy_value* args = manypy_value_new_tuple();
    manypy_value* out = NULL;
    s = manypy_value_append(args, x);
    if (!s) s = manypy_object_call(model, NULL, args, NULL, NULL, &out);
    if (!s) s = take_tensor(out);
    manypy_value_free(out);
    manypy_value_free(args);
    if (s) return fail(s, error, error_size);
    latencies_ns[i] = now_ns() - start;
  }
  return 0;
}

typedef struct {
  manypy_object* model;
  float* input;
  size_t input_bytes;
  double seconds;
  pthread_barrier_t* start;
  int64_t calls;
  char error[256];
} worker;

static int heavy_call(worker* w) {
  static const int64_t shape[2] = {4, 64};
  manypy_value* x = NULL;
  manypy_status* s = manypy_value_new_tensor_from_buffer(
      w->input, w->input_bytes, (DLDataType){kDLFloat, 32, 1}, 2, shape, NULL, 0, NULL, NULL, &x);
  if (s) return fail(s, w->error, sizeof w->error);
  manypy_value* args = manypy_value_new_tuple();
  manypy_value* kwargs = manypy_value_new_dict();
  manypy_value* out = NULL;
  s = manypy_value_append(args, x);
  if (!s) s = manypy_value_dict_set(kwargs, "steps", manypy_value_new_int64(5));
  if (!s) s = manypy_value_dict_set(kwargs, "normalize", manypy_value_new_bool(0));
  if (!s) s = manypy_object_call(w->model, NULL, args, kwargs, NULL, &out);
  const manypy_value* item = NULL;
  if (!s) s = manypy_value_dict_get(out, "logits", &item);
  if (!s) s = take_tensor(item);
  if (!s) s = manypy_value_dict_get(out, "norm", &item);
  if (!s) s = take_tensor(item);
  manypy_value_free(out);
  manypy_value_free(kwargs);
  manypy_value_free(args);
  return s ? fail(s, w->error, sizeof w->error) : 0;
}

static void* run_heavy(void* arg) {
  worker* w = arg;
  pthread_barrier_wait(w->start);
  int64_t end = now_ns() + (int64_t)(w->seconds * 1e9);
  while (now_ns() < end) {
    if (heavy_call(w)) break;
    w->calls++;
  }
  return NULL;
}

int cbench_heavy(manypy_object* model, float* input, size_t input_bytes, int threads,
                 double seconds, int64_t* out_calls, char* error, size_t error_size) {
  enum { kMaxThreads = 64 };
  if (threads < 1 || threads > kMaxThreads) threads = 1;
  worker workers[kMaxThreads];
  pthread_t ids[kMaxThreads];
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, (unsigned)threads);
  for (int i = 0; i < threads; ++i) {
    memset(&workers[i], 0, sizeof workers[i]);
    workers[i].model = model;
    workers[i].input = input;
    workers[i].input_bytes = input_bytes;
    workers[i].seconds = seconds;
    workers[i].start = &start;
    pthread_create(&ids[i], NULL, run_heavy, &workers[i]);
  }
  int64_t total = 0;
  int rc = 0;
  for (int i = 0; i < threads; ++i) {
    pthread_join(ids[i], NULL);
    total += workers[i].calls;
    if (workers[i].error[0] && rc == 0) {
      snprintf(error, error_size, "%s", workers[i].error);
      rc = -1;
    }
  }
  pthread_barrier_destroy(&start);
  *out_calls = total;
  return rc;
}
