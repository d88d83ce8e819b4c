/*
 * manypy_bench_scaling: start-up cost, memory, throughput scaling and thread
 * hand-over cost of a manypy pool, measured in one run.
 *
 * A benchmark, not a test: it prints tables and ratios against the project's
 * targets ("meets"/"misses") and never fails on timing. It exits non-zero
 * only when a manypy call (or the plain-Python baseline) fails.
 *
 * Uses only the public C API (manypy.h), pthreads and /proc.
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
#include "manypy.h"

const char* bench_program = "manypy_bench_scaling";

extern char** environ;

/* The Python the interpreters embed (bench/CMakeLists.txt sets it per build leg). */
#ifndef PLAIN_PYTHON
#define PLAIN_PYTHON "/usr/bin/python3"
#endif
#define PLAIN_RUNS 3
#define NOOP_CALLS 20000
#define NOOP_WARMUP_CALLS 1000

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

/* Private memory of a process from smaps_rollup, in kB. Private_Clean counts
 * file pages (library text) that only this process maps; once a second
 * namespace maps the same library file, those pages move to Shared_Clean,
 * so Private_Dirty alone is the steadier per-interpreter cost. */
typedef struct private_mem {
  long clean;
  long dirty;
} private_mem;

static long total_kb(private_mem m) { return m.clean + m.dirty; }

static private_mem private_mem_self(void) {
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

/* ------------------------------------------------------------------------ */
/* Pools                                                                    */
/* ------------------------------------------------------------------------ */

static manypy_pool* make_pool(size_t interpreters, manypy_thread_mode mode) {
  manypy_pool_options* opts = manypy_pool_options_new();
  if (!opts) die("manypy_pool_options_new returned NULL");
  CHECK(manypy_pool_options_set_interpreters(opts, interpreters),
        "manypy_pool_options_set_interpreters");
  CHECK(manypy_pool_options_set_thread_mode(opts, mode), "manypy_pool_options_set_thread_mode");
  manypy_pool* pool = NULL;
  manypy_status* st = manypy_pool_create(opts, &pool);
  manypy_pool_options_free(opts);
  if (st) die_status("manypy_pool_create", st);
  if (manypy_pool_size(pool) != interpreters) {
    die("manypy_pool_size is %zu, expected %zu", manypy_pool_size(pool), interpreters);
  }
  return pool;
}

/* ------------------------------------------------------------------------ */
/* Workloads                                                                */
/* ------------------------------------------------------------------------ */

enum { WL_TORCH = 0, WL_PY = 1, WL_COUNT = 2 };

typedef struct workload {
  const char* name;
  const char* expression; /* one call */
  long iterations;        /* loop iterations per call */
} workload;

static const workload kWorkloads[WL_COUNT] = {
    {"small torch ops", "op_loop(2000)", 2000},
    {"pure Python", "py_loop(200000)", 200000},
};

static const char kDefineWorkloads[] =
    "def py_loop(n):\n"
    "    x = 0\n"
    "    for i in range(n):\n"
    "        x += i\n"
    "    return x\n"
    "import torch\n"
    "t = torch.ones(8, 8)\n"
    "def op_loop(n):\n"
    "    x = t\n"
    "    for _ in range(n):\n"
    "        x = x * 1.0000001 + 0.0\n"
    "    return float(x[0, 0])\n";

/* Checks one call's result, so a broken workload is not timed. Returns NULL
 * when the value is right, else a description. */
static const char* check_result(int wl, const manypy_value* v) {
  if (wl == WL_PY) {
    int64_t x;
    manypy_status* st = manypy_value_get_int64(v, &x);
    if (st) {
      manypy_status_free(st);
      return "py_loop did not return an int64";
    }
    const int64_t n = kWorkloads[WL_PY].iterations;
    return x == n * (n - 1) / 2 ? NULL : "py_loop returned a wrong sum";
  }
  double d;
  manypy_status* st = manypy_value_get_double(v, &d);
  if (st) {
    manypy_status_free(st);
    return "op_loop did not return a float";
  }
  const double expect = pow(1.0000001, (double)kWorkloads[WL_TORCH].iterations);
  return fabs(d - expect) < 1e-4 ? NULL : "op_loop returned a wrong value";
}

/* ------------------------------------------------------------------------ */
/* Throughput runs                                                          */
/* ------------------------------------------------------------------------ */

typedef struct worker {
  bench_control* ctl;
  manypy_pool* pool;
  int32_t index;
  int wl;
  int64_t torch_threads; /* torch.get_num_threads() as this thread sees it */
  long calls;            /* completed in the measured phase */
  double t_end;          /* when its last measured call completed */
  char error[512];
} worker;

/* One call; on failure fills w->error and returns 0. */
static int worker_call(worker* w, int check) {
  manypy_value* v = NULL;
  manypy_status* st = manypy_pool_eval(w->pool, w->index, kWorkloads[w->wl].expression, &v);
  if (st) {
    snprintf(w->error, sizeof w->error, "manypy_pool_eval(%d, \"%s\"): %s: %s", w->index,
             kWorkloads[w->wl].expression, manypy_code_name(manypy_status_code(st)),
             manypy_status_message(st));
    manypy_status_free(st);
    return 0;
  }
  if (check) {
    const char* bad = check_result(w->wl, v);
    if (bad) {
      snprintf(w->error, sizeof w->error, "interpreter %d: %s", w->index, bad);
      manypy_value_free(v);
      return 0;
    }
  }
  manypy_value_free(v);
  return 1;
}

/* Asks the interpreter, from this thread, how many intra-op threads torch
 * will use for this thread's ops. */
static int worker_torch_threads(worker* w) {
  manypy_value* v = NULL;
  manypy_status* st = manypy_pool_eval(w->pool, w->index, "torch.get_num_threads()", &v);
  if (!st) st = manypy_value_get_int64(v, &w->torch_threads);
  manypy_value_free(v);
  if (st) {
    snprintf(w->error, sizeof w->error, "manypy_pool_eval(%d, \"torch.get_num_threads()\"): %s: %s",
             w->index, manypy_code_name(manypy_status_code(st)), manypy_status_message(st));
    manypy_status_free(st);
    return 0;
  }
  return 1;
}

static void* worker_main(void* arg) {
  worker* w = arg;
  bench_control* ctl = w->ctl;
  /* Warm-up: at least one (checked) call, until the main thread says stop. */
  int ok = worker_call(w, 1) && worker_torch_threads(w);
  while (ok && !atomic_load(&ctl->warm_stop)) ok = worker_call(w, 0);
  pthread_barrier_wait(&ctl->measure);
  if (!ok) return NULL;
  long calls = 0;
  while (!atomic_load(&ctl->stop)) {
    if (!worker_call(w, 0)) return NULL;
    ++calls;
  }
  w->calls = calls;
  w->t_end = now_s();
  return NULL;
}

/* CPU time in clock ticks: this process and its waited-for children (from
 * /proc/self/stat) and the whole machine (non-idle time from /proc/stat). */
static void cpu_ticks(unsigned long long* self, unsigned long long* machine) {
  *self = 0;
  *machine = 0;
  FILE* f = fopen("/proc/self/stat", "r");
  if (f) {
    char buf[2048];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    const char* p = strrchr(buf, ')'); /* the command name may hold spaces */
    unsigned long long ut = 0, stt = 0;
    long long cut = 0, cst = 0; /* waited-for children: the plain-Python runs */
    if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld",
                    &ut, &stt, &cut, &cst) == 4) {
      *self = ut + stt + (unsigned long long)cut + (unsigned long long)cst;
    }
  }
  f = fopen("/proc/stat", "r");
  if (f) {
    unsigned long long v[8] = {0};
    if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
               &v[4], &v[5], &v[6], &v[7]) == 8) {
      *machine = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]; /* all but idle, iowait */
    }
    fclose(f);
  }
}

/* Highest and summed "other" CPU load seen during the throughput runs. */
static double g_other_max = 0.0;
static double g_other_sum = 0.0;
static int g_other_runs = 0;

typedef struct run_result {
  double throughput;     /* loop iterations per second, summed over threads */
  int torch_threads_min; /* torch.get_num_threads() seen by the workers */
  int torch_threads_max;
  double cpu_ours;       /* cores this process kept busy while measuring */
  double cpu_others;     /* cores everything else on the machine kept busy */
} run_result;

/* Runs `threads` threads on `pool`, thread k pinned to interpreter
 * k % pool size, for `seconds` after `warmup` seconds. */
static run_result run_throughput(manypy_pool* pool, int threads, int wl, double warmup,
                                 double seconds) {
  const size_t size = manypy_pool_size(pool);
  bench_threads t;
  bench_threads_init(&t, threads);
  worker* ws = calloc((size_t)threads, sizeof *ws);
  if (!ws) die("out of memory");
  for (int k = 0; k < threads; ++k) {
    ws[k].ctl = &t.ctl;
    ws[k].pool = pool;
    ws[k].index = (int32_t)((size_t)k % size);
    ws[k].wl = wl;
  }
  bench_threads_start(&t, ws, sizeof *ws, worker_main);
  bench_threads_warm_up(&t, warmup);
  unsigned long long self0, machine0, self1, machine1;
  cpu_ticks(&self0, &machine0);
  const double t0 = now_s();
  bench_threads_finish(&t, seconds);
  long total_calls = 0;
  double t_end = t0;
  cpu_ticks(&self1, &machine1);
  const double t1 = now_s();
  run_result r = {0, INT32_MAX, 0, 0, 0};
  for (int k = 0; k < threads; ++k) {
    if (ws[k].error[0]) die("%s", ws[k].error);
    total_calls += ws[k].calls;
    if (ws[k].t_end > t_end) t_end = ws[k].t_end;
    if (ws[k].torch_threads < r.torch_threads_min) r.torch_threads_min = (int)ws[k].torch_threads;
    if (ws[k].torch_threads > r.torch_threads_max) r.torch_threads_max = (int)ws[k].torch_threads;
  }
  free(ws);
  const double elapsed = t_end - t0;
  r.throughput =
      elapsed > 0 ? (double)total_calls * (double)kWorkloads[wl].iterations / elapsed : 0.0;
  const double hz = (double)sysconf(_SC_CLK_TCK);
  const double wall = t1 - t0;
  r.cpu_ours = (double)(self1 - self0) / hz / wall;
  r.cpu_others = ((double)(machine1 - machine0) - (double)(self1 - self0)) / hz / wall;
  if (r.cpu_others < 0) r.cpu_others = 0;
  if (r.cpu_others > g_other_max) g_other_max = r.cpu_others;
  g_other_sum += r.cpu_others;
  ++g_other_runs;
  return r;
}

/* Mean microseconds per manypy_pool_eval(pool, 0, "1") on this thread. */
/* Latency of eval("1") calls, in microseconds. */
typedef struct noop_result {
  double mean_us, p50_us, p99_us;
} noop_result;

static noop_result time_noop_calls(manypy_pool* pool) {
  static int64_t ns[NOOP_CALLS];
  double t0 = 0;
  for (int i = 0; i < NOOP_WARMUP_CALLS + NOOP_CALLS; ++i) {
    if (i == NOOP_WARMUP_CALLS) t0 = now_s();
    manypy_value* v = NULL;
    const int64_t start = now_ns();
    CHECK(manypy_pool_eval(pool, 0, "1", &v), "manypy_pool_eval(\"1\")");
    if (i >= NOOP_WARMUP_CALLS) ns[i - NOOP_WARMUP_CALLS] = now_ns() - start;
    if (i == 0) {
      int64_t x = 0;
      CHECK(manypy_value_get_int64(v, &x), "manypy_value_get_int64");
      if (x != 1) die("eval(\"1\") returned %" PRId64, x);
    }
    manypy_value_free(v);
  }
  noop_result r;
  r.mean_us = (now_s() - t0) * 1e6 / NOOP_CALLS;
  qsort(ns, NOOP_CALLS, sizeof ns[0], cmp_i64);
  r.p50_us = ns[NOOP_CALLS / 2] * 1e-3;
  r.p99_us = ns[NOOP_CALLS * 99 / 100] * 1e-3;
  return r;
}

/* ------------------------------------------------------------------------ */
/* Main                                                                     */
/* ------------------------------------------------------------------------ */

static void usage(FILE* to) {
  fprintf(to,
          "usage: manypy_bench_scaling [--quick] [--seconds S] [--new N]\n"
          "  --quick      0.5 s per throughput configuration (smoke test)\n"
          "  --seconds S  seconds per throughput configuration (default 3, or\n"
          "               $MANYPY_BENCH_SECONDS)\n"
          "  --new N      interpreters started in parallel in section A (default 3)\n");
}

static double parse_seconds(const char* s, const char* from) {
  char* end = NULL;
  double v = strtod(s, &end);
  if (!end || end == s || *end != '\0' || !(v > 0) || v > 3600) {
    die("bad seconds value '%s' (from %s): want a number in (0, 3600]", s, from);
  }
  return v;
}

int main(int argc, char** argv) {
  double seconds = 3.0;
  int new_interps = 3;
  const char* env = getenv("MANYPY_BENCH_SECONDS");
  if (env && *env) seconds = parse_seconds(env, "MANYPY_BENCH_SECONDS");
  if (argc == 2 && strcmp(argv[1], "--start-one") == 0) {
    /* Child mode for section A: one interpreter in a fresh process. */
    const private_mem before = private_mem_self();
    const double t0 = now_s();
    manypy_pool* pool = make_pool(1, MANYPY_THREAD_MODE_DIRECT);
    const double started = now_s() - t0;
    const private_mem after = private_mem_self();
    printf("%.6f %ld %ld\n", started, after.clean - before.clean, after.dirty - before.dirty);
    manypy_pool_destroy(pool);
    return 0;
  }
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (strcmp(a, "--quick") == 0) {
      seconds = 0.5;
    } else if (strcmp(a, "--seconds") == 0 && i + 1 < argc) {
      seconds = parse_seconds(argv[++i], "--seconds");
    } else if (strncmp(a, "--seconds=", 10) == 0) {
      seconds = parse_seconds(a + 10, "--seconds");
    } else if (strcmp(a, "--new") == 0 && i + 1 < argc) {
      new_interps = atoi(argv[++i]);
      if (new_interps < 1) die("--new wants a positive number");
    } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return 0;
    } else {
      usage(stderr);
      return 2;
    }
  }
  double warmup = seconds / 10.0;
  if (warmup < 0.1) warmup = 0.1;
  if (warmup > 0.5) warmup = 0.5;

  const double bench_t0 = now_s();
  printf("manypy scaling benchmark (library %s, %ld online cores, %.2f s per throughput "
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

  /* ---------------------------------------------------------------- A --- */
  progress("A: plain %s import torch and one interpreter in a fresh process, %d runs each",
           PLAIN_PYTHON, PLAIN_RUNS);
  unsigned long long a_self0, a_machine0, a_self1, a_machine1;
  cpu_ticks(&a_self0, &a_machine0);
  const double a_t0 = now_s();
  double plain_s[PLAIN_RUNS], one_s[PLAIN_RUNS];
  private_mem plain_mem[PLAIN_RUNS], one_mem[PLAIN_RUNS];
  for (int r = 0; r < PLAIN_RUNS; ++r) {
    run_plain_python(&plain_s[r], &plain_mem[r]);
    run_start_one("/proc/self/exe", &one_s[r], &one_mem[r]);
  }
  double s_sorted[PLAIN_RUNS], one_sorted[PLAIN_RUNS];
  long total_sorted[PLAIN_RUNS], dirty_sorted[PLAIN_RUNS];
  long one_total_sorted[PLAIN_RUNS], one_dirty_sorted[PLAIN_RUNS];
  for (int r = 0; r < PLAIN_RUNS; ++r) {
    s_sorted[r] = plain_s[r];
    total_sorted[r] = total_kb(plain_mem[r]);
    dirty_sorted[r] = plain_mem[r].dirty;
    one_sorted[r] = one_s[r];
    one_total_sorted[r] = total_kb(one_mem[r]);
    one_dirty_sorted[r] = one_mem[r].dirty;
  }
  qsort(s_sorted, PLAIN_RUNS, sizeof(double), cmp_double);
  qsort(total_sorted, PLAIN_RUNS, sizeof(long), cmp_long);
  qsort(dirty_sorted, PLAIN_RUNS, sizeof(long), cmp_long);
  qsort(one_sorted, PLAIN_RUNS, sizeof(double), cmp_double);
  qsort(one_total_sorted, PLAIN_RUNS, sizeof(long), cmp_long);
  qsort(one_dirty_sorted, PLAIN_RUNS, sizeof(long), cmp_long);
  const double plain_import = s_sorted[PLAIN_RUNS / 2];
  const long plain_total = total_sorted[PLAIN_RUNS / 2];
  const long plain_dirty = dirty_sorted[PLAIN_RUNS / 2];
  const double one_start = one_sorted[PLAIN_RUNS / 2];
  const long one_total = one_total_sorted[PLAIN_RUNS / 2];
  const long one_dirty = one_dirty_sorted[PLAIN_RUNS / 2];

  progress("A: pool of 1 (first interpreter)");
  const private_mem m0 = private_mem_self();
  double t = now_s();
  manypy_pool* first = make_pool(1, MANYPY_THREAD_MODE_DIRECT);
  const double start1 = now_s() - t;
  const private_mem m1 = private_mem_self();
  const int copies1 = libpython_copies();

  /* While the first pool holds interpreter 0 no interpreter is idle, so a
   * pool of N makes N new ones, started at once. (A pool of 1+N here would
   * start 1+N new interpreters, not N: leased interpreters are not shared.) */
  progress("A: pool of %d more (started in parallel while the first is alive)", new_interps);
  t = now_s();
  manypy_pool* more = make_pool((size_t)new_interps, MANYPY_THREAD_MODE_DIRECT);
  const double startN = now_s() - t;
  const private_mem m2 = private_mem_self();
  const int copiesN = libpython_copies();
  cpu_ticks(&a_self1, &a_machine1);
  double a_others = ((double)(a_machine1 - a_machine0) - (double)(a_self1 - a_self0)) /
                    (double)sysconf(_SC_CLK_TCK) / (now_s() - a_t0);
  if (a_others < 0) a_others = 0;
  manypy_pool_destroy(more);
  manypy_pool_destroy(first);

  const long gain1 = total_kb(m1) - total_kb(m0), dgain1 = m1.dirty - m0.dirty;
  const long gainN = total_kb(m2) - total_kb(m1), dgainN = m2.dirty - m1.dirty;
  const double per_startN = startN / new_interps;
  const double per_gainN = (double)gainN / new_interps, per_dgainN = (double)dgainN / new_interps;
  const int all = 1 + new_interps;
  const double per_gain_all = (double)(total_kb(m2) - total_kb(m0)) / all;
  const double per_dgain_all = (double)(m2.dirty - m0.dirty) / all;

  printf("\n== A. Start-up and memory (private = Private_Clean + Private_Dirty, smaps_rollup) ==\n");
  printf("%-50s %9s %14s %14s\n", "what", "wall", "private", "private dirty");
  printf("%-50s %8.3fs %11.1f MB %11.1f MB\n", "plain python3: import torch (median of 3)",
         plain_import, mb(plain_total), mb(plain_dirty));
  for (int r = 0; r < PLAIN_RUNS; ++r) {
    char run[64];
    snprintf(run, sizeof run, "  run %d", r + 1);
    printf("%-50s %8.3fs %11.1f MB %11.1f MB\n", run, plain_s[r], mb(total_kb(plain_mem[r])),
           mb(plain_mem[r].dirty));
  }
  printf("%-50s %8.3fs %+11.1f MB %+11.1f MB\n",
         "one interpreter, fresh process (median of 3)", one_start, mb(one_total), mb(one_dirty));
  for (int r = 0; r < PLAIN_RUNS; ++r) {
    char run[64];
    snprintf(run, sizeof run, "  run %d", r + 1);
    printf("%-50s %8.3fs %+11.1f MB %+11.1f MB\n", run, one_s[r], mb(total_kb(one_mem[r])),
           mb(one_mem[r].dirty));
  }
  printf("%-50s %8.3fs %+11.1f MB %+11.1f MB\n", "pool of 1: first interpreter, this process",
         start1, mb(gain1), mb(dgain1));
  char label[128];
  snprintf(label, sizeof label, "pool of %d: %d new interpreters start in parallel", new_interps,
           new_interps);
  printf("%-50s %8.3fs %+11.1f MB %+11.1f MB\n", label, startN, mb(gainN), mb(dgainN));
  printf("%-50s %8.3fs %+11.1f MB %+11.1f MB\n", "  per new interpreter (wall / N, gain / N)",
         per_startN, per_gainN / 1024.0, per_dgainN / 1024.0);
  snprintf(label, sizeof label, "  per interpreter, all %d (gain since before the first)", all);
  printf("%-50s %9s %+11.1f MB %+11.1f MB\n", label, "", per_gain_all / 1024.0,
         per_dgain_all / 1024.0);
  printf("libpython copies mapped (one per interpreter): %d after the first pool, %d after the "
         "second\n",
         copies1, copiesN);
  printf("CPU used by other processes while section A ran: %.2f cores of %ld%s\n", a_others,
         sysconf(_SC_NPROCESSORS_ONLN),
         a_others > 0.25 ? " (disturbed: start times are not comparable)" : "");

  printf("\n%-60s %8s %10s %8s\n", "ratio", "value", "target", "verdict");
  const double r_start1 = one_start / plain_import;
  const double r_startN = per_startN / plain_import;
  const double r_mem1 = (double)one_total / (double)plain_total;
  const double r_memN = per_gainN / (double)plain_total;
  const double r_mem_all = per_gain_all / (double)plain_total;
  const double r_dmem1 = (double)one_dirty / (double)plain_dirty;
  const double r_dmemN = per_dgainN / (double)plain_dirty;
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
  printf("(Private_Clean is library text mapped by one process only: it turns Shared when any\n"
         " other process or namespace maps the same files, so 'private' moves with what else\n"
         " runs; 'private dirty' does not.)\n");
  fflush(stdout);

  /* ---------------------------------------------------------------- B --- */
  /* Configurations: index 0..4 = 1x1, 1x2, 1x4, 2x2, 4x4. */
  enum { C_1x1, C_1x2, C_1x4, C_2x2, C_4x4, C_COUNT };
  static const struct {
    int interps, threads;
  } kConfigs[C_COUNT] = {{1, 1}, {1, 2}, {1, 4}, {2, 2}, {4, 4}};
  run_result res[WL_COUNT][C_COUNT];
  double tput[WL_COUNT][C_COUNT];
  static const int kPoolSizes[] = {1, 2, 4};
  for (size_t p = 0; p < sizeof kPoolSizes / sizeof kPoolSizes[0]; ++p) {
    const int size = kPoolSizes[p];
    manypy_pool* pool = make_pool((size_t)size, MANYPY_THREAD_MODE_DIRECT);
    CHECK(manypy_pool_exec_all(pool, kDefineWorkloads), "manypy_pool_exec_all(workloads)");
    for (int wl = 0; wl < WL_COUNT; ++wl) {
      for (int c = 0; c < C_COUNT; ++c) {
        if (kConfigs[c].interps != size) continue;
        progress("B: %s, %d interp x %d thread(s)", kWorkloads[wl].name, size,
                 kConfigs[c].threads);
        res[wl][c] = run_throughput(pool, kConfigs[c].threads, wl, warmup, seconds);
        tput[wl][c] = res[wl][c].throughput;
      }
    }
    manypy_pool_destroy(pool);
  }

  printf("\n== B. Throughput (loop iterations/s summed over threads, DIRECT mode, %.1f s each) "
         "==\n",
         seconds);
  printf("%-16s %-22s %14s %8s %9s %9s %9s\n", "workload", "config", "iterations/s", "vs 1x1",
         "torch thr", "cpu ours", "cpu other");
  for (int wl = 0; wl < WL_COUNT; ++wl) {
    for (int c = 0; c < C_COUNT; ++c) {
      char cfg[64], thr[32];
      snprintf(cfg, sizeof cfg, "%d interp x %d thread%s", kConfigs[c].interps,
               kConfigs[c].threads, kConfigs[c].threads > 1 ? "s" : "");
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
  printf("(torch thr: torch.get_num_threads() seen by the worker threads; cpu: cores kept busy "
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

  /* ---------------------------------------------------------------- C --- */
  progress("C: %d calls of eval(\"1\") in DIRECT mode", NOOP_CALLS);
  manypy_pool* direct = make_pool(1, MANYPY_THREAD_MODE_DIRECT);
  const noop_result direct_noop = time_noop_calls(direct);
  manypy_pool_destroy(direct);

  progress("C: %d calls of eval(\"1\") in HANDOFF mode", NOOP_CALLS);
  manypy_pool* handoff1 = make_pool(1, MANYPY_THREAD_MODE_HANDOFF);
  const noop_result handoff_noop = time_noop_calls(handoff1);
  CHECK(manypy_pool_exec_all(handoff1, kDefineWorkloads), "manypy_pool_exec_all(workloads)");
  progress("C: small torch ops, HANDOFF, 1 interp x 2 threads");
  const run_result handoff_1x2 = run_throughput(handoff1, 2, WL_TORCH, warmup, seconds);
  manypy_pool_destroy(handoff1);

  progress("C: small torch ops, HANDOFF, 2 interp x 2 threads");
  manypy_pool* handoff2 = make_pool(2, MANYPY_THREAD_MODE_HANDOFF);
  CHECK(manypy_pool_exec_all(handoff2, kDefineWorkloads), "manypy_pool_exec_all(workloads)");
  const run_result handoff_2x2 = run_throughput(handoff2, 2, WL_TORCH, warmup, seconds);
  manypy_pool_destroy(handoff2);

  printf("\n== C. Thread hand-over cost (1 caller thread, %d x eval(\"1\") on a 1-interpreter "
         "pool) ==\n",
         NOOP_CALLS);
  printf("%-46s %9s %9s %9s\n", "mode (us per call)", "p50", "p99", "mean");
  printf("%-46s %9.2f %9.2f %9.2f\n", "DIRECT (caller enters the interpreter)",
         direct_noop.p50_us, direct_noop.p99_us, direct_noop.mean_us);
  printf("%-46s %9.2f %9.2f %9.2f\n", "HANDOFF (library thread runs the call)",
         handoff_noop.p50_us, handoff_noop.p99_us, handoff_noop.mean_us);
  const double handoff_us = handoff_noop.p50_us - direct_noop.p50_us;
  printf("%-46s %+9.2f %9s %+9.2f   target <= 5 us at p50: %s\n",
         "hand-over cost (HANDOFF - DIRECT)", handoff_us, "",
         handoff_noop.mean_us - direct_noop.mean_us, verdict(handoff_us <= 5.0));
  printf("\n%-46s %12s %12s %9s %9s %9s\n", "small torch ops (DIRECT: section B)",
         "HANDOFF it/s", "DIRECT it/s", "HO / DIR", "torch thr", "cpu other");
  printf("%-46s %12.0f %12.0f %8.2fx %9d %9.2f\n", "2 interp x 2 threads", handoff_2x2.throughput,
         tput[WL_TORCH][C_2x2], handoff_2x2.throughput / tput[WL_TORCH][C_2x2],
         handoff_2x2.torch_threads_max, handoff_2x2.cpu_others);
  printf("%-46s %12.0f %12.0f %8.2fx %9d %9.2f\n", "1 interp x 2 threads (info)",
         handoff_1x2.throughput, tput[WL_TORCH][C_1x2],
         handoff_1x2.throughput / tput[WL_TORCH][C_1x2], handoff_1x2.torch_threads_max,
         handoff_1x2.cpu_others);

  char load[128] = "?";
  FILE* lf = fopen("/proc/loadavg", "r");
  if (lf) {
    if (!fgets(load, sizeof load, lf)) strcpy(load, "?");
    fclose(lf);
    load[strcspn(load, "\n")] = '\0';
  }
  printf("\nload average at the end (/proc/loadavg): %s\n", load);
  printf("CPU used by other processes during the %d throughput runs: mean %.2f, max %.2f cores "
         "of %ld%s\n",
         g_other_runs, g_other_sum / g_other_runs, g_other_max, sysconf(_SC_NPROCESSORS_ONLN),
         g_other_max > 0.25 ? " (runs with 'cpu other' above ~0.25 were disturbed: re-run on a "
                              "quiet machine before quoting their ratios)"
                            : "");
  printf("\ntotal benchmark wall time: %.1f s\n", now_s() - bench_t0);
  fflush(stdout);
  return 0;
}
