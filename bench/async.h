/* manypy_bench_async's shared pieces: the run's settings and inputs, and the
 * driver that keeps asynchronous calls in flight. The sections are in
 * async.c (A, B, D) and async_batching.c (C). */
#ifndef MANYPY_BENCH_ASYNC_H
#define MANYPY_BENCH_ASYNC_H

#include <semaphore.h>
#include <stdatomic.h>

#include "harness.h"
#include "manypy.h"

typedef struct async_run {
  const char* archives;
  const char* python;    /* the worker pool's interpreter */
  const char* peers_dir; /* bench/peers: worker.py */
  double seconds;        /* measured per configuration and round */
  double warmup;
  int rounds;
} async_run;

/* One asynchronous caller's bookkeeping: the callback counts completions,
 * records each latency (when `record`), and frees a slot for the next
 * submission. Any failed call ends the run. */
typedef struct async_tally {
  sem_t slots; /* calls that may still be submitted */
  atomic_long completed;
  atomic_int record;
  samples lat; /* under mu: latencies of recorded calls */
  pthread_mutex_t mu;
} async_tally;

/* The user_data of one call: its tally and when it was submitted. */
typedef struct async_call {
  async_tally* tally;
  int64_t submitted_ns;
} async_call;

void async_tally_init(async_tally* t, int in_flight);
void async_tally_destroy(async_tally* t);
/* The manypy_call_done_fn of every call the benchmark submits. */
void async_done(void* user_data, manypy_value* result, manypy_status* status);

/* Section C: ResNet-18 batch-1 requests from 16 clients, unbatched, through
 * a batcher, and through the worker pool of bench/peers. */
void section_batching(const async_run* run);

#endif
