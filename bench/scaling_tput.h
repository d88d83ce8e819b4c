/* manypy_bench_scaling's pools, workloads and throughput runs (sections B
 * and C): threads pinned to interpreters running a workload for a measured
 * time, and the latency of a call that does nothing. */
#ifndef MANYPY_BENCH_SCALING_TPUT_H
#define MANYPY_BENCH_SCALING_TPUT_H

#include "harness.h"
#include "manypy.h"

#define NOOP_CALLS 20000
#define NOOP_WARMUP_CALLS 1000

enum { WL_TORCH = 0, WL_PY = 1, WL_COUNT = 2 };

typedef struct workload {
  const char* name;
  const char* expression; /* one call */
  long iterations;        /* loop iterations per call */
} workload;

extern const workload kWorkloads[WL_COUNT];
/* Defines the workloads' functions in an interpreter. */
extern const char kDefineWorkloads[];

typedef struct run_result {
  double throughput;     /* loop iterations per second, summed over threads */
  int torch_threads_min; /* torch.get_num_threads() seen by the workers */
  int torch_threads_max;
  double cpu_ours;   /* cores this process kept busy while measuring */
  double cpu_others; /* cores everything else on the machine kept busy */
} run_result;

/* Latency of eval("1") calls, in microseconds. */
typedef struct noop_result {
  double mean_us, p50_us, p99_us;
} noop_result;

/* The "other" CPU of every throughput run, for the closing summary. */
extern noise_tally g_noise;

/* Runs `threads` threads on `pool`, thread k pinned to interpreter
 * k % pool size, for `seconds` after `warmup` seconds. */
run_result run_throughput(manypy_pool* pool, int threads, int wl, double warmup, double seconds);
/* eval("1") NOOP_CALLS times on interpreter 0, from this thread. */
noop_result time_noop_calls(manypy_pool* pool);

#endif
