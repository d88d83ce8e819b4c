/* manypy_bench_serving's throughput runs (sections A, C and D): what a
 * configuration calls, N threads calling it for a measured time in rounds
 * whose order alternates, and the rows of its tables. */
#ifndef MANYPY_BENCH_SERVING_TPUT_H
#define MANYPY_BENCH_SERVING_TPUT_H

#include "harness.h"
#include "manypy.h"

/* One thing to call: a replicated object (manypy) or a TorchScript module
 * (host). */
typedef struct target {
  manypy_object* object;
  const manypy_call_options* options; /* NULL: MANYPY_ANY_INTERPRETER */
  manypy_script_module* script;
  const manypy_value* args;
  const manypy_value* kwargs;
  manypy_pool* pool; /* for torch.get_num_threads(); NULL for script */
} target;

/* Where the worker threads' wall time went while measuring, summed over
 * threads: on a CPU, waiting for a CPU, blocked (e.g. on a GIL). */
typedef struct thread_time {
  double wall, on_cpu, runqueue;
  int ok;
} thread_time;

/* A configuration's results, summed over its rounds. */
typedef struct tput_result {
  long calls;
  double elapsed; /* s: start of measuring to the last call's completion */
  samples lat;
  int torch_min, torch_max;
  cpu_use cpu;
  thread_time time;
} tput_result;

/* A configuration of a throughput section. */
typedef struct config {
  const char* name;
  const target* tgt;
  int threads;
  tput_result res;
} config;

manypy_status* target_call(const target* t, manypy_value** out);
manypy_call_options* pinned(int32_t index);
void tput_init(tput_result* r);
double tput_rate(const tput_result* r);
void tput_merge(tput_result* acc, tput_result* one);
double median_of(const double* v, int n);
double min_of(const double* v, int n);
void run_round(const target* tgt, int threads, double warmup, double seconds, tput_result* acc);
void run_configs(const char* section, config* cs, int n, int rounds, double warmup, double seconds);
void print_config_header(void);
void print_thread_time_note(void);
void print_config_row(config* c, double base);

#endif
