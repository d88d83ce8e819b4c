/* The four models of the peers benchmark, their inputs and their expected
 * outputs (the files samples/models/make_archives.py and make_models.py
 * write next to each archive), and the output checks every design's results
 * go through. */
#ifndef MANYPY_BENCH_PEERS_MODELS_H
#define MANYPY_BENCH_PEERS_MODELS_H

#include <stddef.h>
#include <stdint.h>

#include "manypy.h"
#include "outputs.h"

enum { MODEL_COUNT = 4, MODEL_MAX_OUTPUTS = 2 };

typedef struct model_case {
  const char* label; /* short, for tables: "python_heavy", "resnet18", ... */
  char name[64];     /* archive base name: NAME.pt, NAME.input.bin, ... */
  char script[80];   /* TorchScript archive of the same model, "" if none */
  char aoti[80];     /* its AOTInductor package (.pt2), "" if none */
  int32_t in_ndim;
  int64_t in_shape[4];
  int64_t steps; /* python_heavy's kwarg and scalar output; -1: no kwargs */
  int nouts;
  expected outs[MODEL_MAX_OUTPUTS]; /* NAME.expected.KEY.bin */
  void* input;
  size_t input_bytes;
} model_case;

/* The four cases, in table order; big_mb picks big_light_<MB>.pt. */
void model_cases(model_case out[MODEL_COUNT], int big_mb);

/* Reads the input and the expected outputs from `dir`; dies if a file is
 * missing or has the wrong size. */
void model_load(model_case* m, const char* dir);
void model_unload(model_case* m);

/* Sum of the expected outputs' bytes (for shared-memory sizing). */
size_t model_output_bytes(const model_case* m);

/* Checks a manypy result (a tensor, or a dict of tensors and "steps")
 * against the expected outputs (outputs.h); dies naming what differs. */
void model_check_value(const char* what, const model_case* m, const manypy_value* v);

/* The call's arguments: (x,) over the case's input, borrowed; and its kwargs
 * (steps=S, normalize=False for python_heavy), or NULL. */
manypy_value* model_args(const model_case* m);
manypy_value* model_kwargs(const model_case* m);

#endif
