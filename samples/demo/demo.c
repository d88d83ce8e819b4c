/*
 * manypy_demo: the main job. Two PyTorch models, packaged with torch.package,
 * served from T host threads by a pool of 1 interpreter (one GIL for every
 * thread: what any single embedded CPython gives) and by a pool of N
 * interpreters (one GIL each).
 *
 *   resnet18      torchvision's resnet18: math-heavy; torch drops the GIL
 *                 inside its kernels, so one interpreter already overlaps some
 *                 of the work.
 *   python_heavy  many small ops: the Python interpreter, and so its GIL, is
 *                 the bottleneck. The case manypy exists for.
 *
 * Before any timing, each model is called on every interpreter of the
 * N-interpreter pool and its outputs compared with those plain eager Python
 * gave when the archives were built: a speed-up of wrong answers is worth
 * nothing. Any mismatch or failure exits 1.
 *
 * Usage: manypy_demo [--threads T] [--interpreters N] [--seconds S] [--quick]
 *                    [--archives DIR]
 * Public C API only (manypy.h).
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, sysconf, access */
#include "demo.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef MANYPY_ARCHIVES_DIR
#define MANYPY_ARCHIVES_DIR "archives"
#endif

enum { N_MODELS = 2 };

/* A row measured while other processes kept more cores than this busy is
 * marked: on a shared machine it says nothing about manypy. */
static const double kDisturbedCores = 0.25;

/* Tolerances: resnet18 sums thousands of products per output, so its
 * float32 results may differ in the last bits with another thread count or
 * kernel; python_heavy's are small and exact to 1e-5. */
static demo_model g_models[N_MODELS] = {
    {.name = "resnet18", .tolerance = 1e-4},
    {.name = "python_heavy", .tolerance = 1e-5},
};

void demo_die(const char* fmt, ...) {
  va_list ap;
  fflush(stdout);
  va_start(ap, fmt);
  fputs("manypy_demo: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

void demo_check(manypy_status* st, const char* what) {
  if (!st) return;
  fflush(stdout);
  fprintf(stderr, "manypy_demo: %s failed: %s: %s\n", what,
          manypy_code_name(manypy_status_code(st)), manypy_status_message(st));
  fputs(manypy_status_traceback(st), stderr); /* "" unless Python raised */
  manypy_status_free(st);
  exit(1);
}

double demo_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static manypy_pool* make_pool(size_t interpreters) {
  manypy_pool_options* opts = manypy_pool_options_new();
  if (!opts) demo_die("out of memory");
  demo_check(manypy_pool_options_set_interpreters(opts, interpreters),
             "manypy_pool_options_set_interpreters");
  manypy_pool* pool = NULL;
  manypy_status* st = manypy_pool_create(opts, &pool);
  manypy_pool_options_free(opts);
  /* More than 5 interpreters without GLIBC_TUNABLES: the message says what
   * to set (scripts/env.sh sets it). */
  demo_check(st, "manypy_pool_create");
  return pool;
}

/* NAME.pt's pickled model, replicated lazily into the pool's interpreters. */
static manypy_object* load_model(manypy_pool* pool, const char* dir, const demo_model* m) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.pt", dir, m->name);
  manypy_package* package = NULL;
  demo_check(manypy_package_load_file(pool, path, &package), path);
  manypy_object* object = NULL;
  demo_check(manypy_package_load_pickle(package, "model", "model.pkl", &object),
             "manypy_package_load_pickle");
  manypy_package_free(package); /* the object keeps the package alive */
  return object;
}

/* Calls the model pinned to each interpreter in turn and compares every
 * output with eager Python's. Exits 1 on any difference. */
static void check_every_interpreter(manypy_object* object, const demo_model* m, size_t n) {
  manypy_call_options* options = manypy_call_options_new();
  if (!options) demo_die("out of memory");
  double max_abs_diff = 0.0;
  for (size_t i = 0; i < n; ++i) {
    demo_check(manypy_call_options_set_interpreter(options, (int32_t)i),
               "manypy_call_options_set_interpreter");
    manypy_value* result = NULL;
    demo_check(manypy_object_call(object, NULL, m->args, m->kwargs, options, &result), m->name);
    char why[512];
    const int ok = demo_model_matches(m, result, &max_abs_diff, why, sizeof why);
    manypy_value_free(result);
    if (!ok) {
      printf("%-13s outputs equal eager Python: NO (interpreter %zu: %s)\n", m->name, i, why);
      fflush(stdout);
      exit(1);
    }
  }
  manypy_call_options_free(options);

  /* Name the scalar outputs too (python_heavy's "steps"), to show they
   * were checked. */
  char scalars[256] = "";
  size_t n_scalars = 0, len = 0;
  demo_check(manypy_value_length(m->scalars, &n_scalars), "scalars");
  for (size_t i = 0; i < n_scalars && len < sizeof scalars; ++i) {
    const char* key = NULL;
    const manypy_value* v = NULL;
    int64_t x = 0;
    demo_check(manypy_value_dict_key(m->scalars, i, &key, NULL), "scalars");
    demo_check(manypy_value_get_item(m->scalars, i, &v), "scalars");
    demo_check(manypy_value_get_int64(v, &x), "scalars");
    len +=
        (size_t)snprintf(scalars + len, sizeof scalars - len, " and %s = %lld", key, (long long)x);
  }
  printf(
      "%-13s outputs equal eager Python: yes (max abs diff %.2g over %zu output tensor%s%s, "
      "on each of %zu interpreter%s; tolerance %.0e)\n",
      m->name, max_abs_diff, m->n_outputs, m->n_outputs == 1 ? "" : "s", scalars, n,
      n == 1 ? "" : "s", m->tolerance);
  fflush(stdout);
}

static int by_total_desc(const void* a, const void* b) {
  const manypy_profile_entry *x = a, *y = b;
  return (x->total_ns < y->total_ns) - (x->total_ns > y->total_ns);
}

static void write_text(const char* path, const manypy_value* text) {
  const char* s = NULL;
  size_t n = 0;
  demo_check(manypy_value_get_string(text, &s, &n), "manypy_value_get_string");
  FILE* f = fopen(path, "w");
  if (!f || fwrite(s, 1, n, f) != n) demo_die("cannot write %s", path);
  fclose(f);
}

/* The sampled profile: the top operators by total time, and the Prometheus
 * text and Chrome trace a service would export, written beside the
 * archives' build directory. */
static void demo_report_profile(const manypy_profiler* profiler, const char* archives,
                                size_t interpreters) {
  manypy_profile_entry* entries = NULL;
  size_t n = 0;
  demo_check(manypy_profiler_snapshot(profiler, &entries, &n), "manypy_profiler_snapshot");
  qsort(entries, n, sizeof *entries, by_total_desc);
  printf("\nsampled profile (1%% of operators, %zu-interpreter pool): top operators by time\n",
         interpreters);
  printf("%-13s %-28s %8s %10s %10s %10s\n", "model", "operator", "samples", "total ms", "p50 us",
         "p99 us");
  for (size_t k = 0; k < n && k < 8; ++k) {
    printf("%-13s %-28s %8llu %10.2f %10.1f %10.1f\n", entries[k].model_id, entries[k].op_name,
           (unsigned long long)entries[k].count, entries[k].total_ns / 1e6, entries[k].p50_ns / 1e3,
           entries[k].p99_ns / 1e3);
  }
  manypy_profile_entries_free(entries, n);

  char prom[4096], trace[4096];
  snprintf(prom, sizeof prom, "%s/../demo_profile.prom", archives);
  snprintf(trace, sizeof trace, "%s/../demo_trace.json", archives);
  manypy_value* text = NULL;
  demo_check(manypy_profiler_prometheus(profiler, &text), "manypy_profiler_prometheus");
  write_text(prom, text);
  manypy_value_free(text);
  demo_check(manypy_profiler_chrome_trace(profiler, &text), "manypy_profiler_chrome_trace");
  write_text(trace, text);
  manypy_value_free(text);
  printf("wrote %s (Prometheus text) and %s (Chrome trace: open in Perfetto)\n", prom, trace);
}

static void usage(FILE* to) {
  fprintf(to,
          "usage: manypy_demo [--threads T] [--interpreters N] [--seconds S] [--quick]\n"
          "                   [--archives DIR]\n"
          "  --threads T       host threads sending requests (default 2)\n"
          "  --interpreters N  interpreters of the larger pool (default 2)\n"
          "  --seconds S       measured seconds per configuration (default 3)\n"
          "  --quick           0.5 s per configuration\n"
          "  --archives DIR    sample archives (default %s)\n",
          MANYPY_ARCHIVES_DIR);
}

static long parse_long(const char* s, const char* option, long lo, long hi) {
  char* end = NULL;
  const long v = strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < lo || v > hi) {
    demo_die("%s wants an integer in [%ld, %ld], not '%s'", option, lo, hi, s);
  }
  return v;
}

int main(int argc, char** argv) {
  int threads = 2;
  size_t interpreters = 2;
  double seconds = 3.0;
  const char* dir = MANYPY_ARCHIVES_DIR;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const int has_value = i + 1 < argc;
    if (strcmp(a, "--threads") == 0 && has_value) {
      threads = (int)parse_long(argv[++i], a, 1, 256);
    } else if (strcmp(a, "--interpreters") == 0 && has_value) {
      interpreters = (size_t)parse_long(argv[++i], a, 1, (long)manypy_max_interpreters());
    } else if (strcmp(a, "--seconds") == 0 && has_value) {
      char* end = NULL;
      seconds = strtod(argv[++i], &end);
      if (*end != '\0' || !(seconds > 0 && seconds <= 3600)) {
        demo_die("--seconds wants a number in (0, 3600], not '%s'", argv[i]);
      }
    } else if (strcmp(a, "--quick") == 0) {
      seconds = 0.5;
    } else if (strcmp(a, "--archives") == 0 && has_value) {
      dir = argv[++i];
    } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return 0;
    } else {
      usage(stderr);
      return 2;
    }
  }
  /* A short unmeasured warm-up per configuration: first calls on new
   * threads are start-up cost, not serving latency. */
  double warmup = seconds / 10.0;
  if (warmup < 0.1) warmup = 0.1;
  if (warmup > 0.5) warmup = 0.5;

  char pools[64] = "a pool of 1 interpreter";
  if (interpreters > 1) {
    snprintf(pools, sizeof pools, "pools of 1 and %zu interpreters", interpreters);
  }
  printf("manypy %s demo: %d host thread%s, %s, %.1f s per configuration, %ld CPU cores\n",
         manypy_version_string(), threads, threads == 1 ? "" : "s", pools, seconds,
         sysconf(_SC_NPROCESSORS_ONLN));

  /* Fail fast, before interpreters take seconds to start, if the archives
   * are not where they should be. */
  for (int k = 0; k < N_MODELS; ++k) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.pt", dir, g_models[k].name);
    if (access(path, R_OK) != 0) {
      demo_die("cannot read %s (build the target manypy_archives, or pass --archives DIR)", path);
    }
  }

  /* The N-interpreter pool: every interpreter imports torch in its own
   * link-map namespace, in parallel. */
  double t = demo_now_s();
  manypy_pool* pool = make_pool(interpreters);
  printf("started %zu interpreter%s in %.1f s\n\n", interpreters, interpreters == 1 ? "" : "s",
         demo_now_s() - t);

  /* Correctness first, on every interpreter. */
  manypy_object* objects[N_MODELS];
  for (int k = 0; k < N_MODELS; ++k) {
    demo_model_load(&g_models[k], pool, dir);
    objects[k] = load_model(pool, dir, &g_models[k]);
    check_every_interpreter(objects[k], &g_models[k], interpreters);
  }

  /* Then serving: results[k][0] with 1 interpreter, [k][1] with N. The
   * built-in profiler samples 1% of the operators while N serve. */
  manypy_profiler* profiler = NULL;
  demo_check(manypy_profiler_start(0.01, &profiler), "manypy_profiler_start");
  demo_serve_result results[N_MODELS][2];
  for (int k = 0; k < N_MODELS; ++k) {
    results[k][1] = demo_serve(objects[k], &g_models[k], threads, warmup, seconds);
  }
  demo_report_profile(profiler, dir, interpreters);
  manypy_profiler_free(profiler);
  if (interpreters > 1) {
    /* The pool of 1 reuses an interpreter the first pool gave back: pools
     * lease interpreters from one process-wide set. */
    for (int k = 0; k < N_MODELS; ++k) manypy_object_free(objects[k]);
    manypy_pool_destroy(pool);
    pool = make_pool(1);
    for (int k = 0; k < N_MODELS; ++k) {
      objects[k] = load_model(pool, dir, &g_models[k]);
      results[k][0] = demo_serve(objects[k], &g_models[k], threads, warmup, seconds);
    }
  } else {
    for (int k = 0; k < N_MODELS; ++k) results[k][0] = results[k][1];
  }
  for (int k = 0; k < N_MODELS; ++k) manypy_object_free(objects[k]);
  manypy_pool_destroy(pool);

  printf("\n%-13s %12s %8s %10s %9s %9s %9s\n", "model", "interpreters", "threads", "calls/s",
         "p50 ms", "p99 ms", "speed-up");
  double disturbed = 0.0; /* most cores other processes used during a row */
  for (int k = 0; k < N_MODELS; ++k) {
    for (int c = 0; c < (interpreters > 1 ? 2 : 1); ++c) {
      const demo_serve_result* r = &results[k][c];
      const int noisy = r->cpu_others > kDisturbedCores;
      if (noisy && r->cpu_others > disturbed) disturbed = r->cpu_others;
      printf("%-13s %12zu %8d %10.1f %9.2f %9.2f %8.2fx%s\n", g_models[k].name,
             c ? interpreters : (size_t)1, threads, r->throughput, r->p50_ms, r->p99_ms,
             r->throughput / results[k][0].throughput, noisy ? " *" : "");
    }
  }
  if (disturbed > 0) {
    printf(
        "* measured while other processes kept up to %.1f of the %ld cores busy: re-run on\n"
        "  a quiet machine before quoting these rows.\n",
        disturbed, sysconf(_SC_NPROCESSORS_ONLN));
  }
  printf(
      "\n1 interpreter: every thread waits for the same GIL, as with any single embedded\n"
      "CPython; %zu interpreters: one GIL each. speed-up: calls/s against 1 interpreter\n"
      "with the same %d thread%s. resnet18's time goes to torch kernels, which release\n"
      "the GIL, so threads overlap even in one interpreter; python_heavy's goes to Python\n"
      "bytecode, which only more interpreters run in parallel.\n",
      interpreters, threads, threads == 1 ? "" : "s");

  for (int k = 0; k < N_MODELS; ++k) demo_model_free(&g_models[k]);
  return 0;
}
