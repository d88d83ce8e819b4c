/*
 * manypy_bench_serving: what serving models through manypy costs and gains,
 * measured side by side in one run.
 *
 *   A. A Python-heavy model (python_heavy.pt) called with
 *      MANYPY_ANY_INTERPRETER: 1 interpreter x 1 thread, 1 x 2 and 2 x 2.
 *   B. Call overhead of identity.pt (forward(x) -> x) at two tensor sizes:
 *      (i) manypy_object_call from C, (ii) the same model called in a Python
 *      loop inside an interpreter, (iii) the tensor's bytes sent to a worker
 *      process and back over pipes (the multi-process serving design, minus
 *      its serialization). For information, also an int argument: the fixed
 *      cost of a call with no tensor crossing.
 *   C. ResNet-18 at batch 1 from 2 threads: manypy with 2 interpreters vs
 *      the same model scripted and run by TorchScript (libtorch) on the host.
 *   D. The built-in profiler's cost on the Python-heavy model.
 *   E. What a deadline and a cancel token add to a call: identity.pt's
 *      [1, 16] call with a timeout and a token set vs the same call without,
 *      in alternating rounds.
 *
 * Every timed row reports how disturbed it was: the CPU that other processes
 * used meanwhile (/proc/stat), and for A and C where the calling threads'
 * time went (on a CPU, waiting for one, blocked) and their CPU time per call.
 *
 * A benchmark, not a test: it prints tables and ratios against the project's
 * targets ("meets"/"misses") and never fails on timing. It exits non-zero
 * only when a manypy call fails or a model's output is wrong (every model is
 * checked once per interpreter against NAME.expected.*.bin before timing).
 *
 * Uses only the public C API (manypy.h), pthreads, pipes and /proc. This file
 * holds the run's set-up and its sections (main lists them); the throughput
 * runs are in serving_tput.c, the call-overhead paths in serving_overhead.c,
 * the CPU accounting in serving_noise.c, and what every benchmark shares in
 * harness.c and outputs.c.
 *
 * Usage: manypy_bench_serving [--quick] [--seconds S] [--calls N] [--archives DIR]
 *   --quick         S = 0.5 in one round, 2,000/200 calls (smoke test)
 *   --seconds S     measured seconds per configuration in A, 2 S in C (whose
 *                   calls are slow), in 2 rounds each (default 5, or the
 *                   environment variable MANYPY_BENCH_SECONDS)
 *   --calls N       calls per path in B for the small tensor (default 20,000;
 *                   the large tensor gets N / 10)
 *   --archives DIR  the sample archives (default: the build's, target
 *                   manypy_archives)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "cli.h"
#include "harness.h"
#include "manypy.h"
#include "outputs.h"
#include "serving_noise.h"
#include "serving_overhead.h"
#include "serving_tput.h"

#ifndef MANYPY_BENCH_ARCHIVES
#define MANYPY_BENCH_ARCHIVES "archives"
#endif

#define PROG "manypy_bench_serving"
const char* bench_program = PROG;

/* python_heavy's expected files use these kwargs (python_heavy.json). */
#define HEAVY_STEPS 5

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

static void archive_path(char* out, size_t len, const char* dir, const char* name) {
  snprintf(out, len, "%s/%s", dir, name);
}

/* ------------------------------------------------------------------------ */
/* Values and output checks                                                 */
/* ------------------------------------------------------------------------ */

static const DLDataType kFloat32 = {kDLFloat, 32, 1};

/* A float32 tensor over `data` (borrowed, not copied). */
static manypy_value* tensor_over(void* data, size_t bytes, int32_t ndim, const int64_t* shape) {
  manypy_value* v = NULL;
  CHECK(manypy_value_new_tensor_from_buffer(data, bytes, kFloat32, ndim, shape, NULL, 0, NULL, NULL,
                                            &v),
        "manypy_value_new_tensor_from_buffer");
  return v;
}

/* (item,) */
static manypy_value* tuple1(manypy_value* item) {
  manypy_value* t = manypy_value_new_tuple();
  if (!t) die("manypy_value_new_tuple returned NULL");
  CHECK(manypy_value_append(t, item), "manypy_value_append");
  return t;
}

/* Checks a result (check_model_output) and prints one line: each output's
 * largest difference, and "steps" when steps >= 0. */
static void check_output(const char* what, const manypy_value* result, const expected* outs,
                         int nouts, int64_t steps) {
  double worst[4];
  if (nouts > 4) die("%s: more outputs than this check prints", what);
  check_model_output(what, result, outs, nouts, steps, worst);
  char line[512];
  int len = snprintf(line, sizeof line, "%-44s ok:", what);
  for (int k = 0; k < nouts; ++k) {
    len += snprintf(line + len, sizeof line - (size_t)len, " %s max|diff| %.2g", outs[k].key,
                    worst[k]);
  }
  if (steps >= 0) snprintf(line + len, sizeof line - (size_t)len, " steps %" PRId64, steps);
  printf("%s\n", line);
}

/* Calls `object` once in each interpreter of `pool` and checks the output. */
static void check_each_interpreter(const char* model, manypy_pool* pool, const char* pool_name,
                                   manypy_object* object, const manypy_value* args,
                                   const manypy_value* kwargs, expected* outs, int nouts,
                                   int64_t steps) {
  for (size_t i = 0; i < manypy_pool_size(pool); ++i) {
    manypy_call_options* o = pinned((int32_t)i);
    manypy_value* r = NULL;
    char what[160];
    snprintf(what, sizeof what, "%s, %s interpreter %zu", model, pool_name, i);
    manypy_status* st = manypy_object_call(object, NULL, args, kwargs, o, &r);
    if (st) die_status(what, st);
    check_output(what, r, outs, nouts, steps);
    manypy_value_free(r);
    manypy_call_options_free(o);
  }
}

/* ------------------------------------------------------------------------ */
/* Pools                                                                    */
/* ------------------------------------------------------------------------ */

/* A pool of `interpreters` with torch imported in each. */
static manypy_pool* make_pool(size_t interpreters) {
  manypy_pool* pool = bench_make_pool(interpreters, MANYPY_THREAD_MODE_DIRECT);
  CHECK(manypy_pool_exec_all(pool, "import torch"), "manypy_pool_exec_all(\"import torch\")");
  return pool;
}

static manypy_object* load_model(manypy_pool* pool, const char* dir, const char* file,
                                 manypy_package** out_package) {
  char path[4096];
  archive_path(path, sizeof path, dir, file);
  char what[4200];
  snprintf(what, sizeof what, "manypy_package_load_file(%s)", path);
  CHECK(manypy_package_load_file(pool, path, out_package), what);
  manypy_object* object = NULL;
  snprintf(what, sizeof what, "manypy_package_load_pickle(%s, model, model.pkl)", file);
  CHECK(manypy_package_load_pickle(*out_package, "model", "model.pkl", &object), what);
  return object;
}

/* ------------------------------------------------------------------------ */
/* Main                                                                     */
/* ------------------------------------------------------------------------ */

static const char kUsage[] =
    "usage: " PROG
    " [--quick] [--seconds S] [--calls N] [--archives DIR]\n"
    "  --quick         S = 0.5 in one round, 2000/200 calls (smoke test)\n"
    "  --seconds S     measured seconds per configuration in A, 2 S in C, in 2\n"
    "                  rounds each (default 5, or $MANYPY_BENCH_SECONDS)\n"
    "  --calls N       calls per path in B, small tensor (default 20000; the\n"
    "                  large tensor gets N/10)\n"
    "  --archives DIR  sample archives (default " MANYPY_BENCH_ARCHIVES ")\n";

/* ------------------------------------------------------------------------ */
/* The run: its settings, and what the set-up makes for the sections        */
/* ------------------------------------------------------------------------ */

static double seconds = 5.0;
static int small_calls = 20000, large_calls;
static int quick, rounds;
static double warmup;
static const char* dir = MANYPY_BENCH_ARCHIVES;

static float *identity_in, *heavy_in, *resnet_in, *small_data;
static const size_t large_bytes = (size_t)3 * 224 * 224 * sizeof(float);
static const size_t small_bytes = 16 * sizeof(float);
static const int64_t small_shape[] = {1, 16};
static const int64_t large_shape[] = {1, 3, 224, 224};
static expected identity_out[] = {{"out", 2, {2, 3}, NULL, 0}};
static expected heavy_out[] = {{"logits", 2, {4, 10}, NULL, 0}, {"norm", 1, {4}, NULL, 0}};
static expected resnet_out[] = {{"out", 2, {1, 1000}, NULL, 0}};
static echo_child echo_small, echo_large;

static manypy_pool *pool1, *pool2;
static manypy_package *pkg_identity, *pkg_heavy1, *pkg_heavy2, *pkg_resnet;
static manypy_object *identity, *heavy1, *heavy2, *resnet;
static manypy_script_module* resnet_script;
/* Arguments: built once, shared read-only by every call and thread. */
static manypy_value *identity_args, *heavy_args, *heavy_kwargs, *resnet_args, *small_args,
    *large_args;
static double start_s, load_s; /* set-up times, printed after the checks */

/* Options: --quick, --seconds, --calls, --archives (see the top). --seconds
 * and --calls win over --quick, which wins over $MANYPY_BENCH_SECONDS. */
static void parse_options(int argc, char** argv) {
  cli_option opts[] = {
      CLI_OPT_FLAG("--quick", &quick),
      CLI_OPT_NUMBER("--seconds", &seconds, 0.01, 3600),
      CLI_OPT_INT("--calls", &small_calls, 100, 100000000),
      CLI_OPT_STRING("--archives", &dir),
  };
  const size_t n = sizeof opts / sizeof opts[0];
  cli_env_number("MANYPY_BENCH_SECONDS", 0.01, 3600, &seconds);
  cli_parse(argc, argv, opts, n, kUsage);
  if (quick && !cli_given(opts, n, "--seconds")) seconds = 0.5;
  if (quick && !cli_given(opts, n, "--calls")) small_calls = 2000;
  large_calls = small_calls / 10;
  rounds = quick ? 1 : 2;
  warmup = quick ? 0.1 : 0.3;
}

/* Inputs, expected outputs, and the pipe-echo workers (forked before any
 * thread exists). */
static void load_inputs(void) {
  size_t n;
  identity_in = read_archive_file(dir, "identity.input.bin", &n);
  if (n != 6 * sizeof(float)) die("identity.input.bin: %zu bytes, expected 24", n);
  heavy_in = read_archive_file(dir, "python_heavy.input.bin", &n);
  if (n != 4 * 64 * sizeof(float)) die("python_heavy.input.bin: %zu bytes, expected 1024", n);
  resnet_in = read_archive_file(dir, "resnet18.input.bin", &n);
  if (n != large_bytes) die("resnet18.input.bin: %zu bytes, expected %zu", n, large_bytes);
  expected_load(dir, "identity", &identity_out[0]);
  expected_load(dir, "python_heavy", &heavy_out[0]);
  expected_load(dir, "python_heavy", &heavy_out[1]);
  expected_load(dir, "resnet18", &resnet_out[0]);

  /* Section B's small tensor: [1, 16] (the large one is ResNet's input). */
  if (posix_memalign((void**)&small_data, 64, small_bytes) != 0) die("out of memory");
  for (int k = 0; k < 16; ++k) small_data[k] = (float)k / 16.0f - 0.5f;

  echo_small = start_echo_child(small_bytes);
  echo_large = start_echo_child(large_bytes);

  printf(
      "manypy serving benchmark (library %s, %ld online cores; measured s per configuration: "
      "%.2f in A, %.2f in C, in %d round%s after %.2f s warm-up each; %d/%d calls per path "
      "in B)\n",
      manypy_version_string(), sysconf(_SC_NPROCESSORS_ONLN), seconds, 2 * seconds, rounds,
      rounds > 1 ? "s" : "", warmup, small_calls, large_calls);
  printf("archives: %s\n", dir);
  if (manypy_max_interpreters() < 3) {
    die("manypy_max_interpreters() is %zu; this benchmark needs 3", manypy_max_interpreters());
  }
  fflush(stdout);
}

/* Pools of 1 and 2, the models, their arguments. */
static void start_models(void) {
  /* Host TorchScript: 1 intra-op thread per calling thread, as the pool's
   * default gives each interpreter. Set before any host thread runs an op. */
  CHECK(manypy_script_set_intra_op_threads(1), "manypy_script_set_intra_op_threads(1)");

  progress("starting a pool of 1 interpreter and a pool of 2");
  double t = now_s();
  pool1 = make_pool(1);
  pool2 = make_pool(2);
  start_s = now_s() - t;

  progress("loading identity.pt, python_heavy.pt, resnet18.pt, resnet18_script.pt");
  t = now_s();
  identity = load_model(pool1, dir, "identity.pt", &pkg_identity);
  heavy1 = load_model(pool1, dir, "python_heavy.pt", &pkg_heavy1);
  heavy2 = load_model(pool2, dir, "python_heavy.pt", &pkg_heavy2);
  resnet = load_model(pool2, dir, "resnet18.pt", &pkg_resnet);
  char script_path[4096];
  archive_path(script_path, sizeof script_path, dir, "resnet18_script.pt");
  CHECK(manypy_script_load_file(script_path, &resnet_script),
        "manypy_script_load_file(resnet18_script.pt)");
  load_s = now_s() - t;

  /* Arguments: built once, shared read-only by every call and thread. */
  const int64_t identity_shape[] = {2, 3};
  const int64_t heavy_shape[] = {4, 64};
  identity_args = tuple1(tensor_over(identity_in, 6 * sizeof(float), 2, identity_shape));
  heavy_args = tuple1(tensor_over(heavy_in, 4 * 64 * sizeof(float), 2, heavy_shape));
  heavy_kwargs = manypy_value_new_dict();
  if (!heavy_kwargs) die("manypy_value_new_dict returned NULL");
  CHECK(manypy_value_dict_set(heavy_kwargs, "steps", manypy_value_new_int64(HEAVY_STEPS)),
        "manypy_value_dict_set(steps)");
  CHECK(manypy_value_dict_set(heavy_kwargs, "normalize", manypy_value_new_bool(0)),
        "manypy_value_dict_set(normalize)");
  resnet_args = tuple1(tensor_over(resnet_in, large_bytes, 4, large_shape));
  small_args = tuple1(tensor_over(small_data, small_bytes, 2, small_shape));
  large_args = tuple1(tensor_over(resnet_in, large_bytes, 4, large_shape));
}

/* Every model's output in every interpreter, and identity's zero copy. */
static void check_models(void) {
  progress("checking every model's output in every interpreter");
  printf("\n== Output checks (against NAME.expected.*.bin, tolerance %g) ==\n", OUTPUT_TOLERANCE);
  const double t = now_s();
  check_each_interpreter("identity.pt", pool1, "pool of 1,", identity, identity_args, NULL,
                         identity_out, 1, -1);
  check_each_interpreter("python_heavy.pt", pool1, "pool of 1,", heavy1, heavy_args, heavy_kwargs,
                         heavy_out, 2, HEAVY_STEPS);
  check_each_interpreter("python_heavy.pt", pool2, "pool of 2,", heavy2, heavy_args, heavy_kwargs,
                         heavy_out, 2, HEAVY_STEPS);
  check_each_interpreter("resnet18.pt", pool2, "pool of 2,", resnet, resnet_args, NULL, resnet_out,
                         1, -1);
  {
    manypy_value* r = NULL;
    CHECK(manypy_script_call(resnet_script, NULL, resnet_args, NULL, NULL, &r),
          "manypy_script_call(resnet18_script.pt)");
    check_output("resnet18_script.pt, TorchScript on the host", r, resnet_out, 1, -1);
    manypy_value_free(r);
  }
  /* Zero copy: does identity hand back the caller's own buffer? */
  int shares_buffer = 0;
  {
    manypy_value* r = NULL;
    CHECK(manypy_object_call(identity, NULL, large_args, NULL, NULL, &r), "manypy_object_call");
    DLManagedTensor* tr = NULL;
    CHECK(manypy_value_get_tensor(r, &tr), "manypy_value_get_tensor");
    shares_buffer =
        (const char*)tr->dl_tensor.data + tr->dl_tensor.byte_offset == (const char*)resnet_in;
    if (tr->deleter) tr->deleter(tr);
    manypy_value_free(r);
  }
  const double check_s = now_s() - t;
  printf(
      "identity.pt on [1, 3, 224, 224]: the result %s the caller's buffer (zero copy both "
      "ways: %s)\n",
      shares_buffer ? "points into" : "does NOT point into", shares_buffer ? "yes" : "no");
  printf(
      "set-up: pools of 1 and 2 started in %.2f s, models loaded in %.2f s, first calls "
      "(replicas, checks) in %.2f s\n",
      start_s, load_s, check_s);
  fflush(stdout);
}

/* A. The Python-heavy model: 1 x 1, 1 x 2, 2 x 2. */
static void section_a(void) {
  const target heavy_t1 = {heavy1, NULL, NULL, heavy_args, heavy_kwargs, pool1};
  const target heavy_t2 = {heavy2, NULL, NULL, heavy_args, heavy_kwargs, pool2};
  config a[] = {
      {"1 interpreter x 1 thread", &heavy_t1, 1, {0}},
      {"1 interpreter x 2 threads", &heavy_t1, 2, {0}},
      {"2 interpreters x 2 threads", &heavy_t2, 2, {0}},
  };
  run_configs("A", a, 3, rounds, warmup, seconds);

  printf(
      "\n== A. Python-heavy model: python_heavy.pt, x [4, 64], steps=5, normalize=False, "
      "MANYPY_ANY_INTERPRETER, DIRECT mode ==\n");
  print_config_header();
  for (int c = 0; c < 3; ++c) print_config_row(&a[c], tput_rate(&a[0].res));
  printf(
      "(calls/s summed over threads; p50/p99: wall time of one manypy_object_call; base: "
      "1 x 1; torch thr: torch.get_num_threads() in the interpreters as the workers see it; "
      "cpu: cores kept busy by this process / by everything else while measuring)\n");
  print_thread_time_note();
  const double a_r1 = tput_rate(&a[2].res) / tput_rate(&a[0].res);
  const double a_r2 = tput_rate(&a[2].res) / tput_rate(&a[1].res);
  printf("\n%-64s %8s %10s %8s\n", "ratio", "value", "target", "verdict");
  printf("%-64s %7.2fx %10s %8s\n", "throughput (2 interp x 2 thr) / (1 interp x 1 thr)", a_r1,
         ">= 1.8x", verdict(a_r1 >= 1.8));
  printf("%-64s %7.2fx %10s %8s\n", "throughput (2 interp x 2 thr) / (1 interp x 2 thr)", a_r2,
         ">= 3x", verdict(a_r2 >= 3.0));
  fflush(stdout);
}

/* D. The profiler's cost. */
static void section_d(void) {
  const target heavy_t2 = {heavy2, NULL, NULL, heavy_args, heavy_kwargs, pool2};
  /* The cost of the built-in profiler on the Python-heavy model (2
   * interpreters x 2 threads): hooks are process-wide, so each setting runs
   * in its own rounds, alternating order, rather than side by side. Each
   * round's settings run within seconds of each other, so the ratio is taken
   * per round and the median quoted: a burst of load elsewhere on the
   * machine then moves one round's ratio, not the verdict. */
  {
    enum { kSettings = 3, kRounds = 6 };
    const double probs[kSettings] = {0.0, 0.01, 1.0};
    const char* names[kSettings] = {"no hooks", "profiler, 0.01", "profiler, 1.0"};
    tput_result d[kSettings];
    double per_round[kSettings][kRounds];
    for (int m = 0; m < kSettings; ++m) tput_init(&d[m]);
    for (int r = 0; r < kRounds; ++r) {
      for (int j = 0; j < kSettings; ++j) {
        const int m = r % 2 == 0 ? j : kSettings - 1 - j;
        progress("D: %s, round %d/%d", names[m], r + 1, kRounds);
        manypy_profiler* profiler = NULL;
        if (probs[m] > 0)
          CHECK(manypy_profiler_start(probs[m], &profiler), "manypy_profiler_start");
        tput_result one;
        tput_init(&one);
        run_round(&heavy_t2, 2, warmup, seconds / 3, &one);
        manypy_profiler_free(profiler);
        per_round[m][r] = tput_rate(&one);
        tput_merge(&d[m], &one);
      }
    }
    double ratio[kSettings][kRounds], cpu_per_call[kSettings];
    for (int m = 0; m < kSettings; ++m) {
      for (int r = 0; r < kRounds; ++r) ratio[m][r] = per_round[m][r] / per_round[0][r];
      cpu_per_call[m] = d[m].calls > 0 ? d[m].time.on_cpu / (double)d[m].calls : NAN;
    }
    printf(
        "\n== D. Profiler overhead: python_heavy.pt, 2 interpreters x 2 threads, "
        "%d alternating rounds of %.1f s ==\n",
        kRounds, seconds / 3);
    printf("%-26s %9s %8s %13s %12s %12s %10s %9s\n", "setting", "calls/s", "vs none",
           "median round", "worst round", "cpu ms/call", "cpu vs none", "cpu other");
    for (int m = 0; m < kSettings; ++m) {
      printf("%-26s %9.1f %7.3fx %12.3fx %11.3fx %12.3f %9.3fx %9.2f\n", names[m], tput_rate(&d[m]),
             tput_rate(&d[m]) / tput_rate(&d[0]), median_of(ratio[m], kRounds),
             min_of(ratio[m], kRounds), cpu_per_call[m] * 1e3, cpu_per_call[0] / cpu_per_call[m],
             cpu_cores_other(&d[m].cpu));
    }
    printf(
        "(vs none: all rounds' calls over all rounds' time; median round: the median of "
        "the per-round ratios to the same round's no-hooks run; cpu ms/call: the callers' "
        "on-cpu time per call, which other processes on the machine move less; cpu vs none: "
        "no hooks' cpu per call over this setting's, so below 1 is slower)\n");
    const double d_r = median_of(ratio[1], kRounds);
    printf("\n%-64s %8s %10s %8s\n", "ratio", "value", "target", "verdict");
    printf("%-64s %7.3fx %10s %8s\n", "throughput, sampling 0.01 / no hooks (median round)", d_r,
           ">= 0.97x", verdict(d_r >= 0.97));
    printf("%-64s %7.3fx %10s %8s\n", "throughput, sampling 1.0 / no hooks (median round)",
           median_of(ratio[2], kRounds), "(info)", "");
    fflush(stdout);
  }
}

/* B. Call overhead: C API vs Python loop vs a pipe to a worker process. */
static void section_b(void) {
  char identity_path[4096];
  archive_path(identity_path, sizeof identity_path, dir, "identity.pt");
  setup_python_loop(pool1, identity_path);
  /* Rows: the two tensors, then (for information) an int argument: the
   * cost of a call without any tensor crossing. */
  manypy_value* int_args = tuple1(manypy_value_new_int64(1));
  struct {
    const char* shape;
    size_t bytes;
    long calls;
    lat_result capi, python, pipe;
  } b[3];
  cpu_use b_cpu = {0, 0, 0};
  const cpu_sample b_c0 = cpu_now_ours();
  for (int s = 0; s < 3; ++s) {
    const int big = s == 1, is_int = s == 2;
    const long calls = big ? large_calls : small_calls;
    const long warm = calls / 10 > 100 ? calls / 10 : 100;
    b[s].bytes = is_int ? 8 : big ? large_bytes : small_bytes;
    b[s].calls = calls;
    b[s].shape = is_int ? "(info) int 1" : big ? "[1, 3, 224, 224]" : "[1, 16]";
    progress("B: %s, (i) %ld x manypy_object_call", b[s].shape, calls);
    b[s].capi = time_c_api(identity,
                           is_int ? int_args
                           : big  ? large_args
                                  : small_args,
                           calls, warm);
    progress("B: %s, (ii) %ld x model(x) in Python", b[s].shape, calls);
    b[s].python = time_python(pool1,
                              is_int ? -1
                              : big  ? 4
                                     : 2,
                              big ? large_shape : small_shape, calls, warm);
    if (!is_int) {
      progress("B: %s, (iii) %ld pipe round trips of %zu bytes", b[s].shape, calls, b[s].bytes);
      b[s].pipe = time_pipe(big ? &echo_large : &echo_small,
                            big ? (const void*)resnet_in : small_data, calls, warm);
    }
  }
  manypy_value_free(int_args);
  cpu_record(&b_cpu, b_c0, cpu_now_ours());

  printf("\n== B. Call overhead: identity.pt, forward(x) -> x, one caller thread, pool of 1 ==\n");
  printf("%-18s %9s  %-46s %7s %9s %9s %9s\n", "x", "bytes", "path", "calls", "p50 us", "p99 us",
         "cpu other");
  for (int s = 0; s < 3; ++s) {
    const lat_result* rows[3] = {&b[s].capi, &b[s].python, &b[s].pipe};
    static const char* names[3] = {
        "(i) manypy_object_call from C",
        "(ii) model(x) in Python, in the interpreter",
        "(iii) pipe round trip to a worker process",
    };
    for (int k = 0; k < (s == 2 ? 2 : 3); ++k) {
      char bytes_s[32] = "";
      if (k == 0 && s < 2) snprintf(bytes_s, sizeof bytes_s, "%zu", b[s].bytes);
      char other[32];
      printf("%-18s %9s  %-46s %7ld %9.2f %9.2f %9s\n", k == 0 ? b[s].shape : "", bytes_s, names[k],
             rows[k]->calls, rows[k]->p50_ns * 1e-3, rows[k]->p99_ns * 1e-3,
             other_cell(&rows[k]->cpu, other, sizeof other));
    }
  }
  printf(
      "((i): args tuple built once, each result freed inside the timed span; (ii): the same "
      "archive loaded by torch.package in the same interpreter, timed with "
      "time.perf_counter_ns, under torch.no_grad(); (iii): write N bytes + read N bytes back, "
      "pipe capacity %d bytes; int 1: no tensor crosses, so (i) - (ii) there is the fixed "
      "cost of a call; cpu other: '-' for runs under %.1f s, too short to tell)\n",
      echo_large.pipe_capacity, kMinCpuWindow);
  printf(
      "CPU used by other processes during section B as a whole (%.1f s): %.2f cores (this "
      "process and its echo workers: %.2f)\n",
      b_cpu.wall_s, cpu_cores_other(&b_cpu), cpu_cores_ours(&b_cpu));
  printf("\n%-64s %8s %10s %8s\n", "ratio (at p50)", "value", "target", "verdict");
  for (int s = 0; s < 3; ++s) {
    const double over_us = (b[s].capi.p50_ns - b[s].python.p50_ns) * 1e-3;
    char l1[96], l2[96];
    snprintf(l1, sizeof l1, "%s: overhead (i) - (ii)", b[s].shape);
    if (s == 2) {
      printf("%-64s %6.2fus %10s %8s\n", l1, over_us, "(info)", "");
      continue;
    }
    const double share = over_us / (b[s].pipe.p50_ns * 1e-3);
    snprintf(l2, sizeof l2, "%s: overhead / pipe round trip (iii)", b[s].shape);
    printf("%-64s %6.2fus %10s %8s\n", l1, over_us, "<= 10us", verdict(over_us <= 10.0));
    printf("%-64s %7.2fx %10s %8s\n", l2, share, "<= 0.20x", verdict(share <= 0.2));
  }
  fflush(stdout);
}

/* C. ResNet-18: manypy vs TorchScript on the host. */
static void section_c(void) {
  const target resnet_mp = {resnet, NULL, NULL, resnet_args, NULL, pool2};
  const target resnet_ts = {NULL, NULL, resnet_script, resnet_args, NULL, NULL};
  config c[] = {
      {"manypy, 2 interpreters x 2 threads", &resnet_mp, 2, {0}},
      {"TorchScript host, 2 threads", &resnet_ts, 2, {0}},
      {"manypy, 2 interpreters x 1 thread", &resnet_mp, 1, {0}},
      {"TorchScript host, 1 thread", &resnet_ts, 1, {0}},
  };
  run_configs("C", c, 4, rounds, warmup, 2 * seconds);
  printf(
      "\n== C. ResNet-18, batch 1, x [1, 3, 224, 224]: manypy (resnet18.pt, "
      "MANYPY_ANY_INTERPRETER) vs TorchScript on the host (resnet18_script.pt), 1 intra-op "
      "thread per calling thread ==\n");
  print_config_header();
  print_config_row(&c[0], tput_rate(&c[1].res));
  print_config_row(&c[1], tput_rate(&c[1].res));
  print_config_row(&c[2], tput_rate(&c[3].res));
  print_config_row(&c[3], tput_rate(&c[3].res));
  printf(
      "(base: TorchScript with the same number of threads; torch thr 'host 1': "
      "manypy_script_set_intra_op_threads(1))\n");
  print_thread_time_note();
  const double c_r1 = tput_rate(&c[0].res) / tput_rate(&c[1].res);
  const double c_r2 = tput_rate(&c[2].res) / tput_rate(&c[3].res);
  const double c_s1 = tput_rate(&c[0].res) / tput_rate(&c[2].res);
  const double c_s2 = tput_rate(&c[1].res) / tput_rate(&c[3].res);
  printf("\n%-64s %8s %10s %8s\n", "ratio", "value", "target", "verdict");
  printf("%-64s %7.2fx %10s %8s\n", "throughput manypy / TorchScript, 2 threads", c_r1, ">= 0.95x",
         verdict(c_r1 >= 0.95));
  printf("%-64s %7.2fx %10s %8s\n", "throughput manypy / TorchScript, 1 thread", c_r2, "(info)",
         "");
  printf("%-64s %7.2fx %10s %8s\n", "manypy: 2 threads / 1 thread", c_s1, "(info)", "");
  printf("%-64s %7.2fx %10s %8s\n", "TorchScript: 2 threads / 1 thread", c_s2, "(info)", "");
  fflush(stdout);
}

/* E. What a deadline and a cancel token add to a call. */
static void section_e(void) {
  /* A far deadline (never reached) and a token (never cancelled): the cost
   * of being able to stop, paid by every such call. Plain and bounded calls
   * alternate in 10 rounds so drift in the machine hits both alike. */
  {
    manypy_cancel_token* token = manypy_cancel_token_new();
    manypy_call_options* bounded = manypy_call_options_new();
    if (token == NULL || bounded == NULL) die("out of memory");
    CHECK(manypy_call_options_set_timeout(bounded, 60LL * 1000000000), "set_timeout");
    CHECK(manypy_call_options_set_cancel_token(bounded, token), "set_cancel_token");
    samples plain = {0}, limited = {0};
    const int e_rounds = 10;
    const long per_round = small_calls / e_rounds > 100 ? small_calls / e_rounds : 100;
    for (int r = 0; r < e_rounds; ++r) {
      progress("E: round %d/%d", r + 1, e_rounds);
      const int bounded_first = r % 2;
      for (int j = 0; j < 2; ++j) {
        const int is_bounded = j == 0 ? bounded_first : !bounded_first;
        time_calls(identity, small_args, is_bounded ? bounded : NULL, per_round, per_round / 10,
                   is_bounded ? &limited : &plain);
      }
    }
    const double p50_plain = samples_quantile(&plain, 0.50),
                 p50_limited = samples_quantile(&limited, 0.50);
    printf(
        "\n== E. Deadline and cancel token: identity.pt, x [1, 16], one caller thread, pool "
        "of 1 ==\n");
    printf("%-46s %7s %9s %9s\n", "call options", "calls", "p50 us", "p99 us");
    printf("%-46s %7zu %9.2f %9.2f\n", "none", plain.n, p50_plain * 1e-3,
           samples_quantile(&plain, 0.99) * 1e-3);
    printf("%-46s %7zu %9.2f %9.2f\n", "timeout 60 s + cancel token", limited.n, p50_limited * 1e-3,
           samples_quantile(&limited, 0.99) * 1e-3);
    const double added_us = (p50_limited - p50_plain) * 1e-3;
    printf("\n%-64s %8s %10s %8s\n", "ratio (at p50)", "value", "target", "verdict");
    printf("%-64s %6.2fus %10s %8s\n", "added by a timeout and a cancel token", added_us,
           "<= 0.5us", verdict(added_us <= 0.5));
    fflush(stdout);
    free(plain.v);
    free(limited.v);
    manypy_call_options_free(bounded);
    manypy_cancel_token_free(token);
  }
}

/* Frees everything, then the run's CPU noise summary. */
static void clean_up(void) {
  stop_echo_child(&echo_small);
  stop_echo_child(&echo_large);
  manypy_value_free(identity_args);
  manypy_value_free(heavy_args);
  manypy_value_free(heavy_kwargs);
  manypy_value_free(resnet_args);
  manypy_value_free(small_args);
  manypy_value_free(large_args);
  manypy_script_free(resnet_script);
  manypy_object_free(identity);
  manypy_object_free(heavy1);
  manypy_object_free(heavy2);
  manypy_object_free(resnet);
  manypy_package_free(pkg_identity);
  manypy_package_free(pkg_heavy1);
  manypy_package_free(pkg_heavy2);
  manypy_package_free(pkg_resnet);
  manypy_pool_destroy(pool1);
  manypy_pool_destroy(pool2);

  char what[64];
  snprintf(what, sizeof what, "the %d measurements", g_noise.runs);
  noise_summary(&g_noise, what);
  for (int k = 0; k < 2; ++k) free(heavy_out[k].data);
  free(identity_out[0].data);
  free(resnet_out[0].data);
  free(identity_in);
  free(heavy_in);
  free(resnet_in);
  free(small_data);
}

int main(int argc, char** argv) {
  parse_options(argc, argv);
  load_inputs();
  const double bench_t0 = now_s();
  start_models();
  check_models();
  section_a();
  section_d();
  section_b();
  section_c();
  section_e();
  clean_up();
  printf("\ntotal benchmark wall time: %.1f s\n", now_s() - bench_t0);
  return 0;
}
