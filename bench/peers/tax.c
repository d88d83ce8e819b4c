/*
 * manypy_bench_tax: the embedding tax (docs/performance.md), python_heavy in
 * manypy against plain python3 processes, in short bursts interleaved
 * side by side:
 *
 *   manypy       a pool of N interpreters, N host threads, thread i pinned
 *                to interpreter i
 *   plain        N python3 processes (tax_plain.py), the model loop on
 *                command, no IPC inside a burst
 *
 * Each round runs one burst of CALLS calls per caller on each side, the
 * order swapped every round, so that a change in the speed of the machine
 * (a shared VM's neighbours) falls on both sides alike; bench/peers' runs
 * of seconds per design cannot separate a few percent from such drift. It
 * prints each side's calls/s over all bursts and the median of the
 * per-round ratios. Outputs are checked once on every interpreter and
 * process before timing.
 *
 *   build/bin/manypy_bench_tax [--n N] [--rounds R] [--calls K] [--archives DIR]
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"
#include "cli.h"
#include "models.h"

#ifndef PYTHON
#define PYTHON "/usr/bin/python3"
#endif

const char* bench_program = "manypy_bench_tax";

enum { MAX_N = 8 };

static const char kUsage[] =
    "usage: manypy_bench_tax [--n N] [--rounds R] [--calls K] [--archives DIR]\n"
    "  --n N           callers on each side: interpreters and processes (default 1)\n"
    "  --rounds R      interleaved rounds (default 40)\n"
    "  --calls K       calls per caller in one burst (default 200)\n"
    "  --archives DIR  the sample archives (default: the build's)\n";

/* ---- the plain side: N processes, bursts on command -------------------- */

typedef struct plain_proc {
  pid_t pid;
  FILE* to;
  FILE* from;
} plain_proc;

static void plain_start(plain_proc* p, const char* archive) {
  int in[2], out[2];
  /* Close-on-exec: a later process must not inherit this one's stdin,
   * which would keep it open after plain_stop closes ours. */
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) die("pipe failed");
  p->pid = fork();
  if (p->pid < 0) die("fork failed");
  if (p->pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    close(in[1]);
    close(out[0]);
    if (chdir(MANYPY_BENCH_PEERS_DIR) != 0) _exit(126); /* common.py */
    execl(PYTHON, PYTHON, "tax_plain.py", archive, (char*)NULL);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  p->to = fdopen(in[1], "w");
  p->from = fdopen(out[0], "r");
  char line[64];
  if (!p->to || !p->from || !fgets(line, sizeof line, p->from) || strcmp(line, "ready\n") != 0) {
    die("%s tax_plain.py %s did not start", PYTHON, archive);
  }
}

static double plain_burst(plain_proc* procs, int n, int calls) {
  const double t0 = now_s();
  for (int i = 0; i < n; ++i) {
    fprintf(procs[i].to, "%d\n", calls);
    fflush(procs[i].to);
  }
  for (int i = 0; i < n; ++i) {
    char line[64];
    if (!fgets(line, sizeof line, procs[i].from)) die("a plain process died mid-burst");
  }
  return now_s() - t0;
}

static void plain_stop(plain_proc* p) {
  fclose(p->to); /* end of stdin: it exits */
  fclose(p->from);
  int status = 0;
  if (waitpid(p->pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    die("a plain process failed");
  }
}

/* ---- the manypy side: N pinned threads, bursts behind a barrier -------- */

typedef struct manypy_side {
  manypy_object* object;
  manypy_value *args, *kwargs;
  pthread_barrier_t start, end;
  int calls; /* this burst's, 0 to stop */
} manypy_side;

typedef struct caller {
  manypy_side* side;
  manypy_call_options* pin;
} caller;

static void call_once(caller* c) {
  manypy_value* out = NULL;
  manypy_status* st =
      manypy_object_call(c->side->object, NULL, c->side->args, c->side->kwargs, c->pin, &out);
  if (st) die_status("manypy_object_call", st);
  manypy_value_free(out);
}

static void* caller_main(void* arg) {
  caller* c = arg;
  for (;;) {
    pthread_barrier_wait(&c->side->start);
    const int calls = c->side->calls;
    for (int k = 0; k < calls; ++k) call_once(c);
    pthread_barrier_wait(&c->side->end);
    if (calls == 0) return NULL;
  }
}

static double manypy_burst(manypy_side* s, int calls) {
  s->calls = calls;
  const double t0 = now_s();
  pthread_barrier_wait(&s->start);
  pthread_barrier_wait(&s->end);
  return now_s() - t0;
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char** argv) {
  int n = 1, rounds = 40, calls = 200;
  const char* archives = MANYPY_BENCH_ARCHIVES;
  cli_option opts[] = {
      CLI_OPT_INT("--n", &n, 1, MAX_N),
      CLI_OPT_INT("--rounds", &rounds, 2, 10000),
      CLI_OPT_INT("--calls", &calls, 1, 1000000),
      CLI_OPT_STRING("--archives", &archives),
  };
  cli_parse(argc, argv, opts, sizeof opts / sizeof opts[0], kUsage);

  model_case models[MODEL_COUNT];
  model_cases(models, 512);
  model_case* m = &models[0]; /* python_heavy */
  model_load(m, archives);
  char archive[4096];
  snprintf(archive, sizeof archive, "%s/%s.pt", archives, m->name);

  progress("starting %d plain process(es) and a pool of %d", n, n);
  plain_proc procs[MAX_N];
  for (int i = 0; i < n; ++i) plain_start(&procs[i], archive);

  manypy_side side = {.args = model_args(m), .kwargs = model_kwargs(m)};
  manypy_pool* pool = bench_make_pool((size_t)n, MANYPY_THREAD_MODE_DIRECT);
  manypy_package* pkg = NULL;
  CHECK(manypy_package_load_file(pool, archive, &pkg), "manypy_package_load_file");
  CHECK(manypy_package_load_pickle(pkg, "model", "model.pkl", &side.object), "load_pickle");
  pthread_barrier_init(&side.start, NULL, (unsigned)n + 1);
  pthread_barrier_init(&side.end, NULL, (unsigned)n + 1);
  caller callers[MAX_N];
  pthread_t threads[MAX_N];
  for (int i = 0; i < n; ++i) {
    callers[i] = (caller){&side, manypy_call_options_new()};
    if (!callers[i].pin) die("out of memory");
    CHECK(manypy_call_options_set_interpreter(callers[i].pin, i), "set_interpreter");
    manypy_value* out = NULL;
    CHECK(manypy_object_call(side.object, NULL, side.args, side.kwargs, callers[i].pin, &out),
          "manypy_object_call");
    model_check_value("manypy", m, out);
    manypy_value_free(out);
    if (pthread_create(&threads[i], NULL, caller_main, &callers[i]) != 0) die("pthread_create");
  }
  manypy_burst(&side, 200); /* warm-up, as the plain processes did */

  printf(
      "manypy_bench_tax (%s): python_heavy, N = %d, %d interleaved rounds of %d "
      "calls per caller\n",
      MANYPY_BENCH_LEG, n, rounds, calls);
  double t_manypy = 0, t_plain = 0;
  double* ratio = xmalloc(sizeof(double) * (size_t)rounds);
  for (int r = 0; r < rounds; ++r) {
    double a, b;
    if (r % 2 == 0) {
      a = manypy_burst(&side, calls);
      b = plain_burst(procs, n, calls);
    } else {
      b = plain_burst(procs, n, calls);
      a = manypy_burst(&side, calls);
    }
    t_manypy += a;
    t_plain += b;
    ratio[r] = b / a; /* throughput manypy / plain */
  }
  const double total = (double)rounds * calls * n;
  printf("  manypy  %9.1f calls/s\n  plain   %9.1f calls/s\n", total / t_manypy, total / t_plain);
  const double med = median(ratio, rounds);
  printf(
      "  throughput manypy / plain: %.3fx over all bursts; per round: median %.3fx, "
      "quartiles %.3fx to %.3fx\n",
      t_plain / t_manypy, med, ratio[rounds / 4], ratio[(3 * rounds) / 4]);

  manypy_burst(&side, 0); /* stops the callers */
  for (int i = 0; i < n; ++i) {
    pthread_join(threads[i], NULL);
    manypy_call_options_free(callers[i].pin);
  }
  for (int i = 0; i < n; ++i) plain_stop(&procs[i]);
  free(ratio);
  manypy_object_free(side.object);
  manypy_package_free(pkg);
  manypy_value_free(side.args);
  manypy_value_free(side.kwargs);
  manypy_pool_destroy(pool);
  model_unload(m);
  return 0;
}
