/* The ceiling: N plain python3 processes (plain_loop.py), each running the
 * model loop itself with no IPC, all started at the same moment. */
#ifndef MANYPY_BENCH_PEERS_PLAIN_H
#define MANYPY_BENCH_PEERS_PLAIN_H

#include "designs.h"

/* Starts n processes of `python` running `plain_py` on `archive`, waits
 * until each has checked its output, starts them together, and collects
 * their results: first_s/all_s until the first/last said ready, rate summed
 * over the processes, elapsed the longest one's, Pss summed. Dies if one
 * fails or its output is wrong. */
void plain_run(int n, const char* python, const char* plain_py, const char* archive, double warmup,
               double seconds, run_result* r);

#endif
