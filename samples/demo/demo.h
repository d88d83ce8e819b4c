/*
 * Shared pieces of manypy_demo (demo.c drives; model.c loads and checks the
 * sample models; serve.c runs the concurrent requests). Public C API only.
 */
#ifndef MANYPY_DEMO_H
#define MANYPY_DEMO_H

#include <stddef.h>
#include <stdint.h>

#include "manypy.h"

/* Prints "manypy_demo: <message>" to stderr and exits 1. */
void demo_die(const char* fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* If `st` is a failure, prints what failed with its code, message and Python
 * traceback, then exits 1. */
void demo_check(manypy_status* st, const char* what);

double demo_now_s(void);

/* One expected output tensor of a model: NAME.expected.KEY.bin. */
typedef struct demo_output {
  const char* key; /* owned by demo_model.desc */
  int ndim;
  int64_t shape[8];
  float* data; /* malloc'd */
  size_t count;
} demo_output;

/* A sample model: its archive and what eager Python gave for it
 * (samples/models/README.md describes the files). */
typedef struct demo_model {
  const char* name;            /* "resnet18": NAME.pt, NAME.json, NAME.input.bin, ... */
  double tolerance;            /* |got - expected| <= tolerance * (1 + |expected|) */
  manypy_value* desc;          /* NAME.json, parsed into a dict by an interpreter */
  manypy_value* args;          /* (input,): built once, shared read-only by every call */
  const manypy_value* kwargs;  /* desc["kwargs"] (borrowed from desc) */
  const manypy_value* scalars; /* desc["scalars"]: expected non-tensor outputs */
  demo_output outputs[8];
  size_t n_outputs;
} demo_model;

/* Reads NAME.json (with `pool`'s Python: C has no JSON parser, an embedded
 * interpreter does), NAME.input.bin and NAME.expected.*.bin from `dir`. */
void demo_model_load(demo_model* m, manypy_pool* pool, const char* dir);
void demo_model_free(demo_model* m);

/* Compares one call's result with the expected outputs. Returns 1 if every
 * tensor is within tolerance and every scalar equal, raising *max_abs_diff to
 * the largest difference seen; else 0 with a description in `why`. */
int demo_model_matches(const demo_model* m, const manypy_value* result, double* max_abs_diff,
                       char* why, size_t why_size);

/* Result of serving one model from `threads` threads for a while. */
typedef struct demo_serve_result {
  long calls;        /* completed in the measured phase */
  double elapsed_s;  /* from the start of measuring to the last completion */
  double throughput; /* calls / elapsed_s */
  double p50_ms;
  double p99_ms;
  double cpu_others; /* cores other processes kept busy meanwhile (noise) */
} demo_serve_result;

/* `threads` threads call `object` (any interpreter of its pool) with the
 * model's arguments as fast as they can: `warmup_s` unmeasured, then
 * `seconds` measured, recording every call's latency. */
demo_serve_result demo_serve(manypy_object* object, const demo_model* m, int threads,
                             double warmup_s, double seconds);

#endif /* MANYPY_DEMO_H */
