/*
 * manypy_dlopen_example: use libmanypy.so without linking against it.
 *
 * Plugin hosts and language runtimes (a JVM through FFM, Python's ctypes, a
 * Go binary built without cgo link flags) find the library at run time. This
 * is that, in C: dlopen() the library, dlsym() every entry point into a table
 * of function pointers, check the version before trusting the table, then use
 * the API as usual. Only the header is used at build time, for the types and
 * MANYPY_VERSION_NUMBER.
 *
 * Usage: manypy_dlopen_example [LIBMANYPY.so [ARCHIVES_DIR]]
 *   (defaults: this build's lib/libmanypy.so and archives/)
 * Exits 0 if every call succeeded and every result is the expected one.
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "manypy.h"

#ifndef MANYPY_LIBRARY_PATH
#define MANYPY_LIBRARY_PATH "libmanypy.so"
#endif
#ifndef MANYPY_ARCHIVES_DIR
#define MANYPY_ARCHIVES_DIR "archives"
#endif

/* Every entry point this program calls, except the version function, which
 * is looked up first (the table below is only trusted once the version is),
 * grouped by area, which clang-format would not keep. */
/* clang-format off */
#define ENTRY_POINTS(X)                                                                     \
  X(manypy_version_string)                                                                  \
  X(manypy_code_name) X(manypy_status_code) X(manypy_status_message)                        \
  X(manypy_status_traceback) X(manypy_status_free)                                          \
  X(manypy_pool_options_new) X(manypy_pool_options_free)                                    \
  X(manypy_pool_options_set_interpreters) X(manypy_pool_create) X(manypy_pool_destroy)      \
  X(manypy_pool_eval)                                                                       \
  X(manypy_value_new_tuple) X(manypy_value_append) X(manypy_value_new_tensor_from_buffer)   \
  X(manypy_value_get_int64) X(manypy_value_get_string) X(manypy_value_get_tensor)           \
  X(manypy_value_free)                                                                      \
  X(manypy_package_load_file) X(manypy_package_free) X(manypy_package_load_pickle)          \
  X(manypy_object_call) X(manypy_object_free)
/* clang-format on */

/* One field per entry point, named after it. __typeof__ takes each
 * pointer type from the header's own declaration, so the table cannot
 * disagree with the header (declaring a function is not linking to it). */
typedef struct manypy_api {
#define FIELD(name) __typeof__(&name) name;
  ENTRY_POINTS(FIELD)
#undef FIELD
} manypy_api;

static manypy_api api;

/* dlsym returns void*; ISO C has no conversion from it to a function
 * pointer, so copy the bytes (what POSIX guarantees is meaningful). */
static int resolve(void* lib, const char* name, void* slot) {
  dlerror();
  void* symbol = dlsym(lib, name);
  if (!symbol) {
    const char* why = dlerror();
    fprintf(stderr, "manypy_dlopen_example: missing symbol %s (%s)\n", name, why ? why : "NULL");
    return 0;
  }
  memcpy(slot, &symbol, sizeof symbol);
  return 1;
}

/* Prints a failed status (code, message, traceback) and frees it. */
static int failed(const char* what, manypy_status* st) {
  const manypy_code code = api.manypy_status_code(st);
  fprintf(stderr, "manypy_dlopen_example: %s failed: %s (%d): %s\n%s", what,
          api.manypy_code_name(code), (int)code, api.manypy_status_message(st),
          api.manypy_status_traceback(st));
  api.manypy_status_free(st);
  return 0;
}

/* A pool of one interpreter: evaluate an expression, load identity.pt and
 * call it with a small tensor. Returns 1 if everything is as expected. */
static int run(const char* archives) {
  manypy_pool_options* options = api.manypy_pool_options_new();
  manypy_pool* pool = NULL;
  manypy_status* st = api.manypy_pool_options_set_interpreters(options, 1);
  if (!st) st = api.manypy_pool_create(options, &pool);
  api.manypy_pool_options_free(options);
  if (st) return failed("manypy_pool_create", st);
  int ok = 1;

  /* An expression: plain Python, then torch's version in the interpreter. */
  manypy_value* v = NULL;
  int64_t sum = 0;
  st = api.manypy_pool_eval(pool, MANYPY_ANY_INTERPRETER, "sum(i * i for i in range(10))", &v);
  if (!st) st = api.manypy_value_get_int64(v, &sum);
  api.manypy_value_free(v);
  v = NULL;
  if (st)
    ok = failed("manypy_pool_eval", st);
  else
    printf("sum(i * i for i in range(10)) = %lld\n", (long long)sum);
  if (ok && sum != 285) ok = 0;

  const char* torch_version = NULL;
  st = api.manypy_pool_eval(pool, 0, "__import__('torch').__version__", &v);
  if (!st) st = api.manypy_value_get_string(v, &torch_version, NULL);
  if (st)
    ok = failed("manypy_pool_eval", st);
  else
    printf("torch in the interpreter: %s\n", torch_version);
  api.manypy_value_free(v); /* owns torch_version */

  /* identity.pt: forward(x) returns x. */
  char path[4096];
  snprintf(path, sizeof path, "%s/identity.pt", archives);
  manypy_package* package = NULL;
  manypy_object* model = NULL;
  st = api.manypy_package_load_file(pool, path, &package);
  if (!st) st = api.manypy_package_load_pickle(package, "model", "model.pkl", &model);
  api.manypy_package_free(package);
  if (st) ok = failed(path, st);

  float x[2][3] = {{1, 2, 3}, {4, 5, 6}};
  const int64_t shape[2] = {2, 3};
  const DLDataType float32 = {kDLFloat, 32, 1};
  manypy_value* args = api.manypy_value_new_tuple();
  manypy_value* tensor = NULL;
  manypy_value* result = NULL;
  DLManagedTensor* out = NULL;
  if (ok) { /* copy = 1: x is on this stack frame */
    st = api.manypy_value_new_tensor_from_buffer(x, sizeof x, float32, 2, shape, NULL, 1, NULL,
                                                 NULL, &tensor);
    if (!st) st = api.manypy_value_append(args, tensor);
    if (!st) st = api.manypy_object_call(model, NULL, args, NULL, NULL, &result);
    if (!st) st = api.manypy_value_get_tensor(result, &out);
    if (st) ok = failed("calling identity.pt", st);
  }
  if (out) {
    const DLTensor* t = &out->dl_tensor;
    const float* y = (const float*)((const char*)t->data + t->byte_offset);
    const int contiguous = !t->strides || (t->strides[0] == 3 && t->strides[1] == 1);
    ok = t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3 && t->dtype.code == kDLFloat &&
         t->dtype.bits == 32 && contiguous && memcmp(y, x, sizeof x) == 0;
    printf("identity.pt(x) = [[%g, %g, %g], [%g, %g, %g]]: %s\n", y[0], y[1], y[2], y[3], y[4],
           y[5], ok ? "equals x" : "DIFFERS from x");
    out->deleter(out);
  }

  api.manypy_value_free(result);
  api.manypy_value_free(args);
  api.manypy_object_free(model);
  api.manypy_pool_destroy(pool);
  return ok;
}

int main(int argc, char** argv) {
  const char* library = argc > 1 ? argv[1] : MANYPY_LIBRARY_PATH;
  const char* archives = argc > 2 ? argv[2] : MANYPY_ARCHIVES_DIR;

  /* RTLD_NOW: fail here, not at a first call, if a dependency is missing.
   * RTLD_LOCAL: manypy's symbols stay out of the global scope. */
  void* lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "manypy_dlopen_example: cannot load %s: %s\n", library, dlerror());
    return 1;
  }

  /* The version first: with another ABI, the other entry points may not
   * exist or may mean something else. Same rule as the bindings
   * (docs/c-api.md): majors equal and, while the major is 0, minors equal
   * too; from 1.0 on, the library's minor at least the header's. */
  uint32_t (*version_number)(void) = NULL;
  if (!resolve(lib, "manypy_version_number", &version_number)) return 1;
  const uint32_t have = version_number();
  const uint32_t have_minor = have / 100 % 100;
  if (have / 10000 != MANYPY_VERSION_MAJOR ||
      (MANYPY_VERSION_MAJOR == 0 ? have_minor != MANYPY_VERSION_MINOR
                                 : have_minor < MANYPY_VERSION_MINOR)) {
    fprintf(stderr,
            "manypy_dlopen_example: %s is version %u.%u.%u; this program was built "
            "for %s (MANYPY_VERSION_NUMBER %d)\n",
            library, have / 10000, have / 100 % 100, have % 100, MANYPY_VERSION_STRING,
            MANYPY_VERSION_NUMBER);
    return 1;
  }

  int resolved = 1;
#define RESOLVE(name) resolved &= resolve(lib, #name, &api.name);
  ENTRY_POINTS(RESOLVE)
#undef RESOLVE
  if (!resolved) return 1;
  printf("loaded %s: manypy %s (version number %u, header %d)\n", library,
         api.manypy_version_string(), have, MANYPY_VERSION_NUMBER);

  const int ok = run(archives);
  /* No dlclose(): interpreters that pools started stay in the process, for
   * later pools, until it exits, and they need the library. (dlclose would
   * return 0 but leave libmanypy.so mapped anyway.) */
  printf("%s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
