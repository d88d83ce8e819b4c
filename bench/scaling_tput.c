#include "scaling_tput.h"

#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Workloads                                                                */
/* ------------------------------------------------------------------------ */

const workload kWorkloads[WL_COUNT] = {
    {"small torch ops", "op_loop(2000)", 2000},
    {"pure Python", "py_loop(200000)", 200000},
};

const char kDefineWorkloads[] =
    "def py_loop(n):\n"
    "    x = 0\n"
    "    for i in range(n):\n"
    "        x += i\n"
    "    return x\n"
    "import torch\n"
    "t = torch.ones(8, 8)\n"
    "def op_loop(n):\n"
    "    x = t\n"
    "    for _ in range(n):\n"
    "        x = x * 1.0000001 + 0.0\n"
    "    return float(x[0, 0])\n";

/* Checks one call's result, so a broken workload is not timed. Returns NULL
 * when the value is right, else a description. */
static const char* check_result(int wl, const manypy_value* v) {
  if (wl == WL_PY) {
    int64_t x;
    manypy_status* st = manypy_value_get_int64(v, &x);
    if (st) {
      manypy_status_free(st);
      return "py_loop did not return an int64";
    }
    const int64_t n = kWorkloads[WL_PY].iterations;
    return x == n * (n - 1) / 2 ? NULL : "py_loop returned a wrong sum";
  }
  double d;
  manypy_status* st = manypy_value_get_double(v, &d);
  if (st) {
    manypy_status_free(st);
    return "op_loop did not return a float";
  }
  const double expect = pow(1.0000001, (double)kWorkloads[WL_TORCH].iterations);
  return fabs(d - expect) < 1e-4 ? NULL : "op_loop returned a wrong value";
}

/* ------------------------------------------------------------------------ */
/* Throughput runs                                                          */
/* ------------------------------------------------------------------------ */

typedef struct worker {
  bench_control* ctl; /* first: bench_threads_init sets it */
  manypy_pool* pool;
  int32_t index;
  int wl;
  int64_t torch_threads; /* torch.get_num_threads() as this thread sees it */
  long calls;            /* completed in the measured phase */
  double t_end;          /* when its last measured call completed */
  char error[512];
} worker;

/* One call; on failure fills w->error and returns 0. */
static int worker_call(worker* w, int check) {
  manypy_value* v = NULL;
  manypy_status* st = manypy_pool_eval(w->pool, w->index, kWorkloads[w->wl].expression, &v);
  if (st) {
    snprintf(w->error, sizeof w->error, "manypy_pool_eval(%d, \"%s\"): %s: %s", w->index,
             kWorkloads[w->wl].expression, manypy_code_name(manypy_status_code(st)),
             manypy_status_message(st));
    manypy_status_free(st);
    return 0;
  }
  if (check) {
    const char* bad = check_result(w->wl, v);
    if (bad) {
      snprintf(w->error, sizeof w->error, "interpreter %d: %s", w->index, bad);
      manypy_value_free(v);
      return 0;
    }
  }
  manypy_value_free(v);
  return 1;
}

/* Asks the interpreter, from this thread, how many intra-op threads torch
 * will use for this thread's ops. */
static int worker_torch_threads(worker* w) {
  manypy_value* v = NULL;
  manypy_status* st = manypy_pool_eval(w->pool, w->index, "torch.get_num_threads()", &v);
  if (!st) st = manypy_value_get_int64(v, &w->torch_threads);
  manypy_value_free(v);
  if (st) {
    snprintf(w->error, sizeof w->error, "manypy_pool_eval(%d, \"torch.get_num_threads()\"): %s: %s",
             w->index, manypy_code_name(manypy_status_code(st)), manypy_status_message(st));
    manypy_status_free(st);
    return 0;
  }
  return 1;
}

/* Every call after the first: unchecked, measured or not. */
static int unchecked_call(void* w, int measured) {
  (void)measured;
  return worker_call(w, 0);
}

static void* worker_main(void* arg) {
  worker* w = arg;
  /* Warm-up: at least one (checked) call, until the main thread says stop. */
  const int ok = worker_call(w, 1) && worker_torch_threads(w);
  if (!bench_worker_warm_up(w->ctl, ok, unchecked_call, w)) return NULL;
  const long calls = bench_worker_measure(w->ctl, unchecked_call, w);
  if (calls < 0) return NULL;
  w->calls = calls;
  w->t_end = now_s();
  return NULL;
}

noise_tally g_noise;

/* Runs `threads` threads on `pool`, thread k pinned to interpreter
 * k % pool size, for `seconds` after `warmup` seconds. */
run_result run_throughput(manypy_pool* pool, int threads, int wl, double warmup, double seconds) {
  const size_t size = manypy_pool_size(pool);
  bench_threads t;
  worker* ws = bench_threads_init(&t, threads, sizeof *ws);
  for (int k = 0; k < threads; ++k) {
    ws[k].pool = pool;
    ws[k].index = (int32_t)((size_t)k % size);
    ws[k].wl = wl;
  }
  bench_threads_start(&t, worker_main);
  bench_threads_warm_up(&t, warmup);
  const cpu_sample c0 = cpu_now(NULL, 0);
  const double t0 = c0.t;
  bench_threads_finish(&t, seconds);
  long total_calls = 0;
  double t_end = t0;
  cpu_use cpu = {0, 0, 0};
  cpu_add(&cpu, c0, cpu_now(NULL, 0));
  run_result r = {0, INT32_MAX, 0, 0, 0};
  for (int k = 0; k < threads; ++k) {
    if (ws[k].error[0]) die("%s", ws[k].error);
    total_calls += ws[k].calls;
    if (ws[k].t_end > t_end) t_end = ws[k].t_end;
    if (ws[k].torch_threads < r.torch_threads_min) r.torch_threads_min = (int)ws[k].torch_threads;
    if (ws[k].torch_threads > r.torch_threads_max) r.torch_threads_max = (int)ws[k].torch_threads;
  }
  free(ws);
  const double elapsed = t_end - t0;
  r.throughput =
      elapsed > 0 ? (double)total_calls * (double)kWorkloads[wl].iterations / elapsed : 0.0;
  r.cpu_ours = cpu_cores_ours(&cpu);
  r.cpu_others = cpu_cores_other(&cpu);
  noise_tally_add(&g_noise, &cpu);
  return r;
}

noop_result time_noop_calls(manypy_pool* pool) {
  static int64_t ns[NOOP_CALLS];
  double t0 = 0;
  for (int i = 0; i < NOOP_WARMUP_CALLS + NOOP_CALLS; ++i) {
    if (i == NOOP_WARMUP_CALLS) t0 = now_s();
    manypy_value* v = NULL;
    const int64_t start = now_ns();
    CHECK(manypy_pool_eval(pool, 0, "1", &v), "manypy_pool_eval(\"1\")");
    if (i >= NOOP_WARMUP_CALLS) ns[i - NOOP_WARMUP_CALLS] = now_ns() - start;
    if (i == 0) {
      int64_t x = 0;
      CHECK(manypy_value_get_int64(v, &x), "manypy_value_get_int64");
      if (x != 1) die("eval(\"1\") returned %" PRId64, x);
    }
    manypy_value_free(v);
  }
  noop_result r;
  r.mean_us = (now_s() - t0) * 1e6 / NOOP_CALLS;
  qsort(ns, NOOP_CALLS, sizeof ns[0], cmp_i64);
  r.p50_us = ns[NOOP_CALLS / 2] * 1e-3;
  r.p99_us = ns[NOOP_CALLS * 99 / 100] * 1e-3;
  return r;
}
