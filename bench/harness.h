/* The measuring harness the benchmarks share, beyond bench_util.h's clocks
 * and threads: latency samples and percentiles, the CPU that other processes
 * use meanwhile (the noise columns), proportional memory (Pss) of a set of
 * processes, files of the archives directory and whole transfers over
 * pipes, and the ratio table of targets with its meets/misses verdicts. */
#ifndef MANYPY_BENCH_HARNESS_H
#define MANYPY_BENCH_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bench_util.h"

/* ---- latency samples ------------------------------------------------ */

/* Latencies in nanoseconds. Zero-initialise; free v when done. */
typedef struct samples {
  int64_t* v;
  size_t n, cap;
} samples;

void samples_push(samples* s, int64_t x);
void samples_append(samples* s, const samples* from);
/* The q-quantile by nearest rank on the sorted samples, in ns (NAN when
 * empty). Sorts s. */
double samples_quantile(samples* s, double q);

/* ---- CPU noise ------------------------------------------------------ */

/* CPU time of "our" processes (this one, its waited-for children, and the
 * pids given) and of the whole machine, at one moment. */
typedef struct cpu_sample {
  unsigned long long ours, machine; /* clock ticks */
  double t;
} cpu_sample;

cpu_sample cpu_now(const pid_t* pids, int npids);

/* Accumulated CPU seconds of ours and of every other process, and wall
 * seconds, over one or more windows. */
typedef struct cpu_use {
  double ours_s, other_s, wall_s;
} cpu_use;

void cpu_add(cpu_use* u, cpu_sample a, cpu_sample b);
double cpu_cores_ours(const cpu_use* u);
/* Cores kept busy by other processes: the noise column. */
double cpu_cores_other(const cpu_use* u);

/* The noise of a whole run: how many measuring windows, their summed and
 * highest "other" cores. */
typedef struct noise_tally {
  int runs;
  double sum, max;
} noise_tally;

/* Counts a window (windows under 0.1 s, a few clock ticks, say nothing). */
void noise_tally_add(noise_tally* t, const cpu_use* u);

/* The closing lines of a benchmark: the load average, and the mean and
 * highest CPU of other processes over `what` (e.g. "the 12 throughput
 * runs"), with a warning when it was high enough to move the ratios. */
void noise_summary(const noise_tally* t, const char* what);

/* ---- memory --------------------------------------------------------- */

/* Pss of one process from /proc/PID/smaps_rollup (pid 0: this process), in
 * kB; -1 if it cannot be read. Pss splits every shared page among the
 * processes that map it, so the Pss of a set of processes adds up to the
 * memory they hold together. */
long pss_kb(pid_t pid);

/* ---- files ---------------------------------------------------------- */

/* A whole file DIR/NAME, 64-byte aligned; dies naming the file and what to
 * build when it is missing. */
void* read_archive_file(const char* dir, const char* name, size_t* size);
int file_exists(const char* path);

/* All `n` bytes from or to a pipe or socket, through short transfers and
 * EINTR: 0, or -1 at an error or end of file (errno says which, or 0 at
 * end of file). */
int read_full(int fd, void* buf, size_t n);
int write_full(int fd, const void* buf, size_t n);

/* ---- ratio table ---------------------------------------------------- */

/* A row of the targets table: "value >= target" (at_least) or
 * "value <= target". Prints and returns whether it meets the target. */
void ratio_header(const char* title);
int ratio_row(const char* what, double value, int at_least, double target);
void ratio_info(const char* what, double value);

#endif
