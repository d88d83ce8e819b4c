/* What the benchmarks share: clocks, progress lines, dying on a failed call
 * or a wrong command line, the thread harness of the throughput runs,
 * sorting helpers. Each program sets bench_program to its name. */
#ifndef MANYPY_BENCH_UTIL_H
#define MANYPY_BENCH_UTIL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "manypy.h"

/* The program's name, for error messages. */
extern const char* bench_program;

int64_t now_ns(void);
double now_s(void);
void sleep_s(double seconds);

/* A "[bench] ..." line on stderr. */
void progress(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

/* Print "<program>: <message>" and exit 1. */
void die(const char* fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Print "<program>: <message>", then `usage` (when not NULL), and exit 2:
 * the command line was wrong. */
void die_usage(const char* usage, const char* fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

/* Print a failed status (code, message, traceback), free it, exit 1. */
void die_status(const char* what, manypy_status* st) __attribute__((noreturn));

#define CHECK(call, what)                   \
  do {                                      \
    manypy_status* st_ = (call);            \
    if (st_ != NULL) die_status(what, st_); \
  } while (0)

void* xmalloc(size_t n);

/* "meets" or "misses", for target tables. */
const char* verdict(int ok);

/* The thread harness of the throughput runs. Each worker thread warms up
 * (calling until warm_stop), waits at `measure` with the main thread, then
 * calls until `stop`. The main thread:
 *
 *   bench_threads t;
 *   bench_threads_init(&t, n);                 // workers[k].ctl = &t.ctl
 *   bench_threads_start(&t, workers, sizeof *workers, worker_main);
 *   bench_threads_warm_up(&t, warmup);         // returns when measuring starts
 *   ... sample clocks ...
 *   bench_threads_finish(&t, seconds);         // stops, joins every worker
 *   ... sample clocks, sum the workers' results ... */
typedef struct bench_control {
  atomic_int warm_stop;
  atomic_int stop;
  pthread_barrier_t measure; /* workers + main: start of the measured phase */
} bench_control;

typedef struct bench_threads {
  bench_control ctl;
  int count;
  pthread_t* ids;
} bench_threads;

void bench_threads_init(bench_threads* t, int count);
/* Starts thread k on `main(workers + k * worker_size)`. */
void bench_threads_start(bench_threads* t, void* workers, size_t worker_size,
                         void* (*main)(void*));
/* Lets the workers warm up for `seconds`, then ends the warm-up and returns
 * once every worker has finished its last warm-up call. */
void bench_threads_warm_up(bench_threads* t, double seconds);
/* Measures for `seconds`, stops the workers and joins them. */
void bench_threads_finish(bench_threads* t, double seconds);

/* qsort comparators. */
int cmp_double(const void* a, const void* b);
int cmp_long(const void* a, const void* b);
int cmp_i64(const void* a, const void* b);

/* A pool of `interpreters` in thread mode `mode`, or dies: the benchmarks'
 * common set-up. */
manypy_pool* bench_make_pool(size_t interpreters, manypy_thread_mode mode);

#endif
