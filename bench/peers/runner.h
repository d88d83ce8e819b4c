/* Each design runs in a child process of its own (this same program,
 * re-executed with --child): its memory is then its own, its start-up is
 * a cold start (manypy's interpreters are not reused from an earlier pool),
 * and nothing of one design is left running under the next. */
#ifndef MANYPY_BENCH_PEERS_RUNNER_H
#define MANYPY_BENCH_PEERS_RUNNER_H

#include "designs.h"

/* Runs c in a child process started as `argv0 <base_args...> --child D,N,M,FD`
 * and returns its result. Dies if the child fails. */
void runner_run(const run_config* c, int model_index, char* const* base_args, run_result* r);

/* In the child: runs the design and writes its result to fd. */
void runner_child(const run_config* c, int fd);

/* Adds a round's result to the accumulated one (rates, start-up times and
 * memory are averaged by runner_mean over the rounds). */
void runner_merge(run_result* acc, run_result* one);
void runner_mean(run_result* acc, int rounds);

#endif
