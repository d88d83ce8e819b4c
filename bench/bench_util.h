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
 * calls until `stop`. A worker is a struct whose first member is
 * `bench_control* ctl`. The main thread:
 *
 *   bench_threads t;
 *   worker* ws = bench_threads_init(&t, n, sizeof *ws);  // zeroed, ws[k].ctl set
 *   ... the rest of each worker ...
 *   bench_threads_start(&t, worker_main);
 *   bench_threads_warm_up(&t, warmup);         // returns when measuring starts
 *   ... sample clocks ...
 *   bench_threads_finish(&t, seconds);         // stops, joins every worker
 *   ... sample clocks, sum the workers' results, free(ws) ... */
typedef struct bench_control {
  atomic_int warm_stop;
  atomic_int stop;
  pthread_barrier_t measure; /* workers + main: start of the measured phase */
} bench_control;

typedef struct bench_threads {
  bench_control ctl;
  int count;
  pthread_t* ids;
  char* workers;
  size_t worker_size;
} bench_threads;

/* `count` workers of `worker_size` bytes, zeroed but for their first member,
 * the bench_control* of `t`. The caller frees them once it has read their
 * results. */
void* bench_threads_init(bench_threads* t, int count, size_t worker_size);
/* Starts thread k on `main(worker k)`. */
void bench_threads_start(bench_threads* t, void* (*main)(void*));
/* Lets the workers warm up for `seconds`, then ends the warm-up and returns
 * once every worker has finished its last warm-up call. */
void bench_threads_warm_up(bench_threads* t, double seconds);
/* Measures for `seconds`, stops the workers and joins them. */
void bench_threads_finish(bench_threads* t, double seconds);

/* A worker thread's side of the harness, around its own set-up and
 * accounting. `call(worker, measured)` makes one call and returns 0 when it
 * failed (having said why in the worker):
 *
 *   const int ok = <set-up and a first call succeeded>;
 *   if (!bench_worker_warm_up(w->ctl, ok, call, w)) return NULL;
 *   ... sample the thread's clocks ...
 *   const long calls = bench_worker_measure(w->ctl, call, w);
 *   if (calls < 0) return NULL;                // a call failed
 *
 * bench_worker_warm_up calls (measured = 0) while `ok` and until the main
 * thread ends the warm-up, then waits at `measure` with the others (also
 * when it failed, so the main thread is never left waiting); it returns
 * whether every call succeeded. bench_worker_measure calls (measured = 1)
 * until the main thread says stop and returns how many, or -1. */
typedef int (*bench_call_fn)(void* worker, int measured);
int bench_worker_warm_up(bench_control* ctl, int ok, bench_call_fn call, void* worker);
long bench_worker_measure(bench_control* ctl, bench_call_fn call, void* worker);

/* qsort comparators. */
int cmp_double(const void* a, const void* b);
int cmp_long(const void* a, const void* b);
int cmp_i64(const void* a, const void* b);

/* A pool of `interpreters` in thread mode `mode`, or dies: the benchmarks'
 * common set-up. */
manypy_pool* bench_make_pool(size_t interpreters, manypy_thread_mode mode);

#endif
