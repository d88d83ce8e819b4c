/*
 * manypy_bench_scaling: start-up cost, memory, throughput scaling and thread
 * hand-over cost of a manypy pool, measured in one run.
 *
 * A benchmark, not a test: it prints tables and ratios against the project's
 * targets ("meets"/"misses") and never fails on timing. It exits non-zero
 * only when a manypy call (or the plain-Python baseline) fails.
 *
 * Uses only the public C API (manypy.h), pthreads and /proc. This file holds
 * the options and the sections main lists; section A is scaling_start.c,
 * the pools, workloads and throughput runs of B and C scaling_tput.c.
 *
 * Usage: manypy_bench_scaling [--quick] [--seconds S] [--new N]
 *   --quick      0.5 s per throughput configuration (smoke test)
 *   --seconds S  S seconds per throughput configuration (default 3, or the
 *                environment variable MANYPY_BENCH_SECONDS)
 *   --new N      interpreters started in parallel in section A (default 3)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "cli.h"
#include "harness.h"
#include "manypy.h"
#include "scaling_start.h"
#include "scaling_tput.h"

const char* bench_program = "manypy_bench_scaling";

/* ------------------------------------------------------------------------ */
/* Main                                                                     */
/* ------------------------------------------------------------------------ */

static const char kUsage[] =
    "usage: manypy_bench_scaling [--quick] [--seconds S] [--new N]\n"
    "  --quick      0.5 s per throughput configuration (smoke test)\n"
    "  --seconds S  seconds per throughput configuration (default 3, or\n"
    "               $MANYPY_BENCH_SECONDS)\n"
    "  --new N      interpreters started in parallel in section A (default 3)\n";

/* The run's settings. */
static double seconds = 3.0, warmup;
static int new_interps = 3;

/* --start-one: one interpreter in a fresh process (section A's child). */
static int start_one(void) {
  const private_mem before = private_mem_self();
  const double t0 = now_s();
  manypy_pool* pool = bench_make_pool(1, MANYPY_THREAD_MODE_DIRECT);
  const double started = now_s() - t0;
  const private_mem after = private_mem_self();
  printf("%.6f %ld %ld\n", started, after.clean - before.clean, after.dirty - before.dirty);
  manypy_pool_destroy(pool);
  return 0;
}

/* Options: --quick, --seconds, --new (see the top). --seconds wins over
 * --quick, which wins over $MANYPY_BENCH_SECONDS. */
static void parse_options(int argc, char** argv) {
  int quick = 0;
  cli_option opts[] = {
      CLI_OPT_FLAG("--quick", &quick),
      CLI_OPT_NUMBER("--seconds", &seconds, 0.01, 3600),
      CLI_OPT_INT("--new", &new_interps, 1, 64),
  };
  cli_env_number("MANYPY_BENCH_SECONDS", 0.01, 3600, &seconds);
  cli_parse(argc, argv, opts, sizeof opts / sizeof opts[0], kUsage);
  if (quick && !cli_given(opts, sizeof opts / sizeof opts[0], "--seconds")) seconds = 0.5;
  warmup = seconds / 10.0;
  if (warmup < 0.1) warmup = 0.1;
  if (warmup > 0.5) warmup = 0.5;
}

/* What runs, and the limits it needs. */
static void print_intro(void) {
  printf(
      "manypy scaling benchmark (library %s, %ld online cores, %.2f s per throughput "
      "configuration after %.2f s warm-up)\n",
      manypy_version_string(), sysconf(_SC_NPROCESSORS_ONLN), seconds, warmup);
  const char* tun = getenv("GLIBC_TUNABLES");
  printf("GLIBC_TUNABLES=%s, manypy_max_interpreters()=%zu\n", tun ? tun : "(unset)",
         manypy_max_interpreters());
  if (manypy_max_interpreters() < (size_t)(1 + new_interps) || manypy_max_interpreters() < 4) {
    die("manypy_max_interpreters() is %zu; this benchmark needs %d", manypy_max_interpreters(),
        1 + new_interps > 4 ? 1 + new_interps : 4);
  }
  fflush(stdout);
}

/* Configurations of sections B and C: 1x1, 1x2, 1x4, 2x2, 4x4. */
enum { C_1x1, C_1x2, C_1x4, C_2x2, C_4x4, C_COUNT };

/* B. Throughput of two workloads across pool sizes and thread counts. */
static void section_b(double tput[WL_COUNT][C_COUNT]) {
  /* ---------------------------------------------------------------- B --- */
  static const struct {
    int interps, threads;
  } kConfigs[C_COUNT] = {{1, 1}, {1, 2}, {1, 4}, {2, 2}, {4, 4}};
  run_result res[WL_COUNT][C_COUNT];
  static const int kPoolSizes[] = {1, 2, 4};
  for (size_t p = 0; p < sizeof kPoolSizes / sizeof kPoolSizes[0]; ++p) {
    const int size = kPoolSizes[p];
    manypy_pool* pool = bench_make_pool((size_t)size, MANYPY_THREAD_MODE_DIRECT);
    CHECK(manypy_pool_exec_all(pool, kDefineWorkloads), "manypy_pool_exec_all(workloads)");
    for (int wl = 0; wl < WL_COUNT; ++wl) {
      for (int c = 0; c < C_COUNT; ++c) {
        if (kConfigs[c].interps != size) continue;
        progress("B: %s, %d interp x %d thread(s)", kWorkloads[wl].name, size, kConfigs[c].threads);
        res[wl][c] = run_throughput(pool, kConfigs[c].threads, wl, warmup, seconds);
        tput[wl][c] = res[wl][c].throughput;
      }
    }
    manypy_pool_destroy(pool);
  }

  printf(
      "\n== B. Throughput (loop iterations/s summed over threads, DIRECT mode, %.1f s each) "
      "==\n",
      seconds);
  printf("%-16s %-22s %14s %8s %9s %9s %9s\n", "workload", "config", "iterations/s", "vs 1x1",
         "torch thr", "cpu ours", "cpu other");
  for (int wl = 0; wl < WL_COUNT; ++wl) {
    for (int c = 0; c < C_COUNT; ++c) {
      char cfg[64], thr[32];
      snprintf(cfg, sizeof cfg, "%d interp x %d thread%s", kConfigs[c].interps, kConfigs[c].threads,
               kConfigs[c].threads > 1 ? "s" : "");
      if (res[wl][c].torch_threads_min == res[wl][c].torch_threads_max) {
        snprintf(thr, sizeof thr, "%d", res[wl][c].torch_threads_min);
      } else {
        snprintf(thr, sizeof thr, "%d-%d", res[wl][c].torch_threads_min,
                 res[wl][c].torch_threads_max);
      }
      printf("%-16s %-22s %14.0f %7.2fx %9s %9.2f %9.2f\n", kWorkloads[wl].name, cfg, tput[wl][c],
             tput[wl][c] / tput[wl][C_1x1], thr, res[wl][c].cpu_ours, res[wl][c].cpu_others);
    }
  }
  printf(
      "(torch thr: torch.get_num_threads() seen by the worker threads; cpu: cores kept busy "
      "by this process / by everything else on the machine while measuring)\n");
  printf("\n%-60s %8s %10s %8s\n", "ratio", "value", "target", "verdict");
  for (int wl = 0; wl < WL_COUNT; ++wl) {
    const double a = tput[wl][C_2x2] / tput[wl][C_1x1];
    const double b = tput[wl][C_2x2] / tput[wl][C_1x2];
    char l1[96], l2[96];
    snprintf(l1, sizeof l1, "%s: (2 interp x 2 thr) / (1 interp x 1 thr)", kWorkloads[wl].name);
    snprintf(l2, sizeof l2, "%s: (2 interp x 2 thr) / (1 interp x 2 thr)", kWorkloads[wl].name);
    if (wl == WL_TORCH) {
      printf("%-60s %7.2fx %10s %8s\n", l1, a, ">= 1.8x", verdict(a >= 1.8));
      printf("%-60s %7.2fx %10s %8s\n", l2, b, ">= 4x", verdict(b >= 4.0));
    } else {
      printf("%-60s %7.2fx %10s %8s\n", l1, a, "(info)", "");
      printf("%-60s %7.2fx %10s %8s\n", l2, b, "(info)", "");
    }
  }
  fflush(stdout);
}

/* C. DIRECT vs HANDOFF: the hand-over cost. */
static void section_c(double tput[WL_COUNT][C_COUNT]) {
  /* ---------------------------------------------------------------- C --- */
  progress("C: %d calls of eval(\"1\") in DIRECT mode", NOOP_CALLS);
  manypy_pool* direct = bench_make_pool(1, MANYPY_THREAD_MODE_DIRECT);
  const noop_result direct_noop = time_noop_calls(direct);
  manypy_pool_destroy(direct);

  progress("C: %d calls of eval(\"1\") in HANDOFF mode", NOOP_CALLS);
  manypy_pool* handoff1 = bench_make_pool(1, MANYPY_THREAD_MODE_HANDOFF);
  const noop_result handoff_noop = time_noop_calls(handoff1);
  CHECK(manypy_pool_exec_all(handoff1, kDefineWorkloads), "manypy_pool_exec_all(workloads)");
  progress("C: small torch ops, HANDOFF, 1 interp x 2 threads");
  const run_result handoff_1x2 = run_throughput(handoff1, 2, WL_TORCH, warmup, seconds);
  manypy_pool_destroy(handoff1);

  progress("C: small torch ops, HANDOFF, 2 interp x 2 threads");
  manypy_pool* handoff2 = bench_make_pool(2, MANYPY_THREAD_MODE_HANDOFF);
  CHECK(manypy_pool_exec_all(handoff2, kDefineWorkloads), "manypy_pool_exec_all(workloads)");
  const run_result handoff_2x2 = run_throughput(handoff2, 2, WL_TORCH, warmup, seconds);
  manypy_pool_destroy(handoff2);

  printf(
      "\n== C. Thread hand-over cost (1 caller thread, %d x eval(\"1\") on a 1-interpreter "
      "pool) ==\n",
      NOOP_CALLS);
  printf("%-46s %9s %9s %9s\n", "mode (us per call)", "p50", "p99", "mean");
  printf("%-46s %9.2f %9.2f %9.2f\n", "DIRECT (caller enters the interpreter)", direct_noop.p50_us,
         direct_noop.p99_us, direct_noop.mean_us);
  printf("%-46s %9.2f %9.2f %9.2f\n", "HANDOFF (library thread runs the call)", handoff_noop.p50_us,
         handoff_noop.p99_us, handoff_noop.mean_us);
  const double handoff_us = handoff_noop.p50_us - direct_noop.p50_us;
  printf("%-46s %+9.2f %9s %+9.2f   target <= 5 us at p50: %s\n",
         "hand-over cost (HANDOFF - DIRECT)", handoff_us, "",
         handoff_noop.mean_us - direct_noop.mean_us, verdict(handoff_us <= 5.0));
  printf("\n%-46s %12s %12s %9s %9s %9s\n", "small torch ops (DIRECT: section B)", "HANDOFF it/s",
         "DIRECT it/s", "HO / DIR", "torch thr", "cpu other");
  printf("%-46s %12.0f %12.0f %8.2fx %9d %9.2f\n", "2 interp x 2 threads", handoff_2x2.throughput,
         tput[WL_TORCH][C_2x2], handoff_2x2.throughput / tput[WL_TORCH][C_2x2],
         handoff_2x2.torch_threads_max, handoff_2x2.cpu_others);
  printf("%-46s %12.0f %12.0f %8.2fx %9d %9.2f\n", "1 interp x 2 threads (info)",
         handoff_1x2.throughput, tput[WL_TORCH][C_1x2],
         handoff_1x2.throughput / tput[WL_TORCH][C_1x2], handoff_1x2.torch_threads_max,
         handoff_1x2.cpu_others);
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "--start-one") == 0) return start_one();
  parse_options(argc, argv);
  const double bench_t0 = now_s();
  print_intro();
  start_up a;
  measure_start_up(&a, new_interps);
  report_start_up(&a, new_interps);
  double tput[WL_COUNT][C_COUNT];
  section_b(tput);
  section_c(tput);
  char what[64];
  snprintf(what, sizeof what, "the %d throughput runs", g_noise.runs);
  noise_summary(&g_noise, what);
  printf("\ntotal benchmark wall time: %.1f s\n", now_s() - bench_t0);
  fflush(stdout);
  return 0;
}
