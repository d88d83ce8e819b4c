/*
 * manypy_bench_lifecycle: the serving lifecycle (docs/serving.md), measured.
 *
 *   G. Growth: a pool that starts with 1 interpreter and may grow to 4
 *      (manypy_pool_options_set_max_interpreters, growing after waits of
 *      2 ms) meets a step of load, 8 threads calling python_heavy.pt;
 *      the time until its throughput (over the last 0.5 s) reaches 90% of a
 *      pool started at 4 under the same load, measured after it in the same
 *      process.
 *   H. Hot swap: python_heavy.pt on 2 interpreters, 8 threads calling; the
 *      p99 while a new version (the archive loaded again, warmed on every
 *      interpreter, switched to under a lock, the old one freed) replaces
 *      the current one every --swap-every seconds, against the p99 without
 *      swaps, alternating (target: <= 1.5x).
 *   M. Memory given back: a pool grown from 1 to 4 interpreters serving
 *      python_heavy.pt, then shrunk to 1: how much of what the 3 added
 *      interpreters cost comes back to the process (private memory, and
 *      RSS).
 *   L. Lease clean-up: pools of 1 created and destroyed one after another,
 *      each leasing the same interpreter; the time to create one (the
 *      lease begins) and to destroy it (the lease ends: its globals,
 *      modules and settings put back, garbage collected), for a pool that
 *      ran one expression, one that served python_heavy.pt, and one whose
 *      code changed settings that the end of the lease puts back, in turn.
 *
 * G and M need interpreters that were never started, so each section runs
 * in a process of its own (this program again, with --sections and one
 * letter). Start-up to the first request is bench/peers' (first s).
 *
 * A benchmark, not a test: it prints figures and ratios and never fails on
 * timing; it exits non-zero when a call fails or an output is wrong.
 *
 * Usage: manypy_bench_lifecycle [--quick] [--seconds S] [--swap-every S]
 *                               [--sections GHML] [--archives DIR]
 *   --quick         S = 0.5, one round (smoke test)
 *   --seconds S     measured seconds per phase and round (default 4)
 *   --swap-every S  seconds between swaps in H (default 1)
 *   --sections X    only the sections named (default GHML)
 *   --archives DIR  the sample archives (default: the build's)
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"
#include "cli.h"
#include "harness.h"
#include "outputs.h"

#ifndef MANYPY_BENCH_ARCHIVES
#define MANYPY_BENCH_ARCHIVES "archives"
#endif

extern char** environ;

const char* bench_program = "manypy_bench_lifecycle";

#define CALLERS 8
#define HEAVY_STEPS 5

static const char* g_archives = MANYPY_BENCH_ARCHIVES;
static double g_seconds = 4;
static double g_swap_every = 1;
static int g_quick;
static float* g_heavy_in;
static expected g_heavy_out[] = {{"logits", 2, {4, 10}, NULL, 0}, {"norm", 1, {4}, NULL, 0}};

/* ---- python_heavy ------------------------------------------------------------ */

typedef struct heavy {
  manypy_object* object;
  manypy_value *args, *kwargs;
} heavy;

static void heavy_args(heavy* h) {
  const int64_t shape[] = {4, 64};
  manypy_value* x = NULL;
  CHECK(manypy_value_new_tensor_from_buffer(g_heavy_in, 4 * 64 * sizeof(float),
                                            (DLDataType){kDLFloat, 32, 1}, 2, shape, NULL, 0, NULL,
                                            NULL, &x),
        "manypy_value_new_tensor_from_buffer");
  h->args = manypy_value_new_tuple();
  CHECK(manypy_value_append(h->args, x), "manypy_value_append");
  h->kwargs = manypy_value_new_dict();
  CHECK(manypy_value_dict_set(h->kwargs, "steps", manypy_value_new_int64(HEAVY_STEPS)), "steps");
  CHECK(manypy_value_dict_set(h->kwargs, "normalize", manypy_value_new_bool(0)), "normalize");
}

static void call_checked(const heavy* h, manypy_object* object, int32_t interpreter) {
  manypy_call_options* o = manypy_call_options_new();
  if (o == NULL) die("out of memory");
  CHECK(manypy_call_options_set_interpreter(o, interpreter), "set_interpreter");
  manypy_value* out = NULL;
  CHECK(manypy_object_call(object, NULL, h->args, h->kwargs, o, &out), "python_heavy");
  check_model_output("python_heavy", out, g_heavy_out, 2, HEAVY_STEPS, NULL);
  manypy_value_free(out);
  manypy_call_options_free(o);
}

/* A new version: the archive loaded again, checked (and so its replica
 * loaded) on every interpreter before it serves. */
static manypy_object* load_version(manypy_pool* pool, const heavy* h) {
  char path[4096];
  snprintf(path, sizeof path, "%s/python_heavy.pt", g_archives);
  manypy_package* package = NULL;
  CHECK(manypy_package_load_file(pool, path, &package), path);
  manypy_object* object = NULL;
  CHECK(manypy_package_load_pickle(package, "model", "model.pkl", &object), path);
  manypy_package_free(package); /* the object keeps it */
  for (int32_t i = 0; i < (int32_t)manypy_pool_size(pool); ++i) call_checked(h, object, i);
  return object;
}

/* ---- callers ----------------------------------------------------------------- */

/* What the callers call: the current version, shared under the lock for
 * each call (the hot swap pattern of docs/serving.md). */
typedef struct serving {
  pthread_mutex_t mu;
  manypy_object* current; /* under mu */
  const heavy* h;
  atomic_int stop;
  atomic_int record; /* latencies are kept while set */
  atomic_long calls;
} serving;

typedef struct caller {
  serving* s;
  pthread_t thread;
  pthread_mutex_t mu;
  samples lat; /* under mu */
} caller;

static void* call_loop(void* arg) {
  caller* c = arg;
  serving* s = c->s;
  while (!atomic_load(&s->stop)) {
    pthread_mutex_lock(&s->mu);
    manypy_object* mine = NULL;
    CHECK(manypy_object_share(s->current, &mine), "manypy_object_share");
    pthread_mutex_unlock(&s->mu);
    const int64_t t0 = now_ns();
    manypy_value* out = NULL;
    CHECK(manypy_object_call(mine, NULL, s->h->args, s->h->kwargs, NULL, &out), "python_heavy");
    const int64_t took = now_ns() - t0;
    manypy_value_free(out);
    manypy_object_free(mine);
    atomic_fetch_add(&s->calls, 1);
    if (atomic_load(&s->record)) {
      pthread_mutex_lock(&c->mu);
      samples_push(&c->lat, took);
      pthread_mutex_unlock(&c->mu);
    }
  }
  return NULL;
}

static void callers_start(serving* s, caller* cs) {
  atomic_store(&s->stop, 0);
  for (int i = 0; i < CALLERS; ++i) {
    cs[i].s = s;
    pthread_mutex_init(&cs[i].mu, NULL);
    memset(&cs[i].lat, 0, sizeof cs[i].lat);
    if (pthread_create(&cs[i].thread, NULL, call_loop, &cs[i]) != 0) die("pthread_create");
  }
}

/* Stops and joins the callers; their latencies go into *all. */
static void callers_stop(serving* s, caller* cs, samples* all) {
  atomic_store(&s->stop, 1);
  for (int i = 0; i < CALLERS; ++i) {
    pthread_join(cs[i].thread, NULL);
    if (all) samples_append(all, &cs[i].lat);
    free(cs[i].lat.v);
    pthread_mutex_destroy(&cs[i].mu);
  }
}

/* Latencies recorded for `seconds` while the callers run; with `swap`, a new
 * version replaces s->current every g_swap_every seconds meanwhile. */
static void record_phase(serving* s, caller* cs, manypy_pool* pool, double seconds, int swap,
                         samples* lat, int* swaps) {
  for (int i = 0; i < CALLERS; ++i) {
    pthread_mutex_lock(&cs[i].mu);
    cs[i].lat.n = 0;
    pthread_mutex_unlock(&cs[i].mu);
  }
  atomic_store(&s->record, 1);
  const double t0 = now_s();
  double next = t0 + g_swap_every;
  while (now_s() - t0 < seconds) {
    if (!swap) {
      sleep_s(0.01);
      continue;
    }
    if (now_s() < next) {
      sleep_s(fmin(0.01, next - now_s()));
      continue;
    }
    next += g_swap_every;
    manypy_object* fresh = load_version(pool, s->h);
    pthread_mutex_lock(&s->mu);
    manypy_object* old = s->current;
    s->current = fresh;
    pthread_mutex_unlock(&s->mu);
    manypy_object_free(old);
    ++*swaps;
  }
  atomic_store(&s->record, 0);
  for (int i = 0; i < CALLERS; ++i) {
    pthread_mutex_lock(&cs[i].mu);
    samples_append(lat, &cs[i].lat);
    pthread_mutex_unlock(&cs[i].mu);
  }
}

/* ---- G: growth ----------------------------------------------------------------- */

/* G's threshold: a few times python_heavy's call (about 0.5 ms here), as
 * docs/serving.md advises; the default 20 ms suits calls of milliseconds. */
#define GROW_AFTER_NS (2 * 1000 * 1000)

static manypy_pool* make_pool(size_t interpreters, size_t max) {
  manypy_pool_options* o = manypy_pool_options_new();
  if (o == NULL) die("out of memory");
  CHECK(manypy_pool_options_set_interpreters(o, interpreters), "set_interpreters");
  if (max) {
    CHECK(manypy_pool_options_set_max_interpreters(o, max), "set_max_interpreters");
    CHECK(manypy_pool_options_set_grow_after(o, GROW_AFTER_NS), "set_grow_after");
  }
  CHECK(manypy_pool_options_set_thread_mode(o, MANYPY_THREAD_MODE_DIRECT), "set_thread_mode");
  manypy_pool* pool = NULL;
  CHECK(manypy_pool_create(o, &pool), "manypy_pool_create");
  manypy_pool_options_free(o);
  return pool;
}

static void section_growth(const heavy* h) {
  const double window = 0.5, tick = 0.05;
  const double horizon = g_quick ? 15 : 40; /* the growing pool's time under load */
  printf(
      "\n== G. growth: 1 -> 4 interpreters under a step of %d callers (python_heavy.pt, "
      "DIRECT, grow after %.0f ms)\n",
      CALLERS, GROW_AFTER_NS / 1e6);
  double t0 = now_s();
  manypy_pool* pool = make_pool(1, 4);
  const double one_start = now_s() - t0;
  serving s = {.h = h};
  pthread_mutex_init(&s.mu, NULL);
  s.current = load_version(pool, h);
  /* Calls counted every tick from the step on. */
  const int ticks = (int)(horizon / tick);
  long* counted = xmalloc(sizeof(long) * (size_t)(ticks + 1));
  size_t* sizes = xmalloc(sizeof(size_t) * (size_t)(ticks + 1));
  caller cs[CALLERS];
  t0 = now_s();
  callers_start(&s, cs);
  int last = 0;
  for (int k = 0; k <= ticks; ++k) {
    while (now_s() - t0 < k * tick) sleep_s(0.002);
    counted[k] = atomic_load(&s.calls);
    sizes[k] = manypy_pool_size(pool);
    last = k;
    /* Enough once the pool has had 4 members for 8 s, all serving (their
     * replicas load at their first calls, after their starts). */
    manypy_pool_stats st = {.struct_size = sizeof st};
    CHECK(manypy_pool_get_stats(pool, &st), "manypy_pool_get_stats");
    const int back = k - (int)((g_quick ? 2 : 8) / tick);
    if (back >= 0 && sizes[back] == 4 && st.ready + st.busy == 4) break;
  }
  callers_stop(&s, cs, NULL);
  manypy_object_free(s.current);
  manypy_pool_destroy(pool);

  /* The reference: a pool started at 4 (the interpreters above, reused),
   * under the same load. */
  pool = make_pool(4, 0);
  serving r = {.h = h};
  pthread_mutex_init(&r.mu, NULL);
  r.current = load_version(pool, h);
  callers_start(&r, cs);
  sleep_s(g_quick ? 0.2 : 1);
  const long c0 = atomic_load(&r.calls);
  const double r0 = now_s();
  sleep_s(g_seconds);
  const double reference = (double)(atomic_load(&r.calls) - c0) / (now_s() - r0);
  callers_stop(&r, cs, NULL);
  manypy_object_free(r.current);
  manypy_pool_destroy(pool);

  const int per_window = (int)(window / tick);
  double reached = NAN, whole = NAN;
  for (int k = per_window; k <= last; ++k) {
    const double rate = (double)(counted[k] - counted[k - per_window]) / window;
    if (isnan(reached) && rate >= 0.9 * reference) reached = k * tick;
    if (isnan(whole) && sizes[k] == 4) whole = k * tick;
  }
  printf("one interpreter started in %.2f s; a pool of 4 serves %.0f calls/s under this load\n",
         one_start, reference);
  printf("%-8s %10s %12s\n", "time s", "members", "calls/s");
  for (int k = per_window; k <= last; k += per_window) {
    printf("%8.2f %10zu %12.0f\n", k * tick, sizes[k],
           (double)(counted[k] - counted[k - per_window]) / window);
  }
  if (isnan(whole) || isnan(reached)) {
    printf("growth: the pool did not reach 4 members (or 90%% of the reference) in %.0f s\n",
           last * tick);
  } else {
    printf(
        "growth: 4 members after %.2f s; throughput at 90%% of the pool started at 4 after "
        "%.2f s (%.1fx one interpreter's start)\n",
        whole, reached, reached / one_start);
  }
  free(counted);
  free(sizes);
}

/* ---- H: hot swap ----------------------------------------------------------------- */

static void section_hot_swap(const heavy* h) {
  const int rounds = g_quick ? 1 : 2;
  printf(
      "\n== H. hot swap: python_heavy.pt on 2 interpreters (DIRECT), %d callers; a new "
      "version every %.2f s, against none (%d rounds of %.1f s each, alternating)\n",
      CALLERS, g_swap_every, rounds, g_seconds);
  manypy_pool* pool = make_pool(2, 0);
  serving s = {.h = h};
  pthread_mutex_init(&s.mu, NULL);
  s.current = load_version(pool, h);
  caller cs[CALLERS];
  callers_start(&s, cs);
  sleep_s(g_quick ? 0.2 : 1);
  samples without = {0}, with = {0};
  int swaps = 0;
  for (int round = 0; round < rounds; ++round) {
    /* A B, then B A: a drift of the machine's load falls on both. */
    const int first_swaps = round % 2;
    record_phase(&s, cs, pool, g_seconds, first_swaps, first_swaps ? &with : &without, &swaps);
    record_phase(&s, cs, pool, g_seconds, !first_swaps, first_swaps ? &without : &with, &swaps);
  }
  callers_stop(&s, cs, NULL);
  manypy_object_free(s.current);
  manypy_pool_destroy(pool);
  const size_t n_without = without.n, n_with = with.n;
  const double p50a = samples_quantile(&without, 0.5) / 1e3,
               p99a = samples_quantile(&without, 0.99) / 1e3;
  const double p50b = samples_quantile(&with, 0.5) / 1e3,
               p99b = samples_quantile(&with, 0.99) / 1e3;
  printf("%-14s %10s %10s %10s\n", "phase", "calls", "p50 us", "p99 us");
  printf("%-14s %10zu %10.0f %10.0f\n", "no swaps", n_without, p50a, p99a);
  printf("%-14s %10zu %10.0f %10.0f   (%d swaps)\n", "swapping", n_with, p50b, p99b, swaps);
  ratio_header("target");
  char what[128];
  snprintf(what, sizeof what, "H. p99 with a swap every %.2f s / without (N = 2)", g_swap_every);
  ratio_row(what, p99b / p99a, 0, 1.5);
  free(without.v);
  free(with.v);
}

/* ---- M: memory given back ---------------------------------------------------------- */

/* Private_Clean + Private_Dirty, and Rss, of this process in MiB. */
static void memory_mib(double* private_mib, double* rss_mib) {
  FILE* f = fopen("/proc/self/smaps_rollup", "r");
  if (f == NULL) die("cannot open /proc/self/smaps_rollup");
  char line[256];
  long long clean = 0, dirty = 0, rss = 0, kb;
  while (fgets(line, sizeof line, f) != NULL) {
    if (sscanf(line, "Private_Clean: %lld kB", &kb) == 1) clean = kb;
    if (sscanf(line, "Private_Dirty: %lld kB", &kb) == 1) dirty = kb;
    if (sscanf(line, "Rss: %lld kB", &kb) == 1) rss = kb;
  }
  fclose(f);
  *private_mib = (double)(clean + dirty) / 1024;
  *rss_mib = (double)rss / 1024;
}

static void section_memory(const heavy* h) {
  printf(
      "\n== M. memory given back: a pool grown from 1 to 4 interpreters serving "
      "python_heavy.pt, shrunk to 1, grown again\n");
  manypy_pool* pool = make_pool(1, 0);
  manypy_object* object = load_version(pool, h);
  double p1, r1, p4, r4, p1b, r1b, p4b, r4b;
  memory_mib(&p1, &r1);
  CHECK(manypy_pool_resize(pool, 4), "manypy_pool_resize");
  for (int32_t i = 0; i < 4; ++i) call_checked(h, object, i);
  memory_mib(&p4, &r4);
  CHECK(manypy_pool_resize(pool, 1), "manypy_pool_resize");
  sleep_s(0.5);
  memory_mib(&p1b, &r1b);
  const double t0 = now_s();
  CHECK(manypy_pool_resize(pool, 4), "manypy_pool_resize");
  const double regrow = now_s() - t0;
  for (int32_t i = 0; i < 4; ++i) call_checked(h, object, i);
  memory_mib(&p4b, &r4b);
  manypy_object_free(object);
  manypy_pool_destroy(pool);
  printf("%-34s %12s %10s\n", "", "private MiB", "RSS MiB");
  printf("%-34s %12.0f %10.0f\n", "1 interpreter", p1, r1);
  printf("%-34s %12.0f %10.0f\n", "grown to 4, each serving", p4, r4);
  printf("%-34s %12.0f %10.0f\n", "shrunk to 1", p1b, r1b);
  printf("%-34s %12.0f %10.0f   (in %.3f s: no start)\n", "grown to 4 again", p4b, r4b, regrow);
  printf(
      "an interpreter costs %.0f MiB private (%.0f RSS); shrinking gave back %.0f MiB private "
      "(%.0f RSS) per interpreter: %.0f%%\n",
      (p4 - p1) / 3, (r4 - r1) / 3, (p4 - p1b) / 3, (r4 - r1b) / 3, 100 * (p4 - p1b) / (p4 - p1));
}

/* ---- L: lease clean-up ------------------------------------------------------------- */

/* What a pool of L runs before it is destroyed. The settings changed do not
 * change python_heavy's results, so that a build that does not put them
 * back (to compare with) still serves it. */
enum { LEASE_IDLE, LEASE_SERVED, LEASE_SETTINGS, LEASE_KINDS };
static const char* const kLeaseKinds[LEASE_KINDS] = {"ran one expression", "served python_heavy.pt",
                                                     "changed 10 settings"};
#define CHANGE_SETTINGS                                        \
  "import gc, io, sys, warnings, torch\n"                      \
  "gc.disable()\n"                                             \
  "gc.set_threshold(100000, 50, 50)\n"                         \
  "warnings.simplefilter('ignore')\n"                          \
  "sys.setrecursionlimit(5000)\n"                              \
  "sys.setswitchinterval(0.01)\n"                              \
  "sys.stdout = io.StringIO()\n"                               \
  "torch.use_deterministic_algorithms(True, warn_only=True)\n" \
  "torch.set_flush_denormal(True)\n"                           \
  "torch.set_grad_enabled(False)\n"                            \
  "torch.set_printoptions(precision=2)\n"

/* CPU time of this whole process (every thread: the interpreter's own
 * thread does the clean-up), in ns: what the lease costs however loaded the
 * machine is, where wall time also counts the waits for a core. */
static int64_t process_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Inside an interpreter: what putting the settings back costs lease_end
 * (its two passes), with nothing changed and with CHANGE_SETTINGS' 10
 * changed, and what a thread's first entry in a new lease costs
 * (restore_thread): the medians of n, in microseconds of the thread's CPU
 * time (a loaded machine's waits for a core do not count); "" on a build
 * without them. */
static const char kTimeRestore[] =
    "import time, _manypy_runtime as r\n"
    "def _lease_restore_us(n, change):\n"
    "    d = getattr(r, '_defaults', None)\n"
    "    if d is None:\n"
    "        return ''\n"
    "    spent = ([], [], [])\n"
    "    clock = time.thread_time_ns\n"
    "    for _ in range(n):\n"
    "        for k in range(2):\n"
    "            if k:\n"
    "                exec(change, {})\n"
    "            t = clock()\n"
    "            d.restore(check=False)\n"
    "            d.restore(check=True)\n"
    "            spent[k].append(clock() - t)\n"
    "        t = clock()\n"
    "        d.restore_thread()\n"
    "        spent[2].append(clock() - t)\n"
    "    return ' '.join(f'{sorted(s)[n // 2] / 1e3:.1f}' for s in spent)\n";

static void section_lease(const heavy* h) {
  const int rounds = g_quick ? 5 : 40;
  printf(
      "\n== L. lease clean-up: pools of 1 created and destroyed in turn (%d of each kind), "
      "leasing the same interpreter\n",
      rounds);
  manypy_pool_destroy(make_pool(1, 0)); /* starts the interpreter, takes its defaults */
  samples create[LEASE_KINDS] = {{0}}, destroy[LEASE_KINDS] = {{0}}, cpu[LEASE_KINDS] = {{0}};
  for (int r = 0; r < rounds; ++r) {
    for (int kind = 0; kind < LEASE_KINDS; ++kind) {
      int64_t t0 = now_ns();
      manypy_pool* pool = make_pool(1, 0);
      samples_push(&create[kind], now_ns() - t0);
      manypy_value* out = NULL;
      CHECK(manypy_pool_eval(pool, 0, "1 + 1", &out), "manypy_pool_eval");
      manypy_value_free(out);
      if (kind == LEASE_SERVED) {
        manypy_object* object = load_version(pool, h);
        manypy_object_free(object);
      } else if (kind == LEASE_SETTINGS) {
        CHECK(manypy_pool_exec(pool, 0, CHANGE_SETTINGS), "changing settings");
      }
      t0 = now_ns();
      const int64_t c0 = process_cpu_ns();
      manypy_pool_destroy(pool);
      samples_push(&destroy[kind], now_ns() - t0);
      samples_push(&cpu[kind], process_cpu_ns() - c0);
    }
  }
  printf("%-26s %14s %14s %14s\n", "a pool that", "create p50 ms", "destroy p50 ms",
         "destroy CPU ms");
  for (int kind = 0; kind < LEASE_KINDS; ++kind) {
    printf("%-26s %14.3f %14.3f %14.3f\n", kLeaseKinds[kind],
           samples_quantile(&create[kind], 0.5) / 1e6, samples_quantile(&destroy[kind], 0.5) / 1e6,
           samples_quantile(&cpu[kind], 0.5) / 1e6);
    free(create[kind].v);
    free(destroy[kind].v);
    free(cpu[kind].v);
  }
  /* The settings' part of the clean-up, timed where it runs (mid-lease,
   * which puts back what CHANGE_SETTINGS changed as lease_end would). */
  manypy_pool* pool = make_pool(1, 0);
  CHECK(manypy_pool_exec(pool, 0, kTimeRestore), "timing the restore");
  manypy_value* out = NULL;
  CHECK(manypy_pool_eval(pool, 0,
                         g_quick ? "_lease_restore_us(20, '''" CHANGE_SETTINGS "''')"
                                 : "_lease_restore_us(200, '''" CHANGE_SETTINGS "''')",
                         &out),
        "timing the restore");
  const char* text = NULL;
  size_t length = 0;
  CHECK(manypy_value_get_string(out, &text, &length), "the restore's times");
  double clean = 0, changed = 0, thread = 0;
  if (length == 0 || sscanf(text, "%lf %lf %lf", &clean, &changed, &thread) != 3) {
    printf("putting settings back: not in this build\n");
  } else {
    printf(
        "putting settings back, as lease_end does (two passes), median CPU: %.1f us with "
        "nothing changed, %.1f us with 10 changed; a thread's first entry in a new lease: "
        "%.1f us\n",
        clean, changed, thread);
  }
  manypy_value_free(out);
  manypy_pool_destroy(pool);
}

/* ---- main ------------------------------------------------------------------------- */

/* Runs section `letter` in a new process of this program. */
static void run_alone(char letter, char** argv) {
  char sections[2] = {letter, '\0'};
  char seconds[32], swap_every[32];
  snprintf(seconds, sizeof seconds, "%g", g_seconds);
  snprintf(swap_every, sizeof swap_every, "%g", g_swap_every);
  char* args[] = {argv[0],
                  "--sections",
                  sections,
                  "--seconds",
                  seconds,
                  "--swap-every",
                  swap_every,
                  "--archives",
                  (char*)g_archives,
                  g_quick ? "--quick" : NULL,
                  NULL};
  fflush(stdout);
  pid_t pid;
  if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, args, environ) != 0) die("posix_spawn");
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    die("section %c failed", letter);
  }
}

int main(int argc, char** argv) {
  const char* kUsage =
      "usage: manypy_bench_lifecycle [--quick] [--seconds S] [--swap-every S] [--sections GHML] "
      "[--archives DIR]\n";
  const char* sections = "GHML";
  cli_option opts[] = {
      CLI_OPT_FLAG("--quick", &g_quick),
      CLI_OPT_NUMBER("--seconds", &g_seconds, 0.01, 3600),
      CLI_OPT_NUMBER("--swap-every", &g_swap_every, 0.01, 3600),
      CLI_OPT_STRING("--sections", &sections),
      CLI_OPT_STRING("--archives", &g_archives),
  };
  const size_t nopts = sizeof opts / sizeof opts[0];
  cli_parse(argc, argv, opts, nopts, kUsage);
  if (g_quick && !cli_given(opts, nopts, "--seconds")) g_seconds = 0.5;
  if (strspn(sections, "GHML") != strlen(sections) || sections[0] == '\0') {
    die_usage(kUsage, "--sections takes letters of GHML, not '%s'", sections);
  }
  if (strlen(sections) > 1) {
    printf("manypy serving-lifecycle benchmark (library %s, %ld online cores; %.2f s per phase)\n",
           manypy_version_string(), sysconf(_SC_NPROCESSORS_ONLN), g_seconds);
    for (const char* p = sections; *p; ++p) run_alone(*p, argv);
    return 0;
  }
  size_t n;
  g_heavy_in = read_archive_file(g_archives, "python_heavy.input.bin", &n);
  if (n != 4 * 64 * sizeof(float)) die("python_heavy.input.bin: %zu bytes, expected 1024", n);
  expected_load(g_archives, "python_heavy", &g_heavy_out[0]);
  expected_load(g_archives, "python_heavy", &g_heavy_out[1]);
  heavy h;
  heavy_args(&h);
  switch (sections[0]) {
    case 'G':
      section_growth(&h);
      break;
    case 'H':
      section_hot_swap(&h);
      break;
    case 'M':
      section_memory(&h);
      break;
    case 'L':
      section_lease(&h);
      break;
  }
  manypy_value_free(h.args);
  manypy_value_free(h.kwargs);
  free(g_heavy_in);
  return 0;
}
