#include "models.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

void model_cases(model_case out[MODEL_COUNT], int big_mb) {
  memset(out, 0, MODEL_COUNT * sizeof *out);
  /* python_heavy.json: x [4, 64], steps=5, normalize=False. */
  out[0] = (model_case){.label = "python_heavy",
                        .in_ndim = 2,
                        .in_shape = {4, 64},
                        .steps = 5,
                        .nouts = 2,
                        .outs = {{"logits", 2, {4, 10}, NULL, 0}, {"norm", 1, {4}, NULL, 0}}};
  snprintf(out[0].name, sizeof out[0].name, "python_heavy");
  out[1] = (model_case){.label = "resnet18",
                        .in_ndim = 4,
                        .in_shape = {1, 3, 224, 224},
                        .steps = -1,
                        .nouts = 1,
                        .outs = {{"out", 2, {1, 1000}, NULL, 0}}};
  snprintf(out[1].name, sizeof out[1].name, "resnet18");
  out[2] = (model_case){.label = "big_light",
                        .in_ndim = 2,
                        .in_shape = {2, 64},
                        .steps = -1,
                        .nouts = 1,
                        .outs = {{"out", 2, {2, 64}, NULL, 0}}};
  snprintf(out[2].name, sizeof out[2].name, "peers/big_light_%d", big_mb);
  out[3] = (model_case){.label = "identity",
                        .in_ndim = 2,
                        .in_shape = {2, 3},
                        .steps = -1,
                        .nouts = 1,
                        .outs = {{"out", 2, {2, 3}, NULL, 0}}};
  snprintf(out[3].name, sizeof out[3].name, "identity");
  snprintf(out[0].script, sizeof out[0].script, "python_heavy_script.pt");
  snprintf(out[1].script, sizeof out[1].script, "resnet18_script.pt");
  snprintf(out[2].script, sizeof out[2].script, "peers/big_light_%d_script.pt", big_mb);
  snprintf(out[3].script, sizeof out[3].script, "peers/identity_script.pt");
  /* samples/models/make_pt2.py, where manypy runs them (torch 2.x). */
  snprintf(out[0].aoti, sizeof out[0].aoti, "python_heavy.pt2");
  snprintf(out[1].aoti, sizeof out[1].aoti, "resnet18.pt2");
}

static size_t elements(int32_t ndim, const int64_t* shape) {
  size_t n = 1;
  for (int k = 0; k < ndim; ++k) n *= (size_t)shape[k];
  return n;
}

void model_load(model_case* m, const char* dir) {
  char name[160];
  snprintf(name, sizeof name, "%s.input.bin", m->name);
  m->input = read_archive_file(dir, name, &m->input_bytes);
  if (m->input_bytes != elements(m->in_ndim, m->in_shape) * sizeof(float)) {
    die("%s has %zu bytes, expected %zu", name, m->input_bytes,
        elements(m->in_ndim, m->in_shape) * sizeof(float));
  }
  for (int k = 0; k < m->nouts; ++k) expected_load(dir, m->name, &m->outs[k]);
}

void model_unload(model_case* m) {
  free(m->input);
  m->input = NULL;
  for (int k = 0; k < m->nouts; ++k) {
    free(m->outs[k].data);
    m->outs[k].data = NULL;
  }
}

size_t model_output_bytes(const model_case* m) {
  size_t n = 0;
  for (int k = 0; k < m->nouts; ++k) n += (m->outs[k].count * sizeof(float) + 63) / 64 * 64;
  return n;
}

void model_check_value(const char* what, const model_case* m, const manypy_value* v) {
  check_model_output(what, v, m->outs, m->nouts, m->steps, NULL);
}

manypy_value* model_args(const model_case* m) {
  manypy_value* x = NULL;
  CHECK(manypy_value_new_tensor_from_buffer(m->input, m->input_bytes, (DLDataType){kDLFloat, 32, 1},
                                            m->in_ndim, m->in_shape, NULL, 0, NULL, NULL, &x),
        "manypy_value_new_tensor_from_buffer");
  manypy_value* args = manypy_value_new_tuple();
  if (!args) die("out of memory");
  CHECK(manypy_value_append(args, x), "manypy_value_append");
  return args;
}

manypy_value* model_kwargs(const model_case* m) {
  if (m->steps < 0) return NULL;
  manypy_value* kw = manypy_value_new_dict();
  if (!kw) die("out of memory");
  CHECK(manypy_value_dict_set(kw, "steps", manypy_value_new_int64(m->steps)), "dict_set");
  CHECK(manypy_value_dict_set(kw, "normalize", manypy_value_new_bool(0)), "dict_set");
  return kw;
}
