#include "serving_tput.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serving_noise.h"

manypy_status* target_call(const target* t, manypy_value** out) {
  if (t->script) return manypy_script_call(t->script, NULL, t->args, t->kwargs, NULL, out);
  return manypy_object_call(t->object, NULL, t->args, t->kwargs, t->options, out);
}

manypy_call_options* pinned(int32_t index) {
  manypy_call_options* o = manypy_call_options_new();
  if (!o) die("manypy_call_options_new returned NULL");
  CHECK(manypy_call_options_set_interpreter(o, index), "manypy_call_options_set_interpreter");
  return o;
}

/* The calling thread's time on a CPU and waiting for one (runnable but not
 * running), in seconds, from /proc/thread-self/schedstat. 0 if unavailable. */
static int thread_schedstat(double* on_cpu, double* runqueue) {
  FILE* f = fopen("/proc/thread-self/schedstat", "r");
  unsigned long long run = 0, wait = 0;
  int ok = f && fscanf(f, "%llu %llu", &run, &wait) == 2;
  if (f) fclose(f);
  *on_cpu = ok ? (double)run * 1e-9 : 0;
  *runqueue = ok ? (double)wait * 1e-9 : 0;
  return ok;
}

typedef struct worker {
  bench_control* ctl; /* first: bench_threads_init sets it */
  const target* tgt;
  int torch_min, torch_max; /* torch.get_num_threads() in each interpreter */
  samples lat;
  long calls;   /* completed in the measured phase */
  double t_end; /* when its last measured call completed */
  thread_time time;
  char error[512];
} worker;

static int worker_fail(worker* w, const char* what, manypy_status* st) {
  snprintf(w->error, sizeof w->error, "%s: %s: %s", what, manypy_code_name(manypy_status_code(st)),
           manypy_status_message(st));
  manypy_status_free(st);
  return 0;
}

/* One call; its latency recorded when measured. */
static int worker_call(void* arg, int record) {
  worker* w = arg;
  manypy_value* r = NULL;
  const int64_t t0 = now_ns();
  manypy_status* st = target_call(w->tgt, &r);
  const int64_t t1 = now_ns();
  if (st) return worker_fail(w, w->tgt->script ? "manypy_script_call" : "manypy_object_call", st);
  manypy_value_free(r);
  if (record) samples_push(&w->lat, t1 - t0);
  return 1;
}

/* torch.get_num_threads() as this thread sees it in each interpreter. */
static int worker_torch_threads(worker* w) {
  w->torch_min = INT32_MAX;
  w->torch_max = 0;
  if (!w->tgt->pool) return 1;
  for (size_t i = 0; i < manypy_pool_size(w->tgt->pool); ++i) {
    manypy_value* v = NULL;
    int64_t n = 0;
    manypy_status* st = manypy_pool_eval(w->tgt->pool, (int32_t)i, "torch.get_num_threads()", &v);
    if (!st) st = manypy_value_get_int64(v, &n);
    manypy_value_free(v);
    if (st) return worker_fail(w, "manypy_pool_eval(\"torch.get_num_threads()\")", st);
    if (n < w->torch_min) w->torch_min = (int)n;
    if (n > w->torch_max) w->torch_max = (int)n;
  }
  return 1;
}

static void* worker_main(void* arg) {
  worker* w = arg;
  /* Warm-up: at least one call, until the main thread says stop. */
  const int ok = worker_torch_threads(w) && worker_call(w, 0);
  if (!bench_worker_warm_up(w->ctl, ok, worker_call, w)) return NULL;
  double cpu0, rq0, cpu1, rq1;
  const double t0 = now_s();
  w->time.ok = thread_schedstat(&cpu0, &rq0);
  const long calls = bench_worker_measure(w->ctl, worker_call, w);
  if (calls < 0) return NULL;
  w->calls = calls;
  w->t_end = now_s();
  w->time.ok = thread_schedstat(&cpu1, &rq1) && w->time.ok;
  w->time.wall = w->t_end - t0;
  w->time.on_cpu = cpu1 - cpu0;
  w->time.runqueue = rq1 - rq0;
  return NULL;
}

void tput_init(tput_result* r) {
  memset(r, 0, sizeof *r);
  r->torch_min = INT32_MAX;
  r->time.ok = 1;
}

double tput_rate(const tput_result* r) {
  return r->elapsed > 0 ? (double)r->calls / r->elapsed : 0.0;
}

/* Adds one round's counts to `acc` and frees the round's samples; the
 * latency samples are not kept (section D quotes throughput only). */
void tput_merge(tput_result* acc, tput_result* one) {
  acc->calls += one->calls;
  acc->elapsed += one->elapsed;
  acc->cpu.ours_s += one->cpu.ours_s;
  acc->cpu.other_s += one->cpu.other_s;
  acc->cpu.wall_s += one->cpu.wall_s;
  acc->time.wall += one->time.wall;
  acc->time.on_cpu += one->time.on_cpu;
  acc->time.runqueue += one->time.runqueue;
  acc->time.ok = acc->time.ok && one->time.ok;
  free(one->lat.v);
  one->lat.v = NULL;
}

/* The median of n values (the mean of the middle two for even n). */
double median_of(const double* v, int n) {
  double sorted[64];
  if (n <= 0 || n > 64) return NAN;
  memcpy(sorted, v, (size_t)n * sizeof *v);
  qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
  return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

double min_of(const double* v, int n) {
  double m = INFINITY;
  for (int k = 0; k < n; ++k) m = v[k] < m ? v[k] : m;
  return m;
}

/* One round: `threads` threads call `tgt` for `seconds` after `warmup`. */
void run_round(const target* tgt, int threads, double warmup, double seconds, tput_result* acc) {
  bench_threads t;
  worker* ws = bench_threads_init(&t, threads, sizeof *ws);
  for (int k = 0; k < threads; ++k) ws[k].tgt = tgt;
  bench_threads_start(&t, worker_main);
  bench_threads_warm_up(&t, warmup);
  const cpu_sample c0 = cpu_now_ours();
  const double t0 = c0.t;
  bench_threads_finish(&t, seconds);
  const cpu_sample c1 = cpu_now_ours();
  double t_end = t0;
  for (int k = 0; k < threads; ++k) {
    if (ws[k].error[0]) die("%s", ws[k].error);
    acc->calls += ws[k].calls;
    if (ws[k].t_end > t_end) t_end = ws[k].t_end;
    if (ws[k].torch_min < acc->torch_min) acc->torch_min = ws[k].torch_min;
    if (ws[k].torch_max > acc->torch_max) acc->torch_max = ws[k].torch_max;
    samples_append(&acc->lat, &ws[k].lat);
    acc->time.wall += ws[k].time.wall;
    acc->time.on_cpu += ws[k].time.on_cpu;
    acc->time.runqueue += ws[k].time.runqueue;
    acc->time.ok = acc->time.ok && ws[k].time.ok;
    free(ws[k].lat.v);
  }
  acc->elapsed += t_end - t0;
  cpu_record(&acc->cpu, c0, c1);
  free(ws);
}

/* Runs every configuration for `seconds` in total, split into `rounds`
 * rounds; the order is reversed every other round so that a change of load
 * on a shared machine falls on all configurations alike. */
void run_configs(const char* section, config* cs, int n, int rounds, double warmup,
                 double seconds) {
  for (int c = 0; c < n; ++c) tput_init(&cs[c].res);
  for (int r = 0; r < rounds; ++r) {
    for (int j = 0; j < n; ++j) {
      const int c = r % 2 == 0 ? j : n - 1 - j;
      progress("%s: %s, round %d/%d", section, cs[c].name, r + 1, rounds);
      run_round(cs[c].tgt, cs[c].threads, warmup, seconds / rounds, &cs[c].res);
    }
  }
}

void print_config_header(void) {
  printf("%-34s %10s %8s %9s %9s %7s %9s %8s %8s %8s %11s %9s %9s\n", "configuration", "calls/s",
         "vs base", "p50 ms", "p99 ms", "calls", "torch thr", "on cpu", "run q", "blocked",
         "cpu ms/call", "cpu ours", "cpu other");
}

void print_thread_time_note(void) {
  printf(
      "(on cpu / run q / blocked: shares of the worker threads' wall time spent running, "
      "runnable but waiting for a core, and blocked (e.g. on a GIL), from "
      "/proc/thread-self/schedstat; run q above a few %% means the cores were busy with "
      "something else; cpu ms/call: the callers' on-cpu time per call, which other processes "
      "change less than calls/s, though a busy VM host still slows every core)\n");
}

void print_config_row(config* c, double base) {
  char thr[32];
  if (c->tgt->pool == NULL) {
    snprintf(thr, sizeof thr, "host 1");
  } else if (c->res.torch_min == c->res.torch_max) {
    snprintf(thr, sizeof thr, "%d", c->res.torch_min);
  } else {
    snprintf(thr, sizeof thr, "%d-%d", c->res.torch_min, c->res.torch_max);
  }
  const double rate = tput_rate(&c->res);
  char oncpu[16] = "-", rq[16] = "-", blocked[16] = "-", per_call[16] = "-";
  const thread_time* tt = &c->res.time;
  if (tt->ok && tt->wall > 0) {
    double b = tt->wall - tt->on_cpu - tt->runqueue;
    if (b < 0) b = 0;
    snprintf(oncpu, sizeof oncpu, "%.0f%%", 100.0 * tt->on_cpu / tt->wall);
    snprintf(rq, sizeof rq, "%.0f%%", 100.0 * tt->runqueue / tt->wall);
    snprintf(blocked, sizeof blocked, "%.0f%%", 100.0 * b / tt->wall);
    if (c->res.calls > 0) {
      snprintf(per_call, sizeof per_call, "%.3f", 1e3 * tt->on_cpu / (double)c->res.calls);
    }
  }
  printf("%-34s %10.1f %7.2fx %9.3f %9.3f %7ld %9s %8s %8s %8s %11s %9.2f %9.2f\n", c->name, rate,
         base > 0 ? rate / base : 0.0, samples_quantile(&c->res.lat, 0.50) * 1e-6,
         samples_quantile(&c->res.lat, 0.99) * 1e-6, c->res.calls, thr, oncpu, rq, blocked,
         per_call, cpu_cores_ours(&c->res.cpu), cpu_cores_other(&c->res.cpu));
}
