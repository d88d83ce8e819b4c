#include "outputs.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

void expected_load(const char* dir, const char* model, expected* e) {
  char name[256];
  snprintf(name, sizeof name, "%s.expected.%s.bin", model, e->key);
  size_t size = 0;
  e->data = read_archive_file(dir, name, &size);
  e->count = 1;
  for (int k = 0; k < e->ndim; ++k) e->count *= (size_t)e->shape[k];
  if (size != e->count * sizeof(float)) {
    die("%s has %zu bytes, expected %zu (shape of %zu float32)", name, size,
        e->count * sizeof(float), e->count);
  }
}

double check_floats(const char* what, const expected* e, const float* got, int32_t ndim,
                    const int64_t* shape) {
  if (ndim != e->ndim) {
    die("%s: output '%s' has %d dimensions, expected %d", what, e->key, ndim, e->ndim);
  }
  for (int k = 0; k < ndim; ++k) {
    if (shape[k] != e->shape[k]) {
      die("%s: output '%s' dimension %d is %" PRId64 ", expected %" PRId64, what, e->key, k,
          shape[k], e->shape[k]);
    }
  }
  double worst = 0.0;
  for (size_t k = 0; k < e->count; ++k) {
    const double diff = fabs((double)got[k] - (double)e->data[k]);
    if (!(diff <= OUTPUT_TOLERANCE)) { /* also catches NaN */
      die("%s: wrong output '%s': element %zu is %.7g, expected %.7g (tolerance %g)", what, e->key,
          k, (double)got[k], (double)e->data[k], OUTPUT_TOLERANCE);
    }
    if (diff > worst) worst = diff;
  }
  return worst;
}

double check_tensor_value(const char* what, const manypy_value* v, const expected* e) {
  if (manypy_value_get_kind(v) != MANYPY_VALUE_TENSOR) {
    die("%s: output '%s' is not a tensor (kind %d)", what, e->key, (int)manypy_value_get_kind(v));
  }
  DLManagedTensor* t = NULL;
  CHECK(manypy_value_get_tensor(v, &t), "manypy_value_get_tensor");
  const DLTensor* d = &t->dl_tensor;
  if (d->device.device_type != kDLCPU || d->dtype.code != kDLFloat || d->dtype.bits != 32 ||
      d->dtype.lanes != 1) {
    die("%s: output '%s' is not a float32 CPU tensor", what, e->key);
  }
  int64_t contiguous = 1;
  for (int k = d->ndim - 1; k >= 0; --k) {
    if (d->strides && d->shape[k] > 1 && d->strides[k] != contiguous) {
      die("%s: output '%s' is not C-contiguous", what, e->key);
    }
    contiguous *= d->shape[k];
  }
  const double worst = check_floats(what, e, (const float*)((const char*)d->data + d->byte_offset),
                                    d->ndim, d->shape);
  if (t->deleter) t->deleter(t);
  return worst;
}

void check_model_output(const char* what, const manypy_value* result, const expected* outs,
                        int nouts, int64_t steps, double* worst) {
  if (steps < 0 && nouts == 1 && strcmp(outs[0].key, "out") == 0) {
    const double w = check_tensor_value(what, result, &outs[0]);
    if (worst) worst[0] = w;
    return;
  }
  if (manypy_value_get_kind(result) != MANYPY_VALUE_DICT) die("%s: the output is not a dict", what);
  for (int k = 0; k < nouts; ++k) {
    const manypy_value* item = NULL;
    manypy_status* st = manypy_value_dict_get(result, outs[k].key, &item);
    if (st) {
      manypy_status_free(st);
      die("%s: the output has no key '%s'", what, outs[k].key);
    }
    const double w = check_tensor_value(what, item, &outs[k]);
    if (worst) worst[k] = w;
  }
  if (steps < 0) return;
  const manypy_value* item = NULL;
  int64_t got = -1;
  manypy_status* st = manypy_value_dict_get(result, "steps", &item);
  if (!st) st = manypy_value_get_int64(item, &got);
  if (st) {
    manypy_status_free(st);
    die("%s: the output has no int 'steps'", what);
  }
  if (got != steps) {
    die("%s: wrong output 'steps': %" PRId64 ", expected %" PRId64, what, got, steps);
  }
}
