/* The C side of rust_vs_c: the loops a C host runs, against the same
 * objects and argument values the Rust side uses. Each result is read as a
 * C host reads it (the tensor taken out with manypy_value_get_tensor) and
 * freed. Returns 0, or -1 after the first failed call (its message in
 * `error`, up to `error_size` bytes). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "manypy.h"

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

/* One call, its result's tensor taken out and released, the result freed. */
static manypy_status* call_once(manypy_object* object, const manypy_value* args,
                                const manypy_value* kwargs) {
  manypy_value* out = NULL;
  manypy_status* s = manypy_object_call(object, NULL, args, kwargs, NULL, &out);
  if (s != NULL) return s;
  if (manypy_value_get_kind(out) == MANYPY_VALUE_TENSOR) {
    DLManagedTensor* t = NULL;
    s = manypy_value_get_tensor(out, &t);
    if (s == NULL) t->deleter(t);
  }
  manypy_value_free(out);
  return s;
}

/* `n` calls; each one's latency in ns into latencies[i]. */
int bench_c_latencies(manypy_object* object, const manypy_value* args, int64_t* latencies,
                      size_t n, char* error, size_t error_size) {
  for (size_t i = 0; i < n; ++i) {
    int64_t start = now_ns();
    manypy_status* s = call_once(object, args, NULL);
    latencies[i] = now_ns() - start;
    if (s != NULL) return fail(s, error, error_size);
  }
  return 0;
}

struct worker {
  manypy_object* object;
  const manypy_value *args, *kwargs;
  atomic_int* stop;
  uint64_t calls;
  manypy_status* status;
};

static void* work(void* arg) {
  struct worker* w = arg;
  while (!atomic_load_explicit(w->stop, memory_order_relaxed)) {
    w->status = call_once(w->object, w->args, w->kwargs);
    if (w->status != NULL) break;
    w->calls++;
  }
  return NULL;
}

/* Calls from `threads` (<= 16) threads for `seconds`; the calls completed
 * into *out_calls and the wall time into *out_ns. */
int bench_c_throughput(manypy_object* object, const manypy_value* args, const manypy_value* kwargs,
                       int threads, double seconds, uint64_t* out_calls, int64_t* out_ns,
                       char* error, size_t error_size) {
  struct worker w[16];
  pthread_t t[16];
  atomic_int stop = 0;
  if (threads < 1 || threads > 16) {
    snprintf(error, error_size, "threads must be 1 to 16");
    return -1;
  }
  int64_t start = now_ns();
  for (int i = 0; i < threads; ++i) {
    w[i] = (struct worker){object, args, kwargs, &stop, 0, NULL};
    pthread_create(&t[i], NULL, work, &w[i]);
  }
  struct timespec pause = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
  nanosleep(&pause, NULL);
  atomic_store(&stop, 1);
  int rc = 0;
  *out_calls = 0;
  for (int i = 0; i < threads; ++i) {
    pthread_join(t[i], NULL);
    *out_calls += w[i].calls;
    if (w[i].status != NULL && rc == 0) rc = fail(w[i].status, error, error_size);
    else manypy_status_free(w[i].status);
  }
  *out_ns = now_ns() - start;
  return rc;
}
