/* manypy_bench_scaling's section A: start-up time and private memory of a
 * plain python3 importing torch, of one interpreter in a fresh process, and
 * of pools of 1 and of N in this process. */
#ifndef MANYPY_BENCH_SCALING_START_H
#define MANYPY_BENCH_SCALING_START_H

/* The Python the interpreters embed (bench/CMakeLists.txt sets it per
 * build leg), for the plain process on the same torch. */
#ifndef PLAIN_PYTHON
#define PLAIN_PYTHON "/usr/bin/python3"
#endif
#define PLAIN_RUNS 3

/* Private memory of a process from smaps_rollup, in kB. Private_Clean counts
 * file pages (library text) that only this process maps; once a second
 * namespace maps the same library file, those pages move to Shared_Clean,
 * so Private_Dirty alone is the steadier per-interpreter cost. */
typedef struct private_mem {
  long clean;
  long dirty;
} private_mem;

private_mem private_mem_self(void);

/* Section A's measurements, for its report. */
typedef struct start_up {
  double plain_s[PLAIN_RUNS], one_s[PLAIN_RUNS];
  private_mem plain_mem[PLAIN_RUNS], one_mem[PLAIN_RUNS];
  double plain_import;
  long plain_total;
  long plain_dirty;
  double one_start;
  long one_total;
  long one_dirty;
  double start1;
  double startN;
  private_mem m0;
  private_mem m1;
  private_mem m2;
  int copies1;
  int copiesN;
  double others; /* cores other processes used meanwhile */
} start_up;

/* A. Plain python3 vs one interpreter in a fresh process (interleaved),
 * then pools of 1 and of new_interps in this process. */
void measure_start_up(start_up* a, int new_interps);
/* A's table and ratios. */
void report_start_up(const start_up* a, int new_interps);

#endif
