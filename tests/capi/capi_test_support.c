#define _GNU_SOURCE
#include "capi_test_support.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void capi_print_status(const char* what, const manypy_status* status, const char* file, int line) {
  fprintf(stderr,
          "%s:%d: %s\n"
          "  code:        %s (%d)\n"
          "  message:     %s\n"
          "  python_type: %s\n"
          "  traceback:\n%s\n",
          file, line, what, manypy_code_name(manypy_status_code(status)),
          (int)manypy_status_code(status), manypy_status_message(status),
          manypy_status_python_type(status), manypy_status_traceback(status));
}

void capi_assert_ok(manypy_status* status, const char* expr, const char* file, int line) {
  if (status == NULL) return;
  char what[512];
  snprintf(what, sizeof what, "unexpected failure of %s", expr);
  capi_print_status(what, status, file, line);
  char message[1024];
  snprintf(message, sizeof message, "%s -> %s: %s", expr,
           manypy_code_name(manypy_status_code(status)), manypy_status_message(status));
  manypy_status_free(status);
  fail_msg("%s:%d: %s", file, line, message);
}

manypy_status* capi_expect_code(manypy_status* status, manypy_code code, const char* expr,
                                const char* file, int line) {
  if (status == NULL) {
    fail_msg("%s:%d: %s succeeded; expected %s", file, line, expr, manypy_code_name(code));
  }
  if (manypy_status_code(status) != code) {
    char what[512];
    snprintf(what, sizeof what, "%s: expected %s", expr, manypy_code_name(code));
    capi_print_status(what, status, file, line);
    manypy_code got = manypy_status_code(status);
    manypy_status_free(status);
    fail_msg("%s:%d: %s returned %s, expected %s", file, line, expr, manypy_code_name(got),
             manypy_code_name(code));
  }
  return status;
}

void capi_assert_contains(const char* haystack, const char* needle, const char* what,
                          const char* file, int line) {
  if (haystack == NULL || strstr(haystack, needle) == NULL) {
    fail_msg("%s:%d: %s does not contain \"%s\"; it is:\n%s", file, line, what, needle,
             haystack ? haystack : "(NULL)");
  }
}

void capi_assert_starts_with(const char* text, const char* prefix, const char* what,
                             const char* file, int line) {
  if (text == NULL || strncmp(text, prefix, strlen(prefix)) != 0) {
    fail_msg("%s:%d: %s does not start with \"%s\"; it is:\n%s", file, line, what, prefix,
             text ? text : "(NULL)");
  }
}

static manypy_value* eval_ok(manypy_pool* pool, int32_t interp, const char* expr,
                             manypy_value_kind kind, const char* file, int line) {
  manypy_value* value = NULL;
  manypy_status* status = manypy_pool_eval(pool, interp, expr, &value);
  if (status != NULL) {
    char what[512];
    snprintf(what, sizeof what, "eval of `%s` in interpreter %d failed", expr, (int)interp);
    capi_print_status(what, status, file, line);
    char message[1024];
    snprintf(message, sizeof message, "%s: %s", manypy_code_name(manypy_status_code(status)),
             manypy_status_message(status));
    manypy_status_free(status);
    fail_msg("%s:%d: eval of `%s` failed: %s", file, line, expr, message);
  }
  if (value == NULL) fail_msg("%s:%d: eval of `%s` succeeded with a NULL value", file, line, expr);
  if (manypy_value_get_kind(value) != kind) {
    int got = (int)manypy_value_get_kind(value);
    manypy_value_free(value);
    fail_msg("%s:%d: eval of `%s` gave value kind %d, expected %d", file, line, expr, got,
             (int)kind);
  }
  return value;
}

int64_t capi_eval_int64(manypy_pool* pool, int32_t interp, const char* expr, const char* file,
                        int line) {
  manypy_value* value = eval_ok(pool, interp, expr, MANYPY_VALUE_INT64, file, line);
  int64_t out = 0;
  capi_assert_ok(manypy_value_get_int64(value, &out), "manypy_value_get_int64", file, line);
  manypy_value_free(value);
  return out;
}

double capi_eval_double(manypy_pool* pool, int32_t interp, const char* expr, const char* file,
                        int line) {
  manypy_value* value = eval_ok(pool, interp, expr, MANYPY_VALUE_DOUBLE, file, line);
  double out = 0;
  capi_assert_ok(manypy_value_get_double(value, &out), "manypy_value_get_double", file, line);
  manypy_value_free(value);
  return out;
}

int capi_eval_bool(manypy_pool* pool, int32_t interp, const char* expr, const char* file,
                   int line) {
  manypy_value* value = eval_ok(pool, interp, expr, MANYPY_VALUE_BOOL, file, line);
  int out = -1;
  capi_assert_ok(manypy_value_get_bool(value, &out), "manypy_value_get_bool", file, line);
  manypy_value_free(value);
  return out;
}

char* capi_eval_string(manypy_pool* pool, int32_t interp, const char* expr, size_t* length,
                       const char* file, int line) {
  manypy_value* value = eval_ok(pool, interp, expr, MANYPY_VALUE_STRING, file, line);
  const char* bytes = NULL;
  size_t n = 0;
  capi_assert_ok(manypy_value_get_string(value, &bytes, &n), "manypy_value_get_string", file, line);
  if (bytes == NULL) fail_msg("%s:%d: manypy_value_get_string gave NULL bytes", file, line);
  if (bytes[n] != '\0') fail_msg("%s:%d: string value is not NUL-terminated", file, line);
  char* copy = malloc(n + 1);
  assert_non_null(copy);
  memcpy(copy, bytes, n + 1);
  manypy_value_free(value);
  if (length != NULL) *length = n;
  return copy;
}

manypy_pool* capi_make_pool(size_t count, manypy_thread_mode mode, const char* file, int line) {
  manypy_pool_options* options = manypy_pool_options_new();
  if (options == NULL) fail_msg("%s:%d: manypy_pool_options_new returned NULL", file, line);
  capi_assert_ok(manypy_pool_options_set_interpreters(options, count),
                 "manypy_pool_options_set_interpreters", file, line);
  capi_assert_ok(manypy_pool_options_set_thread_mode(options, mode),
                 "manypy_pool_options_set_thread_mode", file, line);
  manypy_pool* pool = NULL;
  manypy_status* status = manypy_pool_create(options, &pool);
  manypy_pool_options_free(options);
  capi_assert_ok(status, "manypy_pool_create", file, line);
  if (pool == NULL) fail_msg("%s:%d: manypy_pool_create succeeded with NULL pool", file, line);
  if (manypy_pool_size(pool) != count) {
    fail_msg("%s:%d: pool size %zu, expected %zu", file, line, manypy_pool_size(pool), count);
  }
  return pool;
}

manypy_status* capi_create_pool(size_t count, manypy_pool** out_pool) {
  manypy_pool_options* options = manypy_pool_options_new();
  manypy_status* status = manypy_pool_options_set_interpreters(options, count);
  if (status == NULL) status = manypy_pool_create(options, out_pool);
  manypy_pool_options_free(options);
  return status;
}

int capi_fixture_setup(capi_fixture* f, size_t interpreters, manypy_thread_mode mode,
                       const char* archive) {
  memset(f, 0, sizeof *f);
  manypy_pool_options* options = manypy_pool_options_new();
  manypy_status* s = manypy_pool_options_set_interpreters(options, interpreters);
  if (s == NULL) s = manypy_pool_options_set_thread_mode(options, mode);
  if (s == NULL) s = manypy_pool_create(options, &f->pool);
  manypy_pool_options_free(options);
  if (s == NULL && archive != NULL) {
    s = manypy_package_load_file(f->pool, capi_archive(archive), &f->package);
  }
  if (s == NULL && archive != NULL) {
    s = manypy_package_load_pickle(f->package, "model", "model.pkl", &f->model);
  }
  if (s != NULL) {
    capi_print_status("setup", s, __FILE__, __LINE__);
    manypy_status_free(s);
    return -1;
  }
  return 0;
}

void capi_fixture_teardown(capi_fixture* f) {
  manypy_object_free(f->model);
  manypy_package_free(f->package);
  manypy_pool_destroy(f->pool);
  memset(f, 0, sizeof *f);
}

manypy_value* capi_heavy_kwargs(void) {
  manypy_value* kwargs = manypy_value_new_dict();
  assert_non_null(kwargs);
  capi_assert_ok(manypy_value_dict_set(kwargs, "steps", manypy_value_new_int64(5)),
                 "manypy_value_dict_set", __FILE__, __LINE__);
  capi_assert_ok(manypy_value_dict_set(kwargs, "normalize", manypy_value_new_bool(0)),
                 "manypy_value_dict_set", __FILE__, __LINE__);
  return kwargs;
}

static const int64_t kHeavyInput[2] = {4, 64};
static const int64_t kHeavyLogits[2] = {4, 10};
static const int64_t kHeavyNorm[1] = {4};

capi_heavy_case capi_heavy_case_load(const char* file, int line) {
  capi_heavy_case c;
  c.input = capi_read_f32_file("python_heavy.input.bin", 4 * 64, file, line);
  c.logits = capi_read_f32_file("python_heavy.expected.logits.bin", 4 * 10, file, line);
  c.norm = capi_read_f32_file("python_heavy.expected.norm.bin", 4, file, line);
  return c;
}

void capi_heavy_case_free(capi_heavy_case* c) {
  free(c->input);
  free(c->logits);
  free(c->norm);
  memset(c, 0, sizeof *c);
}

manypy_value* capi_heavy_args(const capi_heavy_case* c, const char* file, int line) {
  manypy_value* items[1] = {capi_f32_tensor(c->input, 2, kHeavyInput, file, line)};
  return capi_list_of(0, 1, items, file, line);
}

double capi_check_heavy_result(const capi_heavy_case* c, const manypy_value* result,
                               const char* what, const char* file, int line) {
  if (manypy_value_get_kind(result) != MANYPY_VALUE_DICT) {
    fail_msg("%s:%d: %s: python_heavy's result is not a dict", file, line, what);
  }
  size_t n = 0;
  capi_assert_ok(manypy_value_length(result, &n), "manypy_value_length", file, line);
  if (n != 3) fail_msg("%s:%d: %s: %zu keys, expected 3", file, line, what, n);
  const char* keys[3] = {"logits", "norm", "steps"};
  for (size_t k = 0; k < 3; ++k) {
    const char* key = NULL;
    capi_assert_ok(manypy_value_dict_key(result, k, &key, NULL), "manypy_value_dict_key", file,
                   line);
    if (strcmp(key, keys[k]) != 0) {
      fail_msg("%s:%d: %s: key %zu is '%s', expected '%s'", file, line, what, k, key, keys[k]);
    }
  }
  const manypy_value *logits = NULL, *norm = NULL, *steps = NULL;
  capi_assert_ok(manypy_value_dict_get(result, "logits", &logits), "logits", file, line);
  capi_assert_ok(manypy_value_dict_get(result, "norm", &norm), "norm", file, line);
  capi_assert_ok(manypy_value_dict_get(result, "steps", &steps), "steps", file, line);
  double e1 = capi_assert_f32_tensor(logits, 2, kHeavyLogits, c->logits, 1e-5, what, file, line);
  double e2 = capi_assert_f32_tensor(norm, 1, kHeavyNorm, c->norm, 1e-5, what, file, line);
  int64_t s = 0;
  capi_assert_ok(manypy_value_get_int64(steps, &s), "steps", file, line);
  if (s != 5) fail_msg("%s:%d: %s: steps %lld, expected 5", file, line, what, (long long)s);
  fprintf(stderr, "  %s: max |diff| logits %.3g, norm %.3g\n", what, e1, e2);
  return e1 > e2 ? e1 : e2;
}

int capi_eval_int64_nofail(manypy_pool* pool, int32_t interp, const char* expr, int64_t* out,
                           char* error, size_t error_size) {
  manypy_value* value = NULL;
  manypy_status* status = manypy_pool_eval(pool, interp, expr, &value);
  if (status != NULL) {
    snprintf(error, error_size, "eval `%s` on %d: %s: %s\n%s", expr, (int)interp,
             manypy_code_name(manypy_status_code(status)), manypy_status_message(status),
             manypy_status_traceback(status));
    manypy_status_free(status);
    return -1;
  }
  status = manypy_value_get_int64(value, out);
  manypy_value_free(value);
  if (status != NULL) {
    snprintf(error, error_size, "eval `%s` on %d: result: %s: %s", expr, (int)interp,
             manypy_code_name(manypy_status_code(status)), manypy_status_message(status));
    manypy_status_free(status);
    return -1;
  }
  return 0;
}

double capi_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

long long capi_private_bytes(void) {
  FILE* f = fopen("/proc/self/smaps_rollup", "r");
  if (f == NULL) fail_msg("cannot open /proc/self/smaps_rollup");
  char line[256];
  long long clean = -1, dirty = -1;
  while (fgets(line, sizeof line, f) != NULL) {
    long long kb = 0;
    if (sscanf(line, "Private_Clean: %lld kB", &kb) == 1) clean = kb;
    if (sscanf(line, "Private_Dirty: %lld kB", &kb) == 1) dirty = kb;
  }
  fclose(f);
  if (clean < 0 || dirty < 0) fail_msg("no Private_Clean/Private_Dirty in smaps_rollup");
  return (clean + dirty) * 1024;
}

void capi_check_invalid_argument(manypy_status* status, const char* expr, const char* function,
                                 const char* argument, const char* file, int line) {
  status = capi_expect_code(status, MANYPY_ERR_INVALID_ARGUMENT, expr, file, line);
  const char* message = manypy_status_message(status);
  char copy[1024];
  snprintf(copy, sizeof copy, "%s", message);
  if (strstr(copy, function) == NULL || strstr(copy, argument) == NULL) {
    manypy_status_free(status);
    fail_msg("%s:%d: %s: message does not name \"%s\" and \"%s\": %s", file, line, expr, function,
             argument, copy);
  }
  /* No Python involved: no Python type or traceback. */
  if (strcmp(manypy_status_python_type(status), "") != 0 ||
      strcmp(manypy_status_traceback(status), "") != 0) {
    capi_print_status(expr, status, file, line);
    manypy_status_free(status);
    fail_msg("%s:%d: invalid-argument status carries a Python type or traceback", file, line);
  }
  manypy_status_free(status);
}

/* ---- sample archives -------------------------------------------------------- */

#ifndef MANYPY_ARCHIVES_DIR
#error "MANYPY_ARCHIVES_DIR must be defined (tests/capi/CMakeLists.txt)"
#endif

const char* capi_archives_dir(void) {
  const char* env = getenv("MANYPY_ARCHIVES");
  return env != NULL && env[0] != '\0' ? env : MANYPY_ARCHIVES_DIR;
}

const char* capi_archive(const char* name) {
  static char buffers[8][4096];
  static unsigned next;
  char* out = buffers[next++ % 8];
  snprintf(out, sizeof buffers[0], "%s/%s", capi_archives_dir(), name);
  return out;
}

void* capi_read_whole_file(const char* path, size_t* out_size, const char* file, int line) {
  FILE* f = fopen(path, "rb");
  if (f == NULL)
    fail_msg("%s:%d: cannot open %s (build target manypy_archives?)", file, line, path);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* data = malloc((size_t)size + 1);
  if (data == NULL || size < 0 || fread(data, 1, (size_t)size, f) != (size_t)size) {
    fclose(f);
    free(data);
    fail_msg("%s:%d: cannot read %s", file, line, path);
  }
  fclose(f);
  data[size] = '\0';
  *out_size = (size_t)size;
  return data;
}

float* capi_read_f32_file(const char* name, size_t count, const char* file, int line) {
  size_t size = 0;
  unsigned char* bytes = capi_read_whole_file(capi_archive(name), &size, file, line);
  if (size != count * 4) {
    free(bytes);
    fail_msg("%s:%d: %s has %zu bytes, expected %zu float32", file, line, name, size, count);
  }
  float* out = malloc(count * sizeof(float));
  assert_non_null(out);
  for (size_t k = 0; k < count; ++k) {
    uint32_t bits = (uint32_t)bytes[4 * k] | (uint32_t)bytes[4 * k + 1] << 8 |
                    (uint32_t)bytes[4 * k + 2] << 16 | (uint32_t)bytes[4 * k + 3] << 24;
    memcpy(&out[k], &bits, 4);
  }
  free(bytes);
  return out;
}

void capi_sha256_hex(const char* path, char out[65], const char* file, int line) {
  char command[4200];
  snprintf(command, sizeof command, "sha256sum '%s'", path);
  FILE* p = popen(command, "r");
  if (p == NULL || fgets(out, 65, p) == NULL || strlen(out) != 64) {
    if (p != NULL) pclose(p);
    fail_msg("%s:%d: sha256sum %s failed", file, line, path);
  }
  pclose(p);
}

const char* capi_temp_dir(const char* what, const char* file, int line) {
  static char buffers[8][256];
  static unsigned next;
  char* dir = buffers[next++ % 8];
  snprintf(dir, 256, "/tmp/manypy-%s-%d-XXXXXX", what, (int)getpid());
  if (mkdtemp(dir) == NULL) fail_msg("%s:%d: mkdtemp(%s) failed", file, line, dir);
  return dir;
}

void capi_remove_temp_dirs(void) {
  char command[128];
  snprintf(command, sizeof command, "rm -rf /tmp/manypy-*-%d-*", (int)getpid());
  if (system(command) != 0) fprintf(stderr, "could not remove %s\n", command + 7);
}

void capi_write_file(const char* path, const void* data, size_t size, int truncate,
                     const char* file, int line) {
  int fd = open(path, O_WRONLY | O_CREAT | (truncate ? O_TRUNC : 0), 0644);
  if (fd < 0) fail_msg("%s:%d: cannot open %s for writing", file, line, path);
  size_t done = 0;
  while (done < size) {
    ssize_t n = write(fd, (const char*)data + done, size - done);
    if (n <= 0) {
      close(fd);
      fail_msg("%s:%d: cannot write %s", file, line, path);
    }
    done += (size_t)n;
  }
  close(fd);
}

manypy_call_options* capi_call_options(int32_t interpreter, int64_t timeout_ms, const char* file,
                                       int line) {
  manypy_call_options* options = manypy_call_options_new();
  if (options == NULL) fail_msg("%s:%d: out of memory", file, line);
  capi_assert_ok(manypy_call_options_set_interpreter(options, interpreter),
                 "manypy_call_options_set_interpreter", file, line);
  capi_assert_ok(manypy_call_options_set_timeout(options, timeout_ms * 1000000),
                 "manypy_call_options_set_timeout", file, line);
  return options;
}

manypy_package* capi_load_package(manypy_pool* pool, const char* name, const char* file, int line) {
  manypy_package* package = NULL;
  char what[512];
  snprintf(what, sizeof what, "manypy_package_load_file(%s)", name);
  capi_assert_ok(manypy_package_load_file(pool, capi_archive(name), &package), what, file, line);
  if (package == NULL) fail_msg("%s:%d: %s gave NULL", file, line, what);
  return package;
}

manypy_object* capi_load_model(manypy_package* package, const char* file, int line) {
  manypy_object* object = NULL;
  capi_assert_ok(manypy_package_load_pickle(package, "model", "model.pkl", &object),
                 "manypy_package_load_pickle(package, \"model\", \"model.pkl\")", file, line);
  if (object == NULL) fail_msg("%s:%d: manypy_package_load_pickle gave NULL", file, line);
  return object;
}

/* ---- values ------------------------------------------------------------------- */

manypy_value* capi_string(const char* utf8, const char* file, int line) {
  manypy_value* v = NULL;
  capi_assert_ok(manypy_value_new_string(utf8, strlen(utf8), &v), "manypy_value_new_string", file,
                 line);
  if (v == NULL) fail_msg("%s:%d: manypy_value_new_string gave NULL", file, line);
  return v;
}

manypy_value* capi_list_of(int tuple, size_t count, manypy_value** items, const char* file,
                           int line) {
  manypy_value* list = tuple ? manypy_value_new_tuple() : manypy_value_new_list();
  if (list == NULL) fail_msg("%s:%d: out of memory", file, line);
  for (size_t k = 0; k < count; ++k) {
    capi_assert_ok(manypy_value_append(list, items[k]), "manypy_value_append", file, line);
  }
  return list;
}

manypy_value* capi_f32_tensor(const float* data, int32_t ndim, const int64_t* shape,
                              const char* file, int line) {
  int64_t numel = 1;
  for (int32_t k = 0; k < ndim; ++k) numel *= shape[k];
  DLDataType f32 = {kDLFloat, 32, 1};
  manypy_value* v = NULL;
  capi_assert_ok(manypy_value_new_tensor_from_buffer((void*)data, (size_t)numel * 4, f32, ndim,
                                                     shape, NULL, 1, NULL, NULL, &v),
                 "manypy_value_new_tensor_from_buffer (copy)", file, line);
  return v;
}

int64_t capi_numel(const DLTensor* t) {
  int64_t n = 1;
  for (int32_t k = 0; k < t->ndim; ++k) n *= t->shape[k];
  return n;
}

const void* capi_element(const DLTensor* t, int64_t flat) {
  int64_t offset = 0, contiguous = 1;
  for (int32_t k = t->ndim - 1; k >= 0; --k) {
    int64_t index = flat % t->shape[k];
    flat /= t->shape[k];
    offset += index * (t->strides ? t->strides[k] : contiguous);
    contiguous *= t->shape[k];
  }
  return (const char*)t->data + t->byte_offset + offset * (t->dtype.bits / 8) * t->dtype.lanes;
}

static void release_dl(DLManagedTensor* t) {
  if (t != NULL && t->deleter != NULL) t->deleter(t);
}

double capi_assert_f32_tensor(const manypy_value* value, int32_t ndim, const int64_t* shape,
                              const float* expected, double rtol, const char* what,
                              const char* file, int line) {
  if (manypy_value_get_kind(value) != MANYPY_VALUE_TENSOR) {
    fail_msg("%s:%d: %s is of kind %d, not a tensor", file, line, what,
             (int)manypy_value_get_kind(value));
  }
  DLManagedTensor* m = NULL;
  capi_assert_ok(manypy_value_get_tensor(value, &m), "manypy_value_get_tensor", file, line);
  const DLTensor* t = &m->dl_tensor;
  char problem[512] = "";
  if (t->device.device_type != kDLCPU) {
    snprintf(problem, sizeof problem, "device type %d", (int)t->device.device_type);
  } else if (t->dtype.code != kDLFloat || t->dtype.bits != 32 || t->dtype.lanes != 1) {
    snprintf(problem, sizeof problem, "dtype code %d bits %d lanes %d, not float32", t->dtype.code,
             t->dtype.bits, t->dtype.lanes);
  } else if (t->ndim != ndim) {
    snprintf(problem, sizeof problem, "ndim %d, expected %d", t->ndim, ndim);
  } else {
    for (int32_t k = 0; k < ndim; ++k) {
      if (t->shape[k] != shape[k]) {
        snprintf(problem, sizeof problem, "dimension %d is %lld, expected %lld", k,
                 (long long)t->shape[k], (long long)shape[k]);
        break;
      }
    }
  }
  double worst = 0;
  if (problem[0] == '\0') {
    int64_t n = capi_numel(t);
    double scale = 0;
    for (int64_t k = 0; k < n; ++k) scale = fmax(scale, fabs(expected[k]));
    for (int64_t k = 0; k < n; ++k) {
      float got;
      memcpy(&got, capi_element(t, k), 4);
      double diff = fabs((double)got - (double)expected[k]);
      if (!(diff <= rtol * (fabs(expected[k]) + scale))) {
        snprintf(problem, sizeof problem, "element %lld is %.9g, expected %.9g (rtol %g)",
                 (long long)k, (double)got, (double)expected[k], rtol);
        break;
      }
      worst = fmax(worst, diff);
    }
  }
  release_dl(m);
  if (problem[0] != '\0') fail_msg("%s:%d: %s: %s", file, line, what, problem);
  return worst;
}

static int differ(char* why, size_t size, const char* path, const char* format, ...) {
  char text[384];
  va_list va;
  va_start(va, format);
  vsnprintf(text, sizeof text, format, va);
  va_end(va);
  snprintf(why, size, "at %s: %s", path[0] ? path : "<root>", text);
  return 0;
}

static int tensors_equal(const manypy_value* a, const manypy_value* b, char* why, size_t size,
                         const char* path) {
  DLManagedTensor *ma = NULL, *mb = NULL;
  manypy_status* s = manypy_value_get_tensor(a, &ma);
  if (s == NULL) s = manypy_value_get_tensor(b, &mb);
  if (s != NULL) {
    differ(why, size, path, "manypy_value_get_tensor failed: %s", manypy_status_message(s));
    manypy_status_free(s);
    release_dl(ma);
    return 0;
  }
  const DLTensor* ta = &ma->dl_tensor;
  const DLTensor* tb = &mb->dl_tensor;
  int ok = 1;
  if (ta->dtype.code != tb->dtype.code || ta->dtype.bits != tb->dtype.bits ||
      ta->dtype.lanes != tb->dtype.lanes) {
    ok = differ(why, size, path, "dtype (%d, %d, %d) vs (%d, %d, %d)", ta->dtype.code,
                ta->dtype.bits, ta->dtype.lanes, tb->dtype.code, tb->dtype.bits, tb->dtype.lanes);
  } else if (ta->ndim != tb->ndim) {
    ok = differ(why, size, path, "ndim %d vs %d", ta->ndim, tb->ndim);
  } else {
    for (int32_t k = 0; ok && k < ta->ndim; ++k) {
      if (ta->shape[k] != tb->shape[k]) {
        ok = differ(why, size, path, "dimension %d: %lld vs %lld", k, (long long)ta->shape[k],
                    (long long)tb->shape[k]);
      }
    }
    size_t itemsize = (size_t)(ta->dtype.bits / 8) * ta->dtype.lanes;
    int64_t n = ok ? capi_numel(ta) : 0;
    for (int64_t k = 0; ok && k < n; ++k) {
      if (memcmp(capi_element(ta, k), capi_element(tb, k), itemsize) != 0) {
        ok = differ(why, size, path, "tensor element %lld differs", (long long)k);
      }
    }
  }
  release_dl(ma);
  release_dl(mb);
  return ok;
}

static int equal_at(const manypy_value* a, const manypy_value* b, char* why, size_t size,
                    const char* path) {
  manypy_value_kind ka = manypy_value_get_kind(a), kb = manypy_value_get_kind(b);
  if (ka != kb) return differ(why, size, path, "kind %d vs %d", (int)ka, (int)kb);
  int ok = 1;
  manypy_status* s = NULL;
  switch (ka) {
    case MANYPY_VALUE_NONE:
      return 1;
    case MANYPY_VALUE_BOOL: {
      int x = -1, y = -2;
      s = manypy_value_get_bool(a, &x);
      if (s == NULL) s = manypy_value_get_bool(b, &y);
      if (s == NULL && x != y) ok = differ(why, size, path, "bool %d vs %d", x, y);
      break;
    }
    case MANYPY_VALUE_INT64: {
      int64_t x = 0, y = 0;
      s = manypy_value_get_int64(a, &x);
      if (s == NULL) s = manypy_value_get_int64(b, &y);
      if (s == NULL && x != y) {
        ok = differ(why, size, path, "int64 %lld vs %lld", (long long)x, (long long)y);
      }
      break;
    }
    case MANYPY_VALUE_DOUBLE: {
      double x = 0, y = 0;
      s = manypy_value_get_double(a, &x);
      if (s == NULL) s = manypy_value_get_double(b, &y);
      if (s == NULL && memcmp(&x, &y, sizeof x) != 0) {
        ok = differ(why, size, path, "double %.17g vs %.17g", x, y);
      }
      break;
    }
    case MANYPY_VALUE_STRING:
    case MANYPY_VALUE_BYTES: {
      const void *x = NULL, *y = NULL;
      size_t nx = 0, ny = 0;
      if (ka == MANYPY_VALUE_STRING) {
        s = manypy_value_get_string(a, (const char**)&x, &nx);
        if (s == NULL) s = manypy_value_get_string(b, (const char**)&y, &ny);
      } else {
        s = manypy_value_get_bytes(a, &x, &nx);
        if (s == NULL) s = manypy_value_get_bytes(b, &y, &ny);
      }
      if (s == NULL && (nx != ny || memcmp(x, y, nx) != 0)) {
        ok = differ(why, size, path, "%s of %zu vs %zu bytes differ",
                    ka == MANYPY_VALUE_STRING ? "strings" : "bytes", nx, ny);
      }
      break;
    }
    case MANYPY_VALUE_TENSOR:
      return tensors_equal(a, b, why, size, path);
    case MANYPY_VALUE_LIST:
    case MANYPY_VALUE_TUPLE:
    case MANYPY_VALUE_DICT: {
      size_t na = 0, nb = 0;
      s = manypy_value_length(a, &na);
      if (s == NULL) s = manypy_value_length(b, &nb);
      if (s != NULL) break;
      if (na != nb) return differ(why, size, path, "length %zu vs %zu", na, nb);
      for (size_t k = 0; ok && k < na; ++k) {
        char sub[256];
        if (ka == MANYPY_VALUE_DICT) {
          const char *key_a = NULL, *key_b = NULL;
          size_t len_a = 0, len_b = 0;
          s = manypy_value_dict_key(a, k, &key_a, &len_a);
          if (s == NULL) s = manypy_value_dict_key(b, k, &key_b, &len_b);
          if (s != NULL) break;
          if (len_a != len_b || memcmp(key_a, key_b, len_a) != 0) {
            return differ(why, size, path, "key %zu: '%s' vs '%s'", k, key_a, key_b);
          }
          snprintf(sub, sizeof sub, "%s['%s']", path, key_a);
        } else {
          snprintf(sub, sizeof sub, "%s[%zu]", path, k);
        }
        const manypy_value *ia = NULL, *ib = NULL;
        s = manypy_value_get_item(a, k, &ia);
        if (s == NULL) s = manypy_value_get_item(b, k, &ib);
        if (s != NULL) break;
        ok = equal_at(ia, ib, why, size, sub);
      }
      break;
    }
    default:
      return differ(why, size, path, "unknown kind %d", (int)ka);
  }
  if (s != NULL) {
    ok = differ(why, size, path, "accessor failed: %s", manypy_status_message(s));
    manypy_status_free(s);
  }
  return ok;
}

int capi_values_equal(const manypy_value* a, const manypy_value* b, char* why, size_t why_size) {
  if (why_size > 0) why[0] = '\0';
  return equal_at(a, b, why, why_size, "");
}

/* ---- counted DLPack tensors -------------------------------------------------- */

typedef struct counted_tensor {
  DLManagedTensor managed;
  int64_t* shape;
  int64_t* strides;
  atomic_int* deleted;
} counted_tensor;

static void counted_deleter(DLManagedTensor* m) {
  counted_tensor* c = m->manager_ctx;
  atomic_fetch_add(c->deleted, 1);
  free(c->shape);
  free(c->strides);
  free(c);
}

DLManagedTensor* capi_counted_tensor(void* data, DLDataType dtype, int32_t ndim,
                                     const int64_t* shape, const int64_t* strides,
                                     atomic_int* deleted) {
  counted_tensor* c = calloc(1, sizeof *c);
  if (c == NULL) return NULL;
  size_t dims = ndim > 0 ? (size_t)ndim : 1;
  c->shape = calloc(dims, sizeof(int64_t));
  c->strides = strides ? calloc(dims, sizeof(int64_t)) : NULL;
  if (shape != NULL && ndim > 0) memcpy(c->shape, shape, (size_t)ndim * sizeof(int64_t));
  if (strides != NULL && ndim > 0) memcpy(c->strides, strides, (size_t)ndim * sizeof(int64_t));
  c->deleted = deleted;
  c->managed.dl_tensor.data = data;
  c->managed.dl_tensor.device.device_type = kDLCPU;
  c->managed.dl_tensor.device.device_id = 0;
  c->managed.dl_tensor.ndim = ndim;
  c->managed.dl_tensor.dtype = dtype;
  c->managed.dl_tensor.shape = c->shape;
  c->managed.dl_tensor.strides = c->strides;
  c->managed.dl_tensor.byte_offset = 0;
  c->managed.manager_ctx = c;
  c->managed.deleter = counted_deleter;
  return &c->managed;
}

void capi_count_release(void* ctx) { atomic_fetch_add((atomic_int*)ctx, 1); }
