/*
 * A program built against an installed manypy, as any service would be: it
 * checks that the library it runs with is the ABI it was compiled for, starts
 * one interpreter, has torch compute something and checks the result.
 *
 * Given a model, it also serves it: `consumer MODEL.pt EXPECTED.bin` loads the
 * torch.package's "model"/"model.pkl" (samples/models: seed_example.pt),
 * calls it with torch.ones(1, 1, 10, 10) from 2 threads on a pool of 2, and
 * checks every output against EXPECTED.bin (float32, little-endian).
 *
 * Build it with CMake (CMakeLists.txt here: find_package(manypy 0.3)) or with
 * pkg-config:
 *   cc consumer.c -o consumer $(pkg-config --cflags --libs manypy) -lm
 * Prints "manypy consumer: ok ..." and exits 0; on any failure prints what
 * failed and exits 1.
 */
#include <manypy.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static int failed(const char* what, manypy_status* st) {
  fprintf(stderr, "manypy consumer: %s failed: %s\n", what, manypy_status_message(st));
  manypy_status_free(st);
  return 1;
}

/* The ABI rule (docs/c-api.md): the same major and, while the major is 0,
 * the same minor; from 1.0 on, a library minor at least the header's. */
static int compatible(uint32_t library) {
  const uint32_t major = library / 10000, minor = library / 100 % 100;
  if (major != MANYPY_VERSION_MAJOR) return 0;
  return MANYPY_VERSION_MAJOR == 0 ? minor == MANYPY_VERSION_MINOR : minor >= MANYPY_VERSION_MINOR;
}

enum { THREADS = 2, CALLS = 10, MAX_OUTPUT = 4096 };

struct serving {
  manypy_object* model;
  const float* expected;
  size_t count;
};

/* One call: torch.ones(1, 1, 10, 10) in, the output compared with the
 * expected values. Returns NULL or a status the caller frees; a wrong output
 * becomes a status too. */
static manypy_status* call_once(const struct serving* s) {
  static const float ones[100] = {[0 ... 99] = 1.0f};
  const int64_t shape[4] = {1, 1, 10, 10};
  const DLDataType float32 = {kDLFloat, 32, 1};
  manypy_value* input = NULL;
  manypy_value* inputs = manypy_value_new_tuple();
  manypy_value* output = NULL;
  DLManagedTensor* tensor = NULL;
  manypy_status* st = inputs ? NULL : manypy_status_new(MANYPY_ERR_RESOURCE_EXHAUSTED, "no memory");
  /* Borrowed (copy = 0): `ones` is static, so it outlives every use. */
  if (!st)
    st = manypy_value_new_tensor_from_buffer((void*)ones, sizeof ones, float32, 4, shape, NULL, 0,
                                             NULL, NULL, &input);
  if (!st) st = manypy_value_append(inputs, input);
  if (!st) st = manypy_object_call(s->model, NULL, inputs, NULL, NULL, &output);
  if (!st) st = manypy_value_get_tensor(output, &tensor);
  if (!st) {
    const DLTensor* t = &tensor->dl_tensor;
    size_t n = 1;
    int dense = 1; /* row-major: torch gives strides even then */
    for (int d = t->ndim - 1; d >= 0; --d) {
      if (t->strides && t->shape[d] > 1 && t->strides[d] != (int64_t)n) dense = 0;
      n *= (size_t)t->shape[d];
    }
    if (t->dtype.code != kDLFloat || t->dtype.bits != 32 || n != s->count || !dense) {
      st = manypy_status_new(MANYPY_ERR_INTERNAL,
                             "the output is not a dense float32 tensor "
                             "of the expected size");
    } else {
      const float* got = (const float*)((const char*)t->data + t->byte_offset);
      for (size_t i = 0; i < n && !st; ++i) {
        if (fabsf(got[i] - s->expected[i]) > 1e-4f + 1e-4f * fabsf(s->expected[i])) {
          st = manypy_status_new(MANYPY_ERR_INTERNAL, "an output differs from the expected one");
        }
      }
    }
    tensor->deleter(tensor);
  }
  manypy_value_free(output);
  manypy_value_free(inputs);
  return st;
}

static void* serve(void* arg) {
  manypy_status* st = NULL;
  for (int i = 0; i < CALLS && !st; ++i) st = call_once(arg);
  return st;
}

static int serve_model(const char* model_path, const char* expected_path) {
  static float expected[MAX_OUTPUT];
  FILE* f = fopen(expected_path, "rb");
  if (!f) {
    perror(expected_path);
    return 1;
  }
  struct serving s = {NULL, expected, fread(expected, sizeof(float), MAX_OUTPUT, f)};
  fclose(f);

  manypy_pool_options* options = manypy_pool_options_new();
  manypy_pool* pool = NULL;
  manypy_package* package = NULL;
  manypy_status* st = manypy_pool_options_set_interpreters(options, THREADS);
  if (!st) st = manypy_pool_create(options, &pool);
  manypy_pool_options_free(options);
  if (!st) st = manypy_package_load_file(pool, model_path, &package);
  if (!st) st = manypy_package_load_pickle(package, "model", "model.pkl", &s.model);
  manypy_package_free(package);
  pthread_t threads[THREADS];
  int started = 0;
  for (; !st && started < THREADS; ++started) {
    if (pthread_create(&threads[started], NULL, serve, &s) != 0) break;
  }
  for (int i = 0; i < started; ++i) {
    void* result = NULL;
    pthread_join(threads[i], &result);
    if (!st)
      st = result;
    else
      manypy_status_free(result);
  }
  if (!st && started < THREADS)
    st = manypy_status_new(MANYPY_ERR_RESOURCE_EXHAUSTED, "pthread_create failed");
  manypy_object_free(s.model);
  manypy_pool_destroy(pool);
  if (st) return failed(model_path, st);
  printf("manypy consumer: ok, %s served %d calls from %d threads, %zu outputs each as expected\n",
         model_path, THREADS * CALLS, THREADS, s.count);
  return 0;
}

int main(int argc, char** argv) {
  const uint32_t library = manypy_version_number();
  if (!compatible(library)) {
    fprintf(stderr, "manypy consumer: libmanypy is %s (%u), this program was built for %s (%d)\n",
            manypy_version_string(), library, MANYPY_VERSION_STRING, MANYPY_VERSION_NUMBER);
    return 1;
  }

  if (argc == 3) return serve_model(argv[1], argv[2]);
  if (argc != 1) {
    fprintf(stderr, "usage: consumer [MODEL.pt EXPECTED.bin]\n");
    return 2;
  }

  manypy_pool_options* options = manypy_pool_options_new();
  manypy_pool* pool = NULL;
  manypy_status* st = manypy_pool_options_set_interpreters(options, 1);
  if (!st) st = manypy_pool_create(options, &pool);
  manypy_pool_options_free(options);
  if (st) return failed("manypy_pool_create", st);

  const char* expression = "torch.ones(2, 2).sum().item()";
  manypy_value* value = NULL;
  double sum = 0;
  st = manypy_pool_exec(pool, 0, "import torch");
  if (!st) st = manypy_pool_eval(pool, 0, expression, &value);
  if (!st) st = manypy_value_get_double(value, &sum);
  manypy_value_free(value);
  manypy_pool_destroy(pool);
  if (st) return failed(expression, st);
  if (sum != 4.0) {
    fprintf(stderr, "manypy consumer: %s = %g, expected 4\n", expression, sum);
    return 1;
  }
  printf("manypy consumer: ok, manypy %s, %s = %g\n", manypy_version_string(), expression, sum);
  return 0;
}
