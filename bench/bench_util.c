#include "bench_util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

double now_s(void) { return (double)now_ns() * 1e-9; }

void sleep_s(double seconds) {
  struct timespec ts;
  ts.tv_sec = (time_t)seconds;
  ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

void progress(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("[bench] ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

/* "<program>: <message>\n" and `trailer` on stderr, then exit(status). */
static void vdie(int status, const char* trailer, const char* fmt, va_list ap)
    __attribute__((format(printf, 3, 0), noreturn));
static void vdie(int status, const char* trailer, const char* fmt, va_list ap) {
  fflush(stdout);
  fprintf(stderr, "%s: ", bench_program);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  if (trailer) fputs(trailer, stderr);
  exit(status);
}

void die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vdie(1, NULL, fmt, ap);
}

void die_usage(const char* usage, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vdie(2, usage, fmt, ap);
}

void die_status(const char* what, manypy_status* st) {
  fflush(stdout);
  fprintf(stderr, "%s: %s failed: %s: %s\n", bench_program, what,
          manypy_code_name(manypy_status_code(st)), manypy_status_message(st));
  const char* tb = manypy_status_traceback(st);
  if (tb && *tb) fprintf(stderr, "%s", tb);
  manypy_status_free(st);
  exit(1);
}

void* xmalloc(size_t n) {
  void* p = malloc(n ? n : 1);
  if (!p) die("out of memory (%zu bytes)", n);
  return p;
}

const char* verdict(int ok) { return ok ? "meets" : "misses"; }

int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int cmp_long(const void* a, const void* b) {
  long x = *(const long*)a, y = *(const long*)b;
  return (x > y) - (x < y);
}

int cmp_i64(const void* a, const void* b) {
  int64_t x = *(const int64_t*)a, y = *(const int64_t*)b;
  return (x > y) - (x < y);
}

void* bench_threads_init(bench_threads* t, int count, size_t worker_size) {
  atomic_init(&t->ctl.warm_stop, 0);
  atomic_init(&t->ctl.stop, 0);
  if (count < 1 || worker_size < sizeof(bench_control*)) die("bench_threads_init: bad arguments");
  if (pthread_barrier_init(&t->ctl.measure, NULL, (unsigned)count + 1) != 0) {
    die("pthread_barrier_init failed");
  }
  t->count = count;
  t->ids = xmalloc((size_t)count * sizeof *t->ids);
  t->workers = calloc((size_t)count, worker_size);
  if (!t->workers) die("out of memory");
  t->worker_size = worker_size;
  const bench_control* ctl = &t->ctl;
  /* memcpy: the first member of a struct the harness does not know. */
  for (int k = 0; k < count; ++k) memcpy(t->workers + (size_t)k * worker_size, &ctl, sizeof ctl);
  return t->workers;
}

void bench_threads_start(bench_threads* t, void* (*main)(void*)) {
  for (int k = 0; k < t->count; ++k) {
    int rc = pthread_create(&t->ids[k], NULL, main, t->workers + (size_t)k * t->worker_size);
    if (rc != 0) die("pthread_create: %s", strerror(rc));
  }
}

void bench_threads_warm_up(bench_threads* t, double seconds) {
  sleep_s(seconds);
  atomic_store(&t->ctl.warm_stop, 1);
  pthread_barrier_wait(&t->ctl.measure); /* every warm-up call has completed */
}

void bench_threads_finish(bench_threads* t, double seconds) {
  sleep_s(seconds);
  atomic_store(&t->ctl.stop, 1);
  for (int k = 0; k < t->count; ++k) pthread_join(t->ids[k], NULL);
  pthread_barrier_destroy(&t->ctl.measure);
  free(t->ids);
  t->ids = NULL;
  t->workers = NULL; /* the caller's to free */
}

int bench_worker_warm_up(bench_control* ctl, int ok, bench_call_fn call, void* worker) {
  while (ok && !atomic_load(&ctl->warm_stop)) ok = call(worker, 0);
  pthread_barrier_wait(&ctl->measure);
  return ok;
}

long bench_worker_measure(bench_control* ctl, bench_call_fn call, void* worker) {
  long calls = 0;
  while (!atomic_load(&ctl->stop)) {
    if (!call(worker, 1)) return -1;
    ++calls;
  }
  return calls;
}

manypy_pool* bench_make_pool(size_t interpreters, manypy_thread_mode mode) {
  manypy_pool_options* opts = manypy_pool_options_new();
  if (!opts) die("manypy_pool_options_new returned NULL");
  CHECK(manypy_pool_options_set_interpreters(opts, interpreters),
        "manypy_pool_options_set_interpreters");
  CHECK(manypy_pool_options_set_thread_mode(opts, mode), "manypy_pool_options_set_thread_mode");
  manypy_pool* pool = NULL;
  manypy_status* st = manypy_pool_create(opts, &pool);
  manypy_pool_options_free(opts);
  if (st) die_status("manypy_pool_create", st);
  if (manypy_pool_size(pool) != interpreters) {
    die("manypy_pool_size is %zu, expected %zu", manypy_pool_size(pool), interpreters);
  }
  return pool;
}
