#include "report.h"

#include <math.h>
#include <stdio.h>
#include <unistd.h>

/* The index of N = n in o->ns, or -1 when it was not measured. */
static int n_index(const options* o, int n) {
  for (int k = 0; k < o->nn; ++k) {
    if (o->ns[k] == n) return k;
  }
  return -1;
}

static double p_us(run_result* r, double q) { return samples_quantile(&r->lat, q) * 1e-3; }

void report_model(const model_case* m, int mi, const options* o, results* res) {
  printf("\n== %s: %s.pt, TorchScript %s%s%s ==\n", m->label, m->name, m->script,
         design_applies(D_AOTI, m) ? ", AOTInductor " : "",
         design_applies(D_AOTI, m) ? m->aoti : "");
  printf("%-3s %-12s %10s %9s %9s %9s %9s %10s %9s %9s %9s %9s\n", "N", "design", "calls/s",
         "vs N proc", "p50 us", "p99 us", "calls", "Pss MB", "first s", "all s", "cpu ours",
         "cpu other");
  for (int k = 0; k < o->nn; ++k) {
    const double ceiling = res->has[mi][k][D_PLAIN] ? res->r[mi][k][D_PLAIN].rate : NAN;
    for (int d = 0; d < DESIGN_COUNT; ++d) {
      if (!res->has[mi][k][d]) continue;
      run_result* r = &res->r[mi][k][d];
      printf("%-3d %-12s %10.1f %8.2fx %9.1f %9.1f %9ld %10.1f %9.2f %9.2f %9.2f %9.2f\n", o->ns[k],
             design_names[d], r->rate, r->rate / ceiling, p_us(r, 0.5), p_us(r, 0.99), r->calls,
             (double)r->pss_kb / 1024.0, r->first_s, r->all_s, cpu_cores_ours(&r->cpu),
             cpu_cores_other(&r->cpu));
    }
  }
  fflush(stdout);
}

/* The ratio of one figure between two designs at N = n, or NAN. */
typedef enum figure { F_RATE, F_P50, F_PSS, F_FIRST, F_ALL } figure;

static double fig(results* res, int mi, int k, int d, figure f) {
  run_result* r = &res->r[mi][k][d];
  switch (f) {
    case F_RATE:
      return r->rate;
    case F_P50:
      return samples_quantile(&r->lat, 0.5);
    case F_PSS:
      return (double)r->pss_kb;
    case F_FIRST:
      return r->first_s;
    case F_ALL:
      return r->all_s;
  }
  return NAN;
}

/* A target row, or with info set a row for information only. */
static void target(const options* o, results* res, int mi, int n, int da, int db, figure f,
                   const char* what, int at_least, double goal, int info) {
  const int k = n_index(o, n);
  char label[160];
  snprintf(label, sizeof label, "%s (N = %d)", what, n);
  if (k < 0 || !res->has[mi][k][da] || !res->has[mi][k][db]) {
    int model_measured = 0; /* a model left out by --models gets no rows */
    for (int j = 0; j < o->nn; ++j) model_measured |= res->has[mi][j][da];
    if (model_measured) printf("%-70s %8s %10s %8s\n", label, "-", "", "(N not measured)");
    return;
  }
  const double ratio = fig(res, mi, k, da, f) / fig(res, mi, k, db, f);
  if (info) {
    ratio_info(label, ratio);
  } else {
    ratio_row(label, ratio, at_least, goal);
  }
}

void report_targets(const model_case* models, const options* o, results* res) {
  enum { HEAVY = 0, RESNET = 1, BIG = 2, SMALL = 3 };
  ratio_header("== Targets: manypy vs the worker pool and the N-process ceiling ==");
  /* At N = 1 the N-processes design is one plain process: what an
   * interpreter inside manypy costs against python3 on its own (the
   * embedding tax, docs/performance.md). */
  target(o, res, HEAVY, 1, D_MANYPY, D_PLAIN, F_RATE,
         "python_heavy: throughput manypy / one plain process", 1, 0.97, 0);
  target(o, res, HEAVY, 2, D_MANYPY, D_POOL, F_RATE,
         "python_heavy: throughput manypy / worker pool", 1, 1.15, 0);
  target(o, res, HEAVY, 2, D_MANYPY, D_POOL, F_P50, "python_heavy: p50 manypy / worker pool", 0,
         0.9, 0);
  target(o, res, HEAVY, 2, D_MANYPY, D_PLAIN, F_RATE,
         "python_heavy: throughput manypy / N processes", 1, 0.95, 0);
  target(o, res, SMALL, 2, D_MANYPY, D_POOL, F_P50, "identity: p50 manypy / worker pool", 0, 0.2,
         0);
  target(o, res, RESNET, 2, D_MANYPY, D_POOL, F_RATE, "resnet18: throughput manypy / worker pool",
         1, 1.0, 0);
  char what[128];
  snprintf(what, sizeof what, "%s (%d MB): total Pss manypy / worker pool", models[BIG].label,
           o->big_mb);
  target(o, res, BIG, 4, D_MANYPY, D_POOL, F_PSS, what, 0, 0.5, 0);
  /* manypy serves from its first interpreter (serve early), as the pool
   * from its first worker (docs/serving.md). */
  for (int mi = 0; mi < MODEL_COUNT; ++mi) {
    snprintf(what, sizeof what, "%s: start-up to first request, manypy / worker pool",
             models[mi].label);
    target(o, res, mi, 4, D_MANYPY, D_POOL, F_FIRST, what, 0, 0.8, 0);
  }
  /* Issue 25: the compiled host path against TorchScript and the rest, on
   * the torch 2.x leg (rows for N not measured or designs that did not run
   * say so). */
  const int compiled[] = {HEAVY, RESNET};
  for (size_t j = 0; j < sizeof compiled / sizeof compiled[0]; ++j) {
    const int mi = compiled[j];
    if (!design_applies(D_AOTI, &models[mi])) continue;
    snprintf(what, sizeof what, "%s: throughput AOTInductor / TorchScript", models[mi].label);
    target(o, res, mi, 2, D_AOTI, D_SCRIPT, F_RATE, what, 1, 1.0, 0);
  }
  ratio_header("== For information ==");
  for (size_t j = 0; j < sizeof compiled / sizeof compiled[0]; ++j) {
    const int mi = compiled[j];
    if (!design_applies(D_AOTI, &models[mi])) continue;
    static const design others[] = {D_MANYPY, D_POOL, D_PLAIN};
    for (size_t d = 0; d < sizeof others / sizeof others[0]; ++d) {
      snprintf(what, sizeof what, "%s: throughput AOTInductor / %s", models[mi].label,
               design_names[others[d]]);
      target(o, res, mi, 2, D_AOTI, others[d], F_RATE, what, 1, 0, 1);
    }
    snprintf(what, sizeof what, "%s: total Pss AOTInductor / TorchScript", models[mi].label);
    target(o, res, mi, 2, D_AOTI, D_SCRIPT, F_PSS, what, 0, 0, 1);
  }
  for (int mi = 0; mi < MODEL_COUNT; ++mi) {
    snprintf(what, sizeof what, "%s: start-up until all N serve, manypy / worker pool",
             models[mi].label);
    target(o, res, mi, 4, D_MANYPY, D_POOL, F_ALL, what, 0, 0, 1);
  }
  for (int mi = 0; mi < MODEL_COUNT; ++mi) {
    snprintf(what, sizeof what, "%s: throughput manypy / shared GIL", models[mi].label);
    target(o, res, mi, 2, D_MANYPY, D_SHARED, F_RATE, what, 1, 0, 1);
    snprintf(what, sizeof what, "%s: throughput manypy / TorchScript", models[mi].label);
    target(o, res, mi, 2, D_MANYPY, D_SCRIPT, F_RATE, what, 1, 0, 1);
    snprintf(what, sizeof what, "%s: throughput worker pool / N processes", models[mi].label);
    target(o, res, mi, 2, D_POOL, D_PLAIN, F_RATE, what, 1, 0, 1);
    snprintf(what, sizeof what, "%s: total Pss manypy / worker pool", models[mi].label);
    target(o, res, mi, 4, D_MANYPY, D_POOL, F_PSS, what, 0, 0, 1);
  }
  printf(
      "(targets are ratios from this one run, side by side; a run on a busy machine moves "
      "them: see the cpu other column)\n");
  fflush(stdout);
}

void report_noise(const options* o, results* res) {
  double sum = 0, max = 0;
  int runs = 0;
  for (int mi = 0; mi < MODEL_COUNT; ++mi) {
    for (int k = 0; k < o->nn; ++k) {
      for (int d = 0; d < DESIGN_COUNT; ++d) {
        if (!res->has[mi][k][d]) continue;
        const double c = cpu_cores_other(&res->r[mi][k][d].cpu);
        sum += c;
        max = c > max ? c : max;
        ++runs;
      }
    }
  }
  printf("\nCPU used by other processes while measuring: mean %.2f, max %.2f cores of %ld%s\n",
         runs ? sum / runs : 0.0, max, sysconf(_SC_NPROCESSORS_ONLN),
         max > 0.25 ? " (rows with cpu other above ~0.25 were disturbed)" : "");
}

void report_tsv(const char* path, const model_case* models, const options* o, results* res) {
  FILE* f = fopen(path, "w");
  if (!f) die("cannot write %s", path);
  fprintf(f, "model\tN\tdesign\tcalls_per_s\tp50_us\tp99_us\tpss_mb\tfirst_s\tall_s\tcpu_other\n");
  for (int mi = 0; mi < MODEL_COUNT; ++mi) {
    for (int k = 0; k < o->nn; ++k) {
      for (int d = 0; d < DESIGN_COUNT; ++d) {
        if (!res->has[mi][k][d]) continue;
        run_result* r = &res->r[mi][k][d];
        fprintf(f, "%s\t%d\t%s\t%.2f\t%.2f\t%.2f\t%.1f\t%.3f\t%.3f\t%.2f\n", models[mi].label,
                o->ns[k], design_names[d], r->rate, p_us(r, 0.5), p_us(r, 0.99),
                (double)r->pss_kb / 1024.0, r->first_s, r->all_s, cpu_cores_other(&r->cpu));
      }
    }
  }
  if (fclose(f) != 0) die("cannot write %s", path);
}
