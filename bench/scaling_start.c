#define _GNU_SOURCE
#include "scaling_start.h"

#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "scaling_tput.h"

extern char** environ;

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

static long total_kb(private_mem m) { return m.clean + m.dirty; }

private_mem private_mem_self(void) {
  FILE* f = fopen("/proc/self/smaps_rollup", "r");
  if (!f) die("cannot open /proc/self/smaps_rollup: %s", strerror(errno));
  char line[256];
  private_mem m = {-1, -1};
  while (fgets(line, sizeof line, f)) {
    long v;
    if (sscanf(line, "Private_Clean: %ld kB", &v) == 1) m.clean = v;
    if (sscanf(line, "Private_Dirty: %ld kB", &v) == 1) m.dirty = v;
  }
  fclose(f);
  if (m.clean < 0 || m.dirty < 0) die("no Private_Clean/Private_Dirty in /proc/self/smaps_rollup");
  return m;
}

/* How many copies of libpython this process has mapped (one per link-map
 * namespace that holds an interpreter): mappings of libpython at offset 0. */
static int libpython_copies(void) {
  FILE* f = fopen("/proc/self/maps", "r");
  if (!f) return -1;
  char line[4096];
  int n = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi, off;
    char perms[8];
    if (sscanf(line, "%lx-%lx %7s %lx", &lo, &hi, perms, &off) != 4) continue;
    if (off == 0 && strstr(line, "/libpython3")) ++n;
  }
  fclose(f);
  return n;
}

static double mb(long kb) { return (double)kb / 1024.0; }

/* ------------------------------------------------------------------------ */
/* Plain-Python baseline                                                    */
/* ------------------------------------------------------------------------ */

static const char kPlainScript[] =
    "import time\n"
    "t0 = time.perf_counter()\n"
    "import torch\n"
    "dt = time.perf_counter() - t0\n"
    "pc = pd = 0\n"
    "with open('/proc/self/smaps_rollup') as f:\n"
    "    for line in f:\n"
    "        if line.startswith('Private_Clean:'): pc = int(line.split()[1])\n"
    "        elif line.startswith('Private_Dirty:'): pd = int(line.split()[1])\n"
    "print('%.6f %d %d' % (dt, pc, pd))\n";

/* Runs `argv` and parses its one output line "<seconds> <clean kB> <dirty kB>". */
static void run_measuring_child(char* const argv[], double* import_s, private_mem* mem) {
  const char* program = argv[0];
  int fds[2];
  if (pipe(fds) != 0) die("pipe: %s", strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  posix_spawn_file_actions_addclose(&fa, fds[1]);
  pid_t pid;
  int rc = posix_spawn(&pid, program, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (rc != 0) die("posix_spawn %s: %s", program, strerror(rc));
  char buf[512];
  size_t len = 0;
  ssize_t got;
  while (len < sizeof buf - 1 && (got = read(fds[0], buf + len, sizeof buf - 1 - len)) != 0) {
    if (got < 0) {
      if (errno == EINTR) continue;
      die("read from %s: %s", program, strerror(errno));
    }
    len += (size_t)got;
  }
  buf[len] = '\0';
  close(fds[0]);
  int status;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) die("waitpid: %s", strerror(errno));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    die("%s %s failed (status 0x%x), output: %s", program, argv[1], status, buf);
  }
  if (sscanf(buf, "%lf %ld %ld", import_s, &mem->clean, &mem->dirty) != 3) {
    die("cannot parse the output of %s: '%s'", program, buf);
  }
}

/* PLAIN_PYTHON -c kPlainScript: import time and private memory. */
static void run_plain_python(double* import_s, private_mem* mem) {
  char* argv[] = {(char*)PLAIN_PYTHON, (char*)"-c", (char*)kPlainScript, NULL};
  run_measuring_child(argv, import_s, mem);
}

/* This program with --start-one: a fresh process that starts one interpreter
 * and reports the wall time and the private memory it gained, measured like
 * the plain baseline (median of runs interleaved with it, so that load on a
 * shared machine falls on both alike). */
static void run_start_one(const char* self, double* start_s, private_mem* gained) {
  char* argv[] = {(char*)self, (char*)"--start-one", NULL};
  run_measuring_child(argv, start_s, gained);
}

void measure_start_up(start_up* a, int new_interps) {
  /* ---------------------------------------------------------------- A --- */
  progress("A: plain %s import torch and one interpreter in a fresh process, %d runs each",
           PLAIN_PYTHON, PLAIN_RUNS);
  const cpu_sample a_c0 = cpu_now(NULL, 0);
  for (int r = 0; r < PLAIN_RUNS; ++r) {
    run_plain_python(&a->plain_s[r], &a->plain_mem[r]);
    run_start_one("/proc/self/exe", &a->one_s[r], &a->one_mem[r]);
  }
  double s_sorted[PLAIN_RUNS], one_sorted[PLAIN_RUNS];
  long total_sorted[PLAIN_RUNS], dirty_sorted[PLAIN_RUNS];
  long one_total_sorted[PLAIN_RUNS], one_dirty_sorted[PLAIN_RUNS];
  for (int r = 0; r < PLAIN_RUNS; ++r) {
    s_sorted[r] = a->plain_s[r];
    total_sorted[r] = total_kb(a->plain_mem[r]);
    dirty_sorted[r] = a->plain_mem[r].dirty;
    one_sorted[r] = a->one_s[r];
    one_total_sorted[r] = total_kb(a->one_mem[r]);
    one_dirty_sorted[r] = a->one_mem[r].dirty;
  }
  qsort(s_sorted, PLAIN_RUNS, sizeof(double), cmp_double);
  qsort(total_sorted, PLAIN_RUNS, sizeof(long), cmp_long);
  qsort(dirty_sorted, PLAIN_RUNS, sizeof(long), cmp_long);
  qsort(one_sorted, PLAIN_RUNS, sizeof(double), cmp_double);
  qsort(one_total_sorted, PLAIN_RUNS, sizeof(long), cmp_long);
  qsort(one_dirty_sorted, PLAIN_RUNS, sizeof(long), cmp_long);
  a->plain_import = s_sorted[PLAIN_RUNS / 2];
  a->plain_total = total_sorted[PLAIN_RUNS / 2];
  a->plain_dirty = dirty_sorted[PLAIN_RUNS / 2];
  a->one_start = one_sorted[PLAIN_RUNS / 2];
  a->one_total = one_total_sorted[PLAIN_RUNS / 2];
  a->one_dirty = one_dirty_sorted[PLAIN_RUNS / 2];

  progress("A: pool of 1 (first interpreter)");
  a->m0 = private_mem_self();
  double t = now_s();
  manypy_pool* first = bench_make_pool(1, MANYPY_THREAD_MODE_DIRECT);
  a->start1 = now_s() - t;
  a->m1 = private_mem_self();
  a->copies1 = libpython_copies();

  /* While the first pool holds interpreter 0 no interpreter is idle, so a
   * pool of N makes N new ones, started at once. (A pool of 1+N here would
   * start 1+N new interpreters, not N: leased interpreters are not shared.) */
  progress("A: pool of %d more (started in parallel while the first is alive)", new_interps);
  t = now_s();
  manypy_pool* more = bench_make_pool((size_t)new_interps, MANYPY_THREAD_MODE_DIRECT);
  a->startN = now_s() - t;
  a->m2 = private_mem_self();
  a->copiesN = libpython_copies();
  cpu_use a_cpu = {0, 0, 0};
  cpu_add(&a_cpu, a_c0, cpu_now(NULL, 0));
  manypy_pool_destroy(more);
  manypy_pool_destroy(first);

  a->others = cpu_cores_other(&a_cpu);
}

void report_start_up(const start_up* a, int new_interps) {
  const long gain1 = total_kb(a->m1) - total_kb(a->m0), dgain1 = a->m1.dirty - a->m0.dirty;
  const long gainN = total_kb(a->m2) - total_kb(a->m1), dgainN = a->m2.dirty - a->m1.dirty;
  const double per_startN = a->startN / new_interps;
  const double per_gainN = (double)gainN / new_interps, per_dgainN = (double)dgainN / new_interps;
  const int all = 1 + new_interps;
  const double per_gain_all = (double)(total_kb(a->m2) - total_kb(a->m0)) / all;
  const double per_dgain_all = (double)(a->m2.dirty - a->m0.dirty) / all;

  printf(
      "\n== A. Start-up and memory (private = Private_Clean + Private_Dirty, smaps_rollup) ==\n");
  printf("%-50s %9s %14s %14s\n", "what", "wall", "private", "private dirty");
  printf("%-50s %8.3fs %11.1f MB %11.1f MB\n", "plain python3: import torch (median of 3)",
         a->plain_import, mb(a->plain_total), mb(a->plain_dirty));
  for (int r = 0; r < PLAIN_RUNS; ++r) {
    char run[64];
    snprintf(run, sizeof run, "  run %d", r + 1);
    printf("%-50s %8.3fs %11.1f MB %11.1f MB\n", run, a->plain_s[r], mb(total_kb(a->plain_mem[r])),
           mb(a->plain_mem[r].dirty));
  }
  printf("%-50s %8.3fs %+11.1f MB %+11.1f MB\n", "one interpreter, fresh process (median of 3)",
         a->one_start, mb(a->one_total), mb(a->one_dirty));
  for (int r = 0; r < PLAIN_RUNS; ++r) {
    char run[64];
    snprintf(run, sizeof run, "  run %d", r + 1);
    printf("%-50s %8.3fs %+11.1f MB %+11.1f MB\n", run, a->one_s[r], mb(total_kb(a->one_mem[r])),
           mb(a->one_mem[r].dirty));
  }
  printf("%-50s %8.3fs %+11.1f MB %+11.1f MB\n", "pool of 1: first interpreter, this process",
         a->start1, mb(gain1), mb(dgain1));
  char label[128];
  snprintf(label, sizeof label, "pool of %d: %d new interpreters start in parallel", new_interps,
           new_interps);
  printf("%-50s %8.3fs %+11.1f MB %+11.1f MB\n", label, a->startN, mb(gainN), mb(dgainN));
  printf("%-50s %8.3fs %+11.1f MB %+11.1f MB\n", "  per new interpreter (wall / N, gain / N)",
         per_startN, per_gainN / 1024.0, per_dgainN / 1024.0);
  snprintf(label, sizeof label, "  per interpreter, all %d (gain since before the first)", all);
  printf("%-50s %9s %+11.1f MB %+11.1f MB\n", label, "", per_gain_all / 1024.0,
         per_dgain_all / 1024.0);
  printf(
      "libpython copies mapped (one per interpreter): %d after the first pool, %d after the "
      "second\n",
      a->copies1, a->copiesN);
  printf("CPU used by other processes while section A ran: %.2f cores of %ld%s\n", a->others,
         sysconf(_SC_NPROCESSORS_ONLN),
         a->others > 0.25 ? " (disturbed: start times are not comparable)" : "");

  printf("\n%-60s %8s %10s %8s\n", "ratio", "value", "target", "verdict");
  const double r_start1 = a->one_start / a->plain_import;
  const double r_startN = per_startN / a->plain_import;
  const double r_mem1 = (double)a->one_total / (double)a->plain_total;
  const double r_memN = per_gainN / (double)a->plain_total;
  const double r_mem_all = per_gain_all / (double)a->plain_total;
  const double r_dmem1 = (double)a->one_dirty / (double)a->plain_dirty;
  const double r_dmemN = per_dgainN / (double)a->plain_dirty;
  printf("%-60s %7.3fx %10s %8s\n", "start, one interpreter / plain import (medians)", r_start1,
         "<= 1.10x", verdict(r_start1 <= 1.10));
  snprintf(label, sizeof label, "start, %d in parallel, wall/%d / plain import", new_interps,
           new_interps);
  printf("%-60s %7.3fx %10s %8s\n", label, r_startN, "(info)", "");
  printf("%-60s %7.3fx %10s %8s\n", "private, one interpreter / plain process (medians)", r_mem1,
         "<= 1.00x", verdict(r_mem1 <= 1.0));
  printf("%-60s %7.3fx %10s %8s\n", "private, per parallel-started interpreter / plain process",
         r_memN, "<= 1.00x", verdict(r_memN <= 1.0));
  snprintf(label, sizeof label, "private, per interpreter of all %d / plain process", all);
  printf("%-60s %7.3fx %10s %8s\n", label, r_mem_all, "(info)", "");
  printf("%-60s %7.3fx %10s %8s\n", "private dirty, one interpreter / plain process", r_dmem1,
         "<= 1.00x", verdict(r_dmem1 <= 1.0));
  printf("%-60s %7.3fx %10s %8s\n", "private dirty, per parallel-started interp / plain process",
         r_dmemN, "<= 1.00x", verdict(r_dmemN <= 1.0));
  printf(
      "(Private_Clean is library text mapped by one process only: it turns Shared when any\n"
      " other process or namespace maps the same files, so 'private' moves with what else\n"
      " runs; 'private dirty' does not.)\n");
  fflush(stdout);
}
