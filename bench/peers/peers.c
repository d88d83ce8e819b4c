/*
 * manypy_bench_peers: manypy against the designs a service would otherwise
 * build to run Python PyTorch models without a shared GIL, on the same work
 * in one run (docs/performance.md):
 *
 *   manypy       N interpreters in this process (public C API only)
 *   worker pool  N python3 worker processes, a Unix socket and shared memory
 *   shared GIL   one interpreter shared by the N threads
 *   N processes  N plain python3 processes, no IPC: the ceiling
 *   TorchScript  the scripted model on the host's libtorch
 *
 * for N = 1, 2, 4 (N caller threads) and four models: python_heavy,
 * ResNet-18 at batch 1, big_light (512 MB of weights, a light forward: one
 * float per 4 KiB page, about 2 ms) and
 * identity (where IPC is all there is). For each: throughput, p50/p99
 * latency, the total Pss of every process involved, start-up until the
 * first request is served, and the CPU other processes used meanwhile.
 *
 * A benchmark, not a test: ratios against targets print meets/misses and
 * never fail the run. It exits non-zero when a design fails or returns a
 * wrong output (each is checked on every interpreter, worker and process
 * before it is timed), which is what its --quick ctest entry tests.
 *
 * Sections of main: options, models, measurements, tables, targets, chart.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "designs.h"
#include "harness.h"
#include "models.h"
#include "options.h"
#include "report.h"
#include "runner.h"

#ifndef MANYPY_BENCH_PEERS_DIR
#define MANYPY_BENCH_PEERS_DIR "bench/peers"
#endif
/* The Python that runs the models outside manypy (workers, plain
 * processes, the model maker): the one the interpreters embed, on the same
 * torch (bench/peers/CMakeLists.txt sets it per build leg). The chart needs
 * only matplotlib, from Debian's python3-matplotlib. */
#ifndef PYTHON
#define PYTHON "/usr/bin/python3"
#endif
/* Which build leg this is (torch version and Python), for the header. */
#ifndef MANYPY_BENCH_LEG
#define MANYPY_BENCH_LEG "torch ?, " PYTHON
#endif
#define CHART_PYTHON "/usr/bin/python3"

const char* bench_program = "manypy_bench_peers";

/* Runs argv (a Python, its script and arguments) and dies unless it succeeds. */
static void run_python(char* const* argv) {
  fflush(stdout);
  const pid_t pid = fork();
  if (pid < 0) die("fork failed");
  if (pid == 0) {
    execv(argv[0], argv);
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    die("%s %s failed", argv[0], argv[1]);
  }
}

/* Modification time of a file, 0 if it does not exist. */
static time_t mtime_of(const char* path) {
  struct stat st;
  return stat(path, &st) == 0 ? st.st_mtime : 0;
}

/* The big model (and identity's TorchScript) are made on first use, into
 * ARCHIVES/peers: 512 MB is too much to build with every tree. They are
 * made again when their sources are newer than what was made. */
static void make_models(const options* o) {
  char json[4200], dir[4096], mb[16], script[4200];
  snprintf(json, sizeof json, "%s/manifest.json", o->archives);
  if (!file_exists(json)) {
    die("%s: no sample archives there (build the target manypy_archives, or pass --archives "
        "DIR)",
        o->archives);
  }
  snprintf(dir, sizeof dir, "%s/peers", o->archives);
  snprintf(json, sizeof json, "%s/big_light_%d.json", dir, o->big_mb);
  snprintf(script, sizeof script, "%s/identity_script.pt", dir);
  const time_t made = mtime_of(json) < mtime_of(script) ? mtime_of(json) : mtime_of(script);
  const char* sources[] = {MANYPY_BENCH_PEERS_DIR "/make_models.py",
                           MANYPY_BENCH_PEERS_DIR "/../../samples/models/big_weights.py",
                           MANYPY_BENCH_PEERS_DIR "/../../samples/models/identity.py"};
  int stale = made == 0;
  for (size_t k = 0; k < sizeof sources / sizeof *sources; ++k)
    stale |= mtime_of(sources[k]) > made;
  if (!stale) return;
  unlink(json); /* make_models.py skips what exists */
  unlink(script);
  progress("making %s/big_light_%d.pt (%d MB) and identity_script.pt", dir, o->big_mb, o->big_mb);
  snprintf(mb, sizeof mb, "%d", o->big_mb);
  char maker[] = MANYPY_BENCH_PEERS_DIR "/make_models.py", opt[] = "--big-mb", py[] = PYTHON;
  char* argv[] = {py, maker, dir, opt, mb, NULL};
  run_python(argv);
}

/* Which models --models names (all without it); dies on an unknown name. */
static void select_models(const options* o, const model_case* models, int wanted[MODEL_COUNT]) {
  for (int mi = 0; mi < MODEL_COUNT; ++mi) wanted[mi] = o->models == NULL;
  if (o->models == NULL) return;
  char list[256];
  snprintf(list, sizeof list, "%s", o->models);
  for (char *save = NULL, *name = strtok_r(list, ",", &save); name;
       name = strtok_r(NULL, ",", &save)) {
    int found = 0;
    for (int mi = 0; mi < MODEL_COUNT; ++mi) {
      if (strcmp(name, models[mi].label) == 0) wanted[mi] = found = 1;
    }
    if (!found) die("--models: no model %s (python_heavy, resnet18, big_light, identity)", name);
  }
}

static void measure(model_case* models, const int wanted[MODEL_COUNT], const options* o,
                    char** argv, results* res) {
  run_config c = {.archives = o->archives,
                  .python = PYTHON,
                  .peers_dir = MANYPY_BENCH_PEERS_DIR,
                  .warmup = o->warmup,
                  .seconds = o->seconds};
  for (int mi = 0; mi < MODEL_COUNT; ++mi) {
    if (!wanted[mi]) continue;
    c.m = &models[mi];
    for (int k = 0; k < o->nn; ++k) {
      c.n = o->ns[k];
      /* Side by side: every design of one (model, N) in each round, the
       * order reversed every other round so that a change of load on the
       * machine falls on all of them alike. */
      for (int r = 0; r < o->rounds; ++r) {
        for (int j = 0; j < DESIGN_COUNT; ++j) {
          c.d = (design)(r % 2 == 0 ? j : DESIGN_COUNT - 1 - j);
          if (!design_applies(c.d, c.m)) continue;
          progress("%s, N = %d, %s, round %d/%d", c.m->label, c.n, design_names[c.d], r + 1,
                   o->rounds);
          run_result one;
          runner_run(&c, mi, argv, &one);
          runner_merge(&res->r[mi][k][c.d], &one);
          res->has[mi][k][c.d] = 1;
        }
      }
      for (int d = 0; d < DESIGN_COUNT; ++d) {
        if (res->has[mi][k][d]) runner_mean(&res->r[mi][k][d], o->rounds);
      }
    }
  }
}

static void chart(const options* o, const model_case* models, results* res) {
  char tsv[4096];
  snprintf(tsv, sizeof tsv, "%s.tsv", o->chart);
  report_tsv(tsv, models, o, res);
  char script[] = MANYPY_BENCH_PEERS_DIR "/chart.py", py[] = CHART_PYTHON;
  char* argv[] = {py, script, tsv, (char*)o->chart, NULL};
  run_python(argv);
  printf("\nchart: %s (figures: %s)\n", o->chart, tsv);
}

int main(int argc, char** argv) {
  /* --- options ---------------------------------------------------------- */
  options o;
  options_parse(argc, argv, &o);
  setenv("PYTHONDONTWRITEBYTECODE", "1", 1); /* no __pycache__ in the source tree */
  model_case models[MODEL_COUNT];
  model_cases(models, o.big_mb);
  if (o.child) {
    if (o.child_design < 0 || o.child_design >= DESIGN_COUNT || o.child_model < 0 ||
        o.child_model >= MODEL_COUNT || o.child_n < 1) {
      die("bad --child arguments");
    }
    model_load(&models[o.child_model], o.archives);
    const run_config c = {(design)o.child_design,
                          o.child_n,
                          &models[o.child_model],
                          o.archives,
                          PYTHON,
                          MANYPY_BENCH_PEERS_DIR,
                          o.warmup,
                          o.seconds};
    runner_child(&c, o.child_fd);
    return 0;
  }
  const double t0 = now_s();
  int wanted[MODEL_COUNT];
  select_models(&o, models, wanted);
  printf("manypy_bench_peers (%s): N = ", MANYPY_BENCH_LEG);
  for (int k = 0; k < o.nn; ++k) printf("%s%d", k ? ", " : "", o.ns[k]);
  printf("; %d round(s) of %.2f s measured after %.2f s of warm-up per design; archives %s\n",
         o.rounds, o.seconds, o.warmup, o.archives);
  printf(
      "the benchmark's own process, before any design: Pss %.1f MB (counted in every design "
      "but N processes)\n",
      (double)pss_kb(0) / 1024.0);

  /* --- models ----------------------------------------------------------- */
  make_models(&o);
  for (int mi = 0; mi < MODEL_COUNT; ++mi) {
    if (wanted[mi]) model_load(&models[mi], o.archives);
  }

  /* --- measurements ----------------------------------------------------- */
  results* res = calloc(1, sizeof *res);
  if (!res) die("out of memory");
  measure(models, wanted, &o, argv, res);

  /* --- tables and targets ----------------------------------------------- */
  printf(
      "\n(calls/s: summed over the N callers; vs N proc: over the N-processes ceiling of the "
      "same N; p50/p99: one request, as its caller sees it; Pss: every process of the design; "
      "first s: start until the first request was served; all s: until every interpreter, "
      "worker or process had served one; cpu: cores kept busy by the design / by other "
      "processes while measuring)\n");
  for (int mi = 0; mi < MODEL_COUNT; ++mi) {
    if (wanted[mi]) report_model(&models[mi], mi, &o, res);
  }
  report_targets(models, &o, res);
  report_noise(&o, res);

  /* --- chart ------------------------------------------------------------ */
  if (o.chart) chart(&o, models, res);
  printf("\nall outputs checked; total benchmark wall time: %.1f s\n", now_s() - t0);
  for (int mi = 0; mi < MODEL_COUNT; ++mi) {
    if (wanted[mi]) model_unload(&models[mi]);
  }
  return 0;
}
