/*
 * Serving: T host threads send requests to one model as fast as they can,
 * the way a multi-threaded service would, and every call's latency is kept
 * so the demo can report percentiles, not just a mean.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep, pthread barriers */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "demo.h"

typedef struct serve_control {
  manypy_object* object;
  const demo_model* model;
  const manypy_call_options* options;
  atomic_int warm_stop;      /* end of the unmeasured warm-up */
  atomic_int stop;           /* end of the measured phase */
  pthread_barrier_t measure; /* workers + main: every warm-up call is done */
} serve_control;

typedef struct serve_worker {
  serve_control* ctl;
  double* latencies_ms; /* one per measured call */
  size_t count, capacity;
  double t_end; /* when its last measured call completed */
  char error[1024];
} serve_worker;

static void sleep_s(double seconds) {
  struct timespec ts;
  ts.tv_sec = (time_t)seconds;
  ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* One request. The result is freed unread: correctness was checked before
 * serving, on every interpreter. On failure fills w->error, returns 0. */
static int serve_call(serve_worker* w) {
  manypy_value* result = NULL;
  manypy_status* st = manypy_object_call(w->ctl->object, NULL, w->ctl->model->args,
                                         w->ctl->model->kwargs, w->ctl->options, &result);
  if (st) {
    snprintf(w->error, sizeof w->error, "%s: %s: %s\n%s", w->ctl->model->name,
             manypy_code_name(manypy_status_code(st)), manypy_status_message(st),
             manypy_status_traceback(st));
    manypy_status_free(st);
    return 0;
  }
  manypy_value_free(result);
  return 1;
}

static void* serve_thread(void* arg) {
  serve_worker* w = arg;
  serve_control* ctl = w->ctl;
  /* Warm-up: the first call on a new thread sets up its state in the
   * interpreter; that is start-up cost, not serving latency. */
  int ok = serve_call(w);
  while (ok && !atomic_load(&ctl->warm_stop)) ok = serve_call(w);
  pthread_barrier_wait(&ctl->measure);
  while (ok && !atomic_load(&ctl->stop)) {
    const double t0 = demo_now_s();
    ok = serve_call(w);
    const double t1 = demo_now_s();
    if (!ok) break;
    if (w->count == w->capacity) {
      w->capacity = w->capacity ? 2 * w->capacity : 1024;
      w->latencies_ms = realloc(w->latencies_ms, w->capacity * sizeof(double));
      if (!w->latencies_ms) {
        snprintf(w->error, sizeof w->error, "out of memory");
        break;
      }
    }
    w->latencies_ms[w->count++] = (t1 - t0) * 1e3;
    w->t_end = t1;
  }
  return NULL;
}

/* CPU time in clock ticks used by this process and by the whole machine
 * (non-idle), to tell a disturbed measurement from a real result on a
 * shared machine. 0 where /proc is unavailable. */
static void cpu_ticks(unsigned long long* self, unsigned long long* machine) {
  *self = *machine = 0;
  FILE* f = fopen("/proc/self/stat", "r");
  if (f) {
    char buf[2048];
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    const char* p = strrchr(buf, ')'); /* the command name may hold spaces */
    unsigned long long user = 0, sys = 0;
    if (p &&
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &user, &sys) == 2) {
      *self = user + sys;
    }
  }
  f = fopen("/proc/stat", "r");
  if (f) {
    unsigned long long v[8] = {0};
    if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
               &v[5], &v[6], &v[7]) == 8) {
      *machine = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]; /* all but idle and iowait */
    }
    fclose(f);
  }
}

static int cmp_double(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted values. */
static double percentile(const double* sorted, size_t n, double p) {
  if (n == 0) return 0.0;
  size_t rank = (size_t)(p / 100.0 * (double)n + 0.999999);
  if (rank < 1) rank = 1;
  if (rank > n) rank = n;
  return sorted[rank - 1];
}

demo_serve_result demo_serve(manypy_object* object, const demo_model* m, int threads,
                             double warmup_s, double seconds) {
  /* Any interpreter: the pool gives each call a free one (or the least
   * loaded), exactly what a service wants. One options object serves every
   * thread: options are read-only during calls. */
  manypy_call_options* options = manypy_call_options_new();
  if (!options) demo_die("out of memory");
  demo_check(manypy_call_options_set_interpreter(options, MANYPY_ANY_INTERPRETER),
             "manypy_call_options_set_interpreter");
  /* The model id reaches the sampled profile of every operator it runs. */
  demo_check(manypy_call_options_set_context(options, m->name, "demo"),
             "manypy_call_options_set_context");

  serve_control ctl = {.object = object, .model = m, .options = options};
  atomic_init(&ctl.warm_stop, 0);
  atomic_init(&ctl.stop, 0);
  if (pthread_barrier_init(&ctl.measure, NULL, (unsigned)threads + 1) != 0) {
    demo_die("pthread_barrier_init failed");
  }
  serve_worker* ws = calloc((size_t)threads, sizeof *ws);
  pthread_t* tids = calloc((size_t)threads, sizeof *tids);
  if (!ws || !tids) demo_die("out of memory");
  for (int k = 0; k < threads; ++k) {
    ws[k].ctl = &ctl;
    const int rc = pthread_create(&tids[k], NULL, serve_thread, &ws[k]);
    if (rc != 0) demo_die("pthread_create: %s", strerror(rc));
  }
  sleep_s(warmup_s);
  atomic_store(&ctl.warm_stop, 1);
  pthread_barrier_wait(&ctl.measure);
  unsigned long long self0, machine0, self1, machine1;
  cpu_ticks(&self0, &machine0);
  const double t0 = demo_now_s();
  sleep_s(seconds);
  atomic_store(&ctl.stop, 1);
  for (int k = 0; k < threads; ++k) pthread_join(tids[k], NULL);
  cpu_ticks(&self1, &machine1);
  const double wall = demo_now_s() - t0;
  pthread_barrier_destroy(&ctl.measure);
  manypy_call_options_free(options);

  /* Merge every thread's latencies. Calls in flight when time ran out are
   * counted, so elapsed runs to the last completion, not to `seconds`. */
  size_t total = 0;
  double t_end = t0;
  for (int k = 0; k < threads; ++k) {
    if (ws[k].error[0]) demo_die("serving failed: %s", ws[k].error);
    total += ws[k].count;
    if (ws[k].t_end > t_end) t_end = ws[k].t_end;
  }
  double* all = malloc((total ? total : 1) * sizeof(double));
  if (!all) demo_die("out of memory");
  size_t n = 0;
  for (int k = 0; k < threads; ++k) {
    if (ws[k].count) memcpy(all + n, ws[k].latencies_ms, ws[k].count * sizeof(double));
    n += ws[k].count;
    free(ws[k].latencies_ms);
  }
  free(ws);
  free(tids);
  qsort(all, n, sizeof(double), cmp_double);
  demo_serve_result r;
  r.calls = (long)n;
  r.elapsed_s = t_end - t0;
  r.throughput = r.elapsed_s > 0 ? (double)n / r.elapsed_s : 0.0;
  r.p50_ms = percentile(all, n, 50.0);
  r.p99_ms = percentile(all, n, 99.0);
  const double others = ((double)(machine1 - machine0) - (double)(self1 - self0)) /
                        (double)sysconf(_SC_CLK_TCK) / wall;
  r.cpu_others = others > 0 ? others : 0.0;
  free(all);
  return r;
}
