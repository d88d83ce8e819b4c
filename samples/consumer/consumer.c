/*
 * A program built against an installed manypy, as any service would be: it
 * checks that the library it runs with is the ABI it was compiled for, starts
 * one interpreter, has torch compute something and checks the result.
 *
 * Build it with CMake (CMakeLists.txt here: find_package(manypy 0.3)) or with
 * pkg-config:
 *   cc consumer.c -o consumer $(pkg-config --cflags --libs manypy)
 * Prints "manypy consumer: ok ..." and exits 0; on any failure prints what
 * failed and exits 1.
 */
#include <manypy.h>
#include <stdio.h>

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
  return MANYPY_VERSION_MAJOR == 0 ? minor == MANYPY_VERSION_MINOR
                                   : minor >= MANYPY_VERSION_MINOR;
}

int main(void) {
  const uint32_t library = manypy_version_number();
  if (!compatible(library)) {
    fprintf(stderr, "manypy consumer: libmanypy is %s (%u), this program was built for %s (%d)\n",
            manypy_version_string(), library, MANYPY_VERSION_STRING, MANYPY_VERSION_NUMBER);
    return 1;
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
