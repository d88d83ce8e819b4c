/*
 * The sample models' inputs and expected outputs (written by
 * samples/models/make_archives.py from plain eager Python), and the check
 * that a manypy call reproduces them.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demo.h"

/* float32, one lane: the only dtype the sample files hold. */
static const DLDataType kFloat32 = {kDLFloat, 32, 1};

static const manypy_value* dict_get(const manypy_value* dict, const char* key, const char* where) {
  const manypy_value* item = NULL;
  manypy_status* st = manypy_value_dict_get(dict, key, &item);
  if (st) {
    manypy_status_free(st);
    demo_die("%s has no \"%s\"", where, key);
  }
  return item;
}

static const char* get_string(const manypy_value* v, const char* where) {
  const char* s = NULL;
  demo_check(manypy_value_get_string(v, &s, NULL), where);
  return s;
}

/* A JSON list of ints (a shape) into `shape`; returns its length. */
static int get_shape(const manypy_value* list, int64_t shape[8], const char* where) {
  size_t n = 0;
  demo_check(manypy_value_length(list, &n), where);
  if (n > 8) demo_die("%s: %zu dimensions, at most 8 supported", where, n);
  for (size_t i = 0; i < n; ++i) {
    const manypy_value* item = NULL;
    demo_check(manypy_value_get_item(list, i, &item), where);
    demo_check(manypy_value_get_int64(item, &shape[i]), where);
    if (shape[i] < 0) demo_die("%s: negative dimension", where);
  }
  return (int)n;
}

static size_t element_count(const int64_t* shape, int ndim) {
  size_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= (size_t)shape[d];
  return n;
}

/* Reads a whole file of raw float32 that must hold exactly `count` values. */
static float* read_floats(const char* dir, const char* file, size_t count) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  FILE* f = fopen(path, "rb");
  if (!f) demo_die("cannot open %s", path);
  float* data = malloc(count ? count * sizeof(float) : 1);
  if (!data) demo_die("out of memory");
  size_t got = fread(data, sizeof(float), count, f);
  int extra = fgetc(f) != EOF;
  fclose(f);
  if (got != count || extra) demo_die("%s does not hold exactly %zu float32 values", path, count);
  return data; /* the files are little-endian, as is every host manypy runs on */
}

/* A Python bytes literal for `s`: every byte outside a safe ASCII set is
 * \xNN-escaped, so any path can be spliced into Python source. */
static void python_bytes_literal(const char* s, char* out, size_t size) {
  size_t n = 0;
  out[n++] = 'b';
  out[n++] = '\'';
  for (const unsigned char* p = (const unsigned char*)s; *p; ++p) {
    if (n + 6 >= size) demo_die("path too long: %s", s); /* room for \xNN, ' and NUL */
    if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
        strchr("/._-+", *p)) {
      out[n++] = (char)*p;
    } else {
      n += (size_t)snprintf(out + n, size - n, "\\x%02x", *p);
    }
  }
  out[n++] = '\'';
  out[n] = '\0';
}

void demo_model_load(demo_model* m, manypy_pool* pool, const char* dir) {
  /* NAME.json: shapes, files, kwargs and scalar outputs. Parsing it in an
   * interpreter shows eval's nested results: a dict of lists, ints, bools. */
  char path[4096], literal[4 * 4096 + 8], expr[4 * 4096 + 64];
  snprintf(path, sizeof path, "%s/%s.json", dir, m->name);
  python_bytes_literal(path, literal, sizeof literal);
  snprintf(expr, sizeof expr, "__import__('json').load(open(%s, 'rb'))", literal);
  manypy_status* st = manypy_pool_eval(pool, MANYPY_ANY_INTERPRETER, expr, &m->desc);
  if (manypy_status_code(st) == MANYPY_ERR_PYTHON) {
    fprintf(stderr,
            "manypy_demo: cannot read %s (build the target manypy_archives, or pass "
            "--archives DIR)\n",
            path);
  }
  demo_check(st, "reading the model description");
  m->kwargs = dict_get(m->desc, "kwargs", path);
  m->scalars = dict_get(m->desc, "scalars", path);

  /* The input tensor, over our own buffer (no copy): manypy calls free()
   * on it once no interpreter needs it any more. */
  const manypy_value* input = dict_get(m->desc, "input", path);
  int64_t shape[8];
  const int ndim = get_shape(dict_get(input, "shape", path), shape, path);
  const size_t count = element_count(shape, ndim);
  float* data = read_floats(dir, get_string(dict_get(input, "file", path), path), count);
  manypy_value* tensor = NULL;
  demo_check(manypy_value_new_tensor_from_buffer(data, count * sizeof(float), kFloat32, ndim, shape,
                                                 NULL, 0, free, data, &tensor),
             "manypy_value_new_tensor_from_buffer");
  /* One positional argument. This tuple is only read from now on, so every
   * serving thread may pass the same one. */
  m->args = manypy_value_new_tuple();
  if (!m->args) demo_die("out of memory");
  demo_check(manypy_value_append(m->args, tensor), "manypy_value_append");

  /* Every expected output tensor: desc["outputs"][KEY] = {shape, file}. */
  const manypy_value* outputs = dict_get(m->desc, "outputs", path);
  demo_check(manypy_value_length(outputs, &m->n_outputs), path);
  if (m->n_outputs > sizeof m->outputs / sizeof m->outputs[0]) {
    demo_die("%s: too many outputs", path);
  }
  for (size_t i = 0; i < m->n_outputs; ++i) {
    demo_output* o = &m->outputs[i];
    const manypy_value* spec = NULL;
    demo_check(manypy_value_dict_key(outputs, i, &o->key, NULL), path);
    demo_check(manypy_value_get_item(outputs, i, &spec), path);
    o->ndim = get_shape(dict_get(spec, "shape", path), o->shape, path);
    o->count = element_count(o->shape, o->ndim);
    o->data = read_floats(dir, get_string(dict_get(spec, "file", path), path), o->count);
  }
}

void demo_model_free(demo_model* m) {
  for (size_t i = 0; i < m->n_outputs; ++i) free(m->outputs[i].data);
  manypy_value_free(m->args);
  manypy_value_free(m->desc);
  memset(m, 0, sizeof *m);
}

static int fail(char* why, size_t size, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char* why, size_t size, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, size, fmt, ap);
  va_end(ap);
  return 0;
}

/* One output tensor against its expected values. The result's DLPack view
 * may be strided, so elements are addressed through its strides. */
static int tensor_matches(const demo_output* e, const manypy_value* v, double tolerance,
                          double* max_abs_diff, char* why, size_t size) {
  if (manypy_value_get_kind(v) != MANYPY_VALUE_TENSOR) {
    return fail(why, size, "output '%s' is not a tensor", e->key);
  }
  DLManagedTensor* t = NULL;
  demo_check(manypy_value_get_tensor(v, &t), "manypy_value_get_tensor");
  const DLTensor* d = &t->dl_tensor;
  int ok = 1;
  if (d->device.device_type != kDLCPU || d->dtype.code != kDLFloat || d->dtype.bits != 32 ||
      d->dtype.lanes != 1) {
    ok = fail(why, size, "output '%s' is not a float32 CPU tensor", e->key);
  } else if (d->ndim != e->ndim || memcmp(d->shape, e->shape, (size_t)e->ndim * sizeof(int64_t))) {
    ok = fail(why, size, "output '%s' has another shape than expected", e->key);
  } else {
    const float* base = (const float*)((const char*)d->data + d->byte_offset);
    for (size_t i = 0; i < e->count && ok; ++i) {
      size_t offset = i; /* C-contiguous when strides is NULL */
      if (d->strides) {
        size_t rest = i;
        offset = 0;
        for (int k = e->ndim - 1; k >= 0; --k) {
          offset += (rest % (size_t)e->shape[k]) * (size_t)d->strides[k];
          rest /= (size_t)e->shape[k];
        }
      }
      const double got = base[offset], want = e->data[i];
      const double diff = fabs(got - want);
      if (diff > *max_abs_diff) *max_abs_diff = diff;
      if (!(diff <= tolerance * (1.0 + fabs(want)))) { /* also catches NaN */
        ok = fail(why, size, "output '%s' element %zu is %.7g, eager Python gave %.7g", e->key, i,
                  got, want);
      }
    }
  }
  if (t->deleter) t->deleter(t); /* we own the view; the value still holds the data */
  return ok;
}

int demo_model_matches(const demo_model* m, const manypy_value* result, double* max_abs_diff,
                       char* why, size_t why_size) {
  size_t n_scalars = 0;
  demo_check(manypy_value_length(m->scalars, &n_scalars), "scalars");
  if (manypy_value_get_kind(result) == MANYPY_VALUE_TENSOR) {
    /* A plain tensor output is stored under the key "out". */
    if (m->n_outputs != 1 || strcmp(m->outputs[0].key, "out") != 0 || n_scalars != 0) {
      return fail(why, why_size, "a tensor, where eager Python returned a dict");
    }
    return tensor_matches(&m->outputs[0], result, m->tolerance, max_abs_diff, why, why_size);
  }
  if (manypy_value_get_kind(result) != MANYPY_VALUE_DICT) {
    return fail(why, why_size, "neither a tensor nor a dict (kind %d)",
                (int)manypy_value_get_kind(result));
  }
  size_t n = 0;
  demo_check(manypy_value_length(result, &n), "result");
  if (n != m->n_outputs + n_scalars) {
    return fail(why, why_size, "%zu entries, eager Python returned %zu", n,
                m->n_outputs + n_scalars);
  }
  for (size_t i = 0; i < m->n_outputs; ++i) {
    const manypy_value* v = NULL;
    manypy_status* st = manypy_value_dict_get(result, m->outputs[i].key, &v);
    if (st) {
      manypy_status_free(st);
      return fail(why, why_size, "no output '%s'", m->outputs[i].key);
    }
    if (!tensor_matches(&m->outputs[i], v, m->tolerance, max_abs_diff, why, why_size)) return 0;
  }
  for (size_t i = 0; i < n_scalars; ++i) { /* ints such as python_heavy's "steps" */
    const char* key = NULL;
    const manypy_value *want = NULL, *got = NULL;
    int64_t w = 0, g = 0;
    demo_check(manypy_value_dict_key(m->scalars, i, &key, NULL), "scalars");
    demo_check(manypy_value_get_item(m->scalars, i, &want), "scalars");
    demo_check(manypy_value_get_int64(want, &w), "scalars");
    manypy_status* st = manypy_value_dict_get(result, key, &got);
    if (!st) st = manypy_value_get_int64(got, &g);
    if (st) {
      manypy_status_free(st);
      return fail(why, why_size, "no int output '%s'", key);
    }
    if (g != w) {
      return fail(why, why_size, "output '%s' is %lld, eager Python gave %lld", key, (long long)g,
                  (long long)w);
    }
  }
  return 1;
}
