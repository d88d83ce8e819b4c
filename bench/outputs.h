/* Expected model outputs (NAME.expected.KEY.bin, written by
 * samples/models/make_archives.py and bench/peers/make_models.py) and the
 * checks every benchmark runs before it times a model: a wrong output ends
 * the run, so a benchmark never times a broken model. */
#ifndef MANYPY_BENCH_OUTPUTS_H
#define MANYPY_BENCH_OUTPUTS_H

#include <stddef.h>
#include <stdint.h>

#include "manypy.h"

/* Largest absolute difference accepted (as bench/peers/common.py). */
#define OUTPUT_TOLERANCE 1e-4

/* One expected float32 output: its key and shape, then its data. */
typedef struct expected {
  const char* key;
  int32_t ndim;
  int64_t shape[4];
  float* data;
  size_t count;
} expected;

/* Reads DIR/MODEL.expected.KEY.bin; dies if it is missing or its size is
 * not the shape's. */
void expected_load(const char* dir, const char* model, expected* e);

/* Compares C-contiguous float32 data of ndim/shape with e; returns the
 * largest absolute difference, or dies naming `what` and what differs. */
double check_floats(const char* what, const expected* e, const float* got, int32_t ndim,
                    const int64_t* shape);

/* The same for a manypy tensor value (float32, CPU, C-contiguous). */
double check_tensor_value(const char* what, const manypy_value* v, const expected* e);

/* A model's whole result: one tensor when `steps` < 0 and the only expected
 * output is "out"; otherwise a dict with a tensor under each expected key,
 * and, when `steps` >= 0, the int "steps" equal to it (python_heavy's).
 * worst[k], when worst is not NULL, gets output k's largest difference.
 * Dies naming `what` on the first difference. */
void check_model_output(const char* what, const manypy_value* result, const expected* outs,
                        int nouts, int64_t steps, double* worst);

#endif
