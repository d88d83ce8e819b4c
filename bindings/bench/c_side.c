/* The C side of the binding benchmarks (c_side.h). */
#define _POSIX_C_SOURCE 200809L
#include "c_side.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { kMaxDims = 4 };

struct c_side_request {
  manypy_object* object;
  /* Prepared values, or args == NULL: a tensor over `input` per call. */
  const manypy_value* args;
  const manypy_value* kwargs;
  float* input;
  size_t input_bytes;
  int32_t ndim;
  int64_t shape[kMaxDims];
  /* Per call, when set: python_heavy's kwargs, made anew. */
  int heavy_kwargs;
  /* Of a dict result, the keys whose tensors are taken out (NULL-ended), or
   * NULL: only a tensor result is. */
  const char* const* take;
};

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int fail_message(const char* message, char* error, size_t error_size) {
  if (error && error_size) snprintf(error, error_size, "%s", message);
  return -1;
}

static int fail(manypy_status* s, char* error, size_t error_size) {
  fail_message(manypy_status_message(s), error, error_size);
  manypy_status_free(s);
  return -1;
}

/* ---- requests ------------------------------------------------------------ */

c_side_request* c_side_request_prepared(manypy_object* object, const manypy_value* args,
                                        const manypy_value* kwargs) {
  c_side_request* r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->object = object;
  r->args = args;
  r->kwargs = kwargs;
  return r;
}

c_side_request* c_side_request_tensor(manypy_object* object, float* input, size_t input_bytes,
                                      int32_t ndim, const int64_t* shape) {
  if (ndim < 0 || ndim > kMaxDims || (ndim > 0 && !shape)) return NULL;
  c_side_request* r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->object = object;
  r->input = input;
  r->input_bytes = input_bytes;
  r->ndim = ndim;
  if (ndim > 0) memcpy(r->shape, shape, (size_t)ndim * sizeof *shape);
  return r;
}

c_side_request* c_side_request_python_heavy(manypy_object* object, float* input,
                                            size_t input_bytes) {
  static const int64_t shape[2] = {4, 64};
  static const char* const outputs[] = {"logits", "norm", NULL};
  c_side_request* r = c_side_request_tensor(object, input, input_bytes, 2, shape);
  if (!r) return NULL;
  r->heavy_kwargs = 1;
  r->take = outputs;
  return r;
}

void c_side_request_free(c_side_request* request) { free(request); }

/* ---- one call ------------------------------------------------------------ */

/* The per-call arguments of a request without prepared ones. */
static manypy_status* make_args(const c_side_request* r, manypy_value** args,
                                manypy_value** kwargs) {
  manypy_value* x = NULL;
  manypy_status* s =
      manypy_value_new_tensor_from_buffer(r->input, r->input_bytes, (DLDataType){kDLFloat, 32, 1},
                                          r->ndim, r->shape, NULL, 0, NULL, NULL, &x);
  if (s) return s;
  *args = manypy_value_new_tuple();
  s = manypy_value_append(*args, x); /* takes x, also when *args is NULL */
  if (!s && r->heavy_kwargs) {
    *kwargs = manypy_value_new_dict();
    s = manypy_value_dict_set(*kwargs, "steps", manypy_value_new_int64(5));
    if (!s) s = manypy_value_dict_set(*kwargs, "normalize", manypy_value_new_bool(0));
  }
  return s;
}

/* Reads one result tensor as a consumer would, then releases it. */
static manypy_status* take_tensor(const manypy_value* value) {
  DLManagedTensor* t = NULL;
  manypy_status* s = manypy_value_get_tensor(value, &t);
  if (!s) t->deleter(t);
  return s;
}

static manypy_status* take_result(const c_side_request* r, const manypy_value* out) {
  if (manypy_value_get_kind(out) == MANYPY_VALUE_TENSOR) return take_tensor(out);
  manypy_status* s = NULL;
  for (const char* const* key = r->take; key && *key && !s; ++key) {
    const manypy_value* item = NULL;
    s = manypy_value_dict_get(out, *key, &item);
    if (!s) s = take_tensor(item);
  }
  return s;
}

/* One call: its arguments (unless prepared), the call, its result read and
 * freed, everything it made freed. */
static manypy_status* one_call(const c_side_request* r) {
  manypy_value *args = NULL, *kwargs = NULL, *out = NULL;
  manypy_status* s = r->args ? NULL : make_args(r, &args, &kwargs);
  if (!s) {
    s = manypy_object_call(r->object, NULL, r->args ? r->args : args, r->args ? r->kwargs : kwargs,
                           NULL, &out);
  }
  if (!s) s = take_result(r, out);
  manypy_value_free(out);
  manypy_value_free(kwargs);
  manypy_value_free(args);
  return s;
}

int c_side_latencies(const c_side_request* request, int64_t* latencies_ns, size_t n, char* error,
                     size_t error_size) {
  if (!request || (n > 0 && !latencies_ns)) {
    return fail_message("c_side_latencies: NULL request or latencies", error, error_size);
  }
  for (size_t i = 0; i < n; ++i) {
    const int64_t start = now_ns();
    manypy_status* s = one_call(request);
    latencies_ns[i] = now_ns() - start;
    if (s) return fail(s, error, error_size);
  }
  return 0;
}

/* ---- throughput ---------------------------------------------------------- */

/* A barrier that can be called off: released when the last of `expected`
 * threads arrives (as pthread_barrier_wait would), or at once for all when
 * the run is called off because a thread could not be made. */
typedef struct start_gate {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int arrived, expected;
  int state; /* 0 closed, 1 open, -1 called off */
} start_gate;

/* 1 when every thread arrived, 0 when the run was called off. */
static int gate_wait(start_gate* g) {
  pthread_mutex_lock(&g->mu);
  if (++g->arrived == g->expected && g->state == 0) {
    g->state = 1;
    pthread_cond_broadcast(&g->cv);
  }
  while (g->state == 0) pthread_cond_wait(&g->cv, &g->mu);
  const int open = g->state == 1;
  pthread_mutex_unlock(&g->mu);
  return open;
}

static void gate_call_off(start_gate* g) {
  pthread_mutex_lock(&g->mu);
  g->state = -1;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
}

typedef struct throughput_run {
  const c_side_request* request;
  c_side_window window;
  int64_t window_ns;
  start_gate gate; /* C_SIDE_EACH_UNTIL_DEADLINE */
  atomic_int stop; /* C_SIDE_UNTIL_STOPPED */
} throughput_run;

typedef struct worker {
  throughput_run* run;
  uint64_t calls;
  manypy_status* status; /* the failed call's, or NULL */
} worker;

static void* worker_main(void* arg) {
  worker* w = arg;
  throughput_run* run = w->run;
  if (run->window == C_SIDE_EACH_UNTIL_DEADLINE) {
    if (!gate_wait(&run->gate)) return NULL;
    const int64_t end = now_ns() + run->window_ns;
    while (now_ns() < end) {
      if ((w->status = one_call(run->request)) != NULL) break;
      w->calls++;
    }
  } else {
    while (!atomic_load_explicit(&run->stop, memory_order_relaxed)) {
      if ((w->status = one_call(run->request)) != NULL) break;
      w->calls++;
    }
  }
  return NULL;
}

static void sleep_ns(int64_t ns) {
  struct timespec left = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
  while (nanosleep(&left, &left) != 0 && errno == EINTR) {
  }
}

int c_side_throughput(const c_side_request* request, int threads, double seconds,
                      c_side_window window, uint64_t* out_calls, int64_t* out_ns, char* error,
                      size_t error_size) {
  if (!request || !out_calls || !out_ns) {
    return fail_message("c_side_throughput: NULL request or out-pointer", error, error_size);
  }
  *out_calls = 0;
  *out_ns = 0;
  if (threads < 1 || threads > C_SIDE_MAX_THREADS) {
    return fail_message("c_side_throughput: threads must be 1 to 64", error, error_size);
  }
  if (!(seconds > 0 && seconds <= 86400)) {
    return fail_message("c_side_throughput: seconds must be in (0, 86400]", error, error_size);
  }
  if (window != C_SIDE_EACH_UNTIL_DEADLINE && window != C_SIDE_UNTIL_STOPPED) {
    return fail_message("c_side_throughput: unknown window", error, error_size);
  }
  throughput_run run = {
      .request = request, .window = window, .window_ns = (int64_t)(seconds * 1e9)};
  pthread_mutex_init(&run.gate.mu, NULL);
  pthread_cond_init(&run.gate.cv, NULL);
  run.gate.expected = threads;
  atomic_init(&run.stop, 0);
  worker workers[C_SIDE_MAX_THREADS];
  pthread_t ids[C_SIDE_MAX_THREADS];
  int made = 0, rc = 0;
  const int64_t start = now_ns();
  for (; made < threads; ++made) {
    workers[made] = (worker){&run, 0, NULL};
    const int e = pthread_create(&ids[made], NULL, worker_main, &workers[made]);
    if (e != 0) {
      char message[128];
      snprintf(message, sizeof message, "c_side_throughput: pthread_create: %s", strerror(e));
      rc = fail_message(message, error, error_size);
      break;
    }
  }
  if (rc != 0) {
    gate_call_off(&run.gate);
    atomic_store(&run.stop, 1);
  } else if (window == C_SIDE_UNTIL_STOPPED) {
    sleep_ns(run.window_ns);
    atomic_store(&run.stop, 1);
  }
  for (int i = 0; i < made; ++i) {
    pthread_join(ids[i], NULL);
    *out_calls += workers[i].calls;
    if (workers[i].status && rc == 0) {
      rc = fail(workers[i].status, error, error_size);
    } else {
      manypy_status_free(workers[i].status);
    }
  }
  *out_ns = now_ns() - start;
  pthread_cond_destroy(&run.gate.cv);
  pthread_mutex_destroy(&run.gate.mu);
  return rc;
}
