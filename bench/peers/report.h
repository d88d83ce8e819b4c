/* The peers benchmark's output: a table per model, the targets with their
 * meets/misses verdicts, and the figures as a TSV for chart.py. */
#ifndef MANYPY_BENCH_PEERS_REPORT_H
#define MANYPY_BENCH_PEERS_REPORT_H

#include "designs.h"
#include "options.h"

typedef struct results {
  run_result r[MODEL_COUNT][MAX_NS][DESIGN_COUNT];
  int has[MODEL_COUNT][MAX_NS][DESIGN_COUNT];
} results;

void report_model(const model_case* m, int mi, const options* o, results* res);
void report_targets(const model_case* models, const options* o, results* res);
void report_noise(const options* o, results* res);
/* Writes the figures to `path` (tab-separated, one row per model, N, design). */
void report_tsv(const char* path, const model_case* models, const options* o, results* res);

#endif
