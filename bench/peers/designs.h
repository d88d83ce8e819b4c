/* The designs the peers benchmark compares, each run on one model with N
 * callers (or N processes) in the calling process:
 *
 *   manypy       a pool of N interpreters, N threads, MANYPY_ANY_INTERPRETER
 *   worker pool  N worker processes (worker_pool.h), N threads
 *   shared GIL   a pool of 1 interpreter shared by N threads
 *   N processes  N plain python3 processes, no IPC: the ceiling (plain.h)
 *   TorchScript  the model's *_script.pt on the host's libtorch, N threads
 *   AOTInductor  the model's .pt2 package on the host's libtorch, N threads
 *                (torch 2.x builds; models without a package skip it)
 *
 * Each one first checks the model's output on every interpreter, worker or
 * process (and dies if it is wrong), then warms up and measures. */
#ifndef MANYPY_BENCH_PEERS_DESIGNS_H
#define MANYPY_BENCH_PEERS_DESIGNS_H

#include "harness.h"
#include "models.h"

typedef enum design { D_MANYPY, D_POOL, D_SHARED, D_PLAIN, D_SCRIPT, D_AOTI, DESIGN_COUNT } design;

extern const char* const design_names[DESIGN_COUNT];

typedef struct run_config {
  design d;
  int n;
  model_case* m; /* loaded */
  const char* archives;
  const char* python;    /* the workers' and plain processes' interpreter */
  const char* peers_dir; /* where worker.py and plain_loop.py are */
  double warmup, seconds;
} run_config;

typedef struct run_result {
  long calls;
  double elapsed; /* s measured (summed over rounds) */
  double rate;    /* calls/s (summed over processes for N processes) */
  double first_s; /* start until the first request was served */
  double all_s;   /* start until every interpreter/worker/process served one */
  long pss_kb;    /* every process of the design, at the end of measuring */
  cpu_use cpu;
  samples lat;
} run_result;

/* Whether design `d` runs on model `m` in this build (AOTInductor: where
 * manypy has it, for models with a package). */
int design_applies(design d, const model_case* m);

/* Runs one design in this process. */
void design_run(const run_config* c, run_result* r);

#endif
