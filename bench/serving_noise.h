/* manypy_bench_serving's CPU accounting: "ours" is this process and its
 * pipe-echo children (section B), "other" everything else on the machine;
 * every measuring window also goes into the run's noise summary. */
#ifndef MANYPY_BENCH_SERVING_NOISE_H
#define MANYPY_BENCH_SERVING_NOISE_H

#include <sys/types.h>

#include "harness.h"

enum { SERVING_MAX_CHILDREN = 2 };

/* The pipe-echo children: their CPU is ours, not "other". */
extern pid_t g_children[SERVING_MAX_CHILDREN];
extern int g_child_count;

/* Windows shorter than this (a few clock ticks) say nothing about load. */
extern const double kMinCpuWindow;

/* Every window cpu_record has seen, for the closing summary. */
extern noise_tally g_noise;

cpu_sample cpu_now_ours(void);
/* cpu_add into u, and the window into g_noise. */
void cpu_record(cpu_use* u, cpu_sample a, cpu_sample b);
/* "cpu other" for a table: "-" when the window was too short to tell. */
const char* other_cell(const cpu_use* u, char* buf, size_t len);

#endif
