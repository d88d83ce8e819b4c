/*
 * AOTInductor packages (.pt2) on the host, and the host trust.
 *
 * Where manypy is built with AOTInductor (MANYPY_TEST_AOTI, the torch 2.x
 * leg): the sample packages (samples/models/make_pt2.py) against their
 * expected outputs, from files and bytes, from many threads and
 * asynchronously; arguments that do not fit; every doctored package of
 * archives/malformed (make_pt2.py); deadlines; the per-call operator record with its
 * context; the API usage key; extra files and the export hook on a copy.
 * Elsewhere (torch 1.13): every load is refused with
 * MANYPY_ERR_UNSUPPORTED_VERSION naming the torch needed.
 * On both: the host trust covers TorchScript loads given no trust.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capi_test_support.h"

#define SENTINEL_MODULE ((manypy_aoti_module*)(uintptr_t)0x4d4d4d4d)

/* A digest no archive has. */
static const char kOtherDigest[] =
    "0000000000000000000000000000000000000000000000000000000000000000";

static manypy_archive_trust* trust_of(const char* digest) {
  manypy_archive_trust* trust = manypy_archive_trust_new();
  assert_non_null(trust);
  ASSERT_OK(manypy_archive_trust_add_sha256(trust, digest));
  return trust;
}

static void expect_message(manypy_status* status, const char* needle) {
  ASSERT_CONTAINS(manypy_status_message(status), needle);
  manypy_status_free(status);
}

/* On both legs: a host trust set once refuses TorchScript loaded without a
 * trust of its own, and with one: both must accept (code that loads a model
 * cannot widen the policy); removing it lets everything load again. */
static void test_host_trust_covers_torchscript(void** state) {
  (void)state;
  const char* script = ARCHIVE("loop_script.pt");
  char digest[65];
  SHA256_HEX(script, digest);
  manypy_archive_trust* other = trust_of(kOtherDigest);
  manypy_archive_trust* right = trust_of(digest);

  ASSERT_OK(manypy_set_host_archive_trust(other));
  manypy_script_module* module = NULL;
  expect_message(
      EXPECT_CODE(manypy_script_load_file(script, &module), MANYPY_ERR_UNTRUSTED_ARCHIVE), digest);
  size_t size = 0;
  void* bytes = READ_WHOLE_FILE(script, &size);
  ASSERT_CODE(manypy_script_load_bytes(bytes, size, &module), MANYPY_ERR_UNTRUSTED_ARCHIVE);
  assert_null(module);
  /* The host trust is a copy: freeing the caller's changes nothing. */
  manypy_archive_trust_free(other);
  ASSERT_CODE(manypy_script_load_file(script, &module), MANYPY_ERR_UNTRUSTED_ARCHIVE);

  /* A trust of the load's own that accepts it does not lower the host's. */
  expect_message(EXPECT_CODE(manypy_script_load_file_trusted(script, right, &module),
                             MANYPY_ERR_UNTRUSTED_ARCHIVE),
                 "the host trust");
  manypy_archive_trust* empty = manypy_archive_trust_new();
  ASSERT_CODE(manypy_script_load_file_trusted(script, empty, &module),
              MANYPY_ERR_UNTRUSTED_ARCHIVE);
  assert_null(module);

  ASSERT_OK(manypy_set_host_archive_trust(right));
  ASSERT_OK(manypy_script_load_file_trusted(script, empty, &module));
  manypy_script_free(module);
  module = NULL;
  /* With the host's accepting, one of the load's own that refuses refuses. */
  manypy_archive_trust* refusing = trust_of(kOtherDigest);
  expect_message(EXPECT_CODE(manypy_script_load_file_trusted(script, refusing, &module),
                             MANYPY_ERR_UNTRUSTED_ARCHIVE),
                 "the trust given to this load");
  manypy_archive_trust_free(refusing);
  manypy_archive_trust_free(empty);
  ASSERT_OK(manypy_script_load_bytes(bytes, size, &module));
  manypy_script_free(module);
  module = NULL;

  ASSERT_OK(manypy_set_host_archive_trust(NULL));
  ASSERT_OK(manypy_script_load_file(script, &module));
  manypy_script_free(module);
  manypy_archive_trust_free(right);
  free(bytes);
}

static void test_null_arguments(void** state) {
  (void)state;
  manypy_aoti_module* module = SENTINEL_MODULE;
  manypy_value* value = NULL;
  ASSERT_INVALID_ARG(manypy_aoti_load_file(NULL, NULL, &module), "manypy_aoti_load_file", "path");
  ASSERT_INVALID_ARG(manypy_aoti_load_file("x.pt2", NULL, NULL), "manypy_aoti_load_file",
                     "out_module");
  ASSERT_INVALID_ARG(manypy_aoti_load_bytes(NULL, 3, NULL, &module), "manypy_aoti_load_bytes",
                     "data");
  ASSERT_INVALID_ARG(manypy_aoti_call(NULL, NULL, NULL, NULL, &value), "manypy_aoti_call",
                     "module");
  ASSERT_INVALID_ARG(manypy_aoti_metadata(NULL, &value), "manypy_aoti_metadata", "module");
  ASSERT_INVALID_ARG(manypy_archive_save_copy(NULL, "x.pt2", NULL), "manypy_archive_save_copy",
                     "path");
  ASSERT_INVALID_ARG(manypy_archive_save_copy("x.pt2", NULL, NULL), "manypy_archive_save_copy",
                     "new_path");
  manypy_aoti_free(NULL);
}

#ifndef MANYPY_TEST_AOTI

/* torch 1.13: the functions exist and say what they need. */
static void test_refused_without_aoti(void** state) {
  (void)state;
  manypy_aoti_module* module = NULL;
  manypy_status* s =
      EXPECT_CODE(manypy_aoti_load_file(ARCHIVE("python_heavy_script.pt"), NULL, &module),
                  MANYPY_ERR_UNSUPPORTED_VERSION);
  ASSERT_CONTAINS(manypy_status_message(s), "torch 2.6 or newer");
  ASSERT_CONTAINS(manypy_status_message(s), "built against torch 1.");
  manypy_status_free(s);
  assert_null(module);
  const char bytes[4] = "PK\3\4";
  expect_message(EXPECT_CODE(manypy_aoti_load_bytes(bytes, sizeof bytes, NULL, &module),
                             MANYPY_ERR_UNSUPPORTED_VERSION),
                 "torch 2.6 or newer");
  assert_null(module);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_null_arguments),
      cmocka_unit_test(test_refused_without_aoti),
      cmocka_unit_test(test_host_trust_covers_torchscript),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

#else /* MANYPY_TEST_AOTI */

static const int64_t kHeavyInput[2] = {4, 64};
static const int64_t kHeavyLogits[2] = {4, 10};
static const int64_t kHeavyNorm[1] = {4};
static const int64_t kResnetInput[4] = {1, 3, 224, 224};
static const int64_t kResnetOut[2] = {1, 1000};

typedef struct heavy_case {
  float* input;
  float* logits;
  float* norm;
} heavy_case;

static heavy_case g_heavy;
static manypy_aoti_module* g_module; /* python_heavy.pt2, shared by the tests */

static manypy_aoti_module* load_aoti(const char* path) {
  manypy_aoti_module* module = SENTINEL_MODULE;
  manypy_status* s = manypy_aoti_load_file(path, NULL, &module);
  if (s != NULL) {
    capi_print_status(path, s, __FILE__, __LINE__);
    manypy_status_free(s);
    fail_msg("manypy_aoti_load_file(%s) failed", path);
  }
  assert_true(module != NULL && module != SENTINEL_MODULE);
  return module;
}

static manypy_value* heavy_args(void) {
  manypy_value* items[1] = {F32_TENSOR(g_heavy.input, 2, kHeavyInput)};
  return TUPLE_OF(1, items);
}

/* Non-asserting check of a python_heavy.pt2 result, for threads. */
static int heavy_result_ok(const manypy_value* result) {
  const manypy_value *logits = NULL, *norm = NULL;
  size_t n = 0;
  if (manypy_value_get_kind(result) != MANYPY_VALUE_DICT) return 0;
  manypy_status* s = manypy_value_length(result, &n);
  if (s || n != 2) return manypy_status_free(s), 0;
  if ((s = manypy_value_dict_get(result, "logits", &logits)) != NULL)
    return manypy_status_free(s), 0;
  if ((s = manypy_value_dict_get(result, "norm", &norm)) != NULL) return manypy_status_free(s), 0;
  DLManagedTensor* m = NULL;
  if ((s = manypy_value_get_tensor(logits, &m)) != NULL) return manypy_status_free(s), 0;
  const DLTensor* t = &m->dl_tensor;
  if (t->ndim != 2 || t->shape[0] != 4 || t->shape[1] != 10) return 0;
  const float* got = (const float*)((const char*)t->data + t->byte_offset);
  for (int k = 0; k < 40; ++k) {
    float d = got[k] - g_heavy.logits[k];
    if (d > 1e-4f || d < -1e-4f) return 0;
  }
  return 1;
}

static void check_heavy(const manypy_value* result, const char* what) {
  assert_int_equal(manypy_value_get_kind(result), MANYPY_VALUE_DICT);
  const manypy_value *logits = NULL, *norm = NULL;
  ASSERT_OK(manypy_value_dict_get(result, "logits", &logits));
  ASSERT_OK(manypy_value_dict_get(result, "norm", &norm));
  ASSERT_F32_TENSOR(logits, 2, kHeavyLogits, g_heavy.logits, 1e-4, what);
  ASSERT_F32_TENSOR(norm, 1, kHeavyNorm, g_heavy.norm, 1e-4, what);
}

static void call_heavy_and_check(manypy_aoti_module* module, const char* what) {
  manypy_value* args = heavy_args();
  manypy_value* result = NULL;
  ASSERT_OK(manypy_aoti_call(module, args, NULL, NULL, &result));
  check_heavy(result, what);
  manypy_value_free(result);
  manypy_value_free(args);
}

static int setup(void** state) {
  (void)state;
  g_heavy.input = capi_read_f32_file("python_heavy.input.bin", 4 * 64, __FILE__, __LINE__);
  g_heavy.logits =
      capi_read_f32_file("python_heavy_pt2.expected.logits.bin", 40, __FILE__, __LINE__);
  g_heavy.norm = capi_read_f32_file("python_heavy_pt2.expected.norm.bin", 4, __FILE__, __LINE__);
  manypy_status* s = manypy_aoti_load_file(capi_archive("python_heavy.pt2"), NULL, &g_module);
  if (s) {
    capi_print_status("python_heavy.pt2", s, __FILE__, __LINE__);
    manypy_status_free(s);
    return -1;
  }
  return 0;
}

static int teardown(void** state) {
  (void)state;
  manypy_aoti_free(g_module);
  free(g_heavy.input);
  free(g_heavy.logits);
  free(g_heavy.norm);
  capi_remove_temp_dirs();
  return 0;
}

static void test_python_heavy(void** state) {
  (void)state;
  call_heavy_and_check(g_module, "python_heavy.pt2");
  /* The same call again: nothing of the first stays behind. */
  call_heavy_and_check(g_module, "python_heavy.pt2, again");
}

/* Whether a library whose file name is `name` is mapped into this process. */
static int maps_library(const char* name) {
  FILE* maps = fopen("/proc/self/maps", "r");
  assert_non_null(maps);
  char line[4096];
  int found = 0;
  const size_t n = strlen(name);
  while (!found && fgets(line, sizeof line, maps)) {
    size_t len = strcspn(line, "\n");
    line[len] = '\0';
    found = len > n && line[len - n - 1] == '/' && strcmp(line + len - n, name) == 0;
  }
  fclose(maps);
  return found;
}

static void test_no_cuda_libraries_for_a_cpu_package(void** state) {
  (void)state;
  /* A package's library needs libtorch.so, which in CUDA builds of torch
   * needs libtorch_cuda.so and CUDA's libraries; manypy points that need at
   * libtorch_cpu.so, so a CPU package maps neither (loaded in setup). */
  call_heavy_and_check(g_module, "python_heavy.pt2");
  assert_false(maps_library("libtorch.so"));
  assert_false(maps_library("libtorch_cuda.so"));
}

static void test_resnet18_from_bytes(void** state) {
  (void)state;
  size_t size = 0;
  void* bytes = READ_WHOLE_FILE(ARCHIVE("resnet18.pt2"), &size);
  manypy_aoti_module* module = NULL;
  ASSERT_OK(manypy_aoti_load_bytes(bytes, size, NULL, &module));
  /* The bytes were copied: the caller's buffer may go at once. */
  memset(bytes, 0, size);
  free(bytes);
  float* input = READ_F32("resnet18.input.bin", 3 * 224 * 224);
  float* expected = READ_F32("resnet18_pt2.expected.out.bin", 1000);
  manypy_value* items[1] = {F32_TENSOR(input, 4, kResnetInput)};
  manypy_value* args = TUPLE_OF(1, items);
  manypy_value* result = NULL;
  ASSERT_OK(manypy_aoti_call(module, args, NULL, NULL, &result));
  ASSERT_F32_TENSOR(result, 2, kResnetOut, expected, 1e-4, "resnet18.pt2");
  manypy_value_free(result);
  manypy_value_free(args);
  manypy_aoti_free(module);
  free(input);
  free(expected);
}

static void test_metadata(void** state) {
  (void)state;
  manypy_value* dict = NULL;
  ASSERT_OK(manypy_aoti_metadata(g_module, &dict));
  const manypy_value* device = NULL;
  ASSERT_OK(manypy_value_dict_get(dict, "AOTI_DEVICE_KEY", &device));
  const char* text = NULL;
  size_t length = 0;
  ASSERT_OK(manypy_value_get_string(device, &text, &length));
  assert_string_equal(text, "cpu");
  manypy_value_free(dict);
}

/* Arguments that do not fit: each refused precisely, and the module still
 * serves afterwards. */
static void test_bad_arguments(void** state) {
  (void)state;
  manypy_value* result = NULL;
  /* Two tensors where the model takes one. */
  manypy_value* two[2] = {F32_TENSOR(g_heavy.input, 2, kHeavyInput),
                          F32_TENSOR(g_heavy.input, 2, kHeavyInput)};
  manypy_value* args = TUPLE_OF(2, two);
  expect_message(EXPECT_CODE(manypy_aoti_call(g_module, args, NULL, NULL, &result),
                             MANYPY_ERR_INVALID_ARGUMENT),
                 "takes 1 positional arguments (Tensor,), not 2");
  manypy_value_free(args);
  /* None. */
  expect_message(EXPECT_CODE(manypy_aoti_call(g_module, NULL, NULL, NULL, &result),
                             MANYPY_ERR_INVALID_ARGUMENT),
                 "not 0");
  /* A string where the tensor belongs. */
  manypy_value* text[1] = {STRING("x")};
  args = TUPLE_OF(1, text);
  expect_message(
      EXPECT_CODE(manypy_aoti_call(g_module, args, NULL, NULL, &result), MANYPY_ERR_WRONG_KIND),
      "args[0] must be a tensor");
  manypy_value_free(args);
  /* A keyword the model does not take. */
  manypy_value* kwargs = manypy_value_new_dict();
  assert_non_null(kwargs);
  ASSERT_OK(manypy_value_dict_set(kwargs, "steps", F32_TENSOR(g_heavy.input, 2, kHeavyInput)));
  args = heavy_args();
  expect_message(EXPECT_CODE(manypy_aoti_call(g_module, args, kwargs, NULL, &result),
                             MANYPY_ERR_INVALID_ARGUMENT),
                 "'steps', which the model does not take");
  manypy_value_free(kwargs);
  manypy_value_free(args);
  /* The wrong shape: [3, 64]. */
  const int64_t three[2] = {3, 64};
  manypy_value* shaped[1] = {F32_TENSOR(g_heavy.input, 2, three)};
  args = TUPLE_OF(1, shaped);
  expect_message(
      EXPECT_CODE(manypy_aoti_call(g_module, args, NULL, NULL, &result), MANYPY_ERR_BAD_TENSOR),
      "unmatched dim value at 0");
  manypy_value_free(args);
  /* The wrong dtype: float64. */
  double* wide = calloc(4 * 64, sizeof(double));
  assert_non_null(wide);
  manypy_value* tensor = NULL;
  ASSERT_OK(manypy_value_new_tensor_from_buffer(wide, 4 * 64 * sizeof(double),
                                                (DLDataType){kDLFloat, 64, 1}, 2, kHeavyInput, NULL,
                                                0, NULL, NULL, &tensor));
  manypy_value* wides[1] = {tensor};
  args = TUPLE_OF(1, wides);
  expect_message(
      EXPECT_CODE(manypy_aoti_call(g_module, args, NULL, NULL, &result), MANYPY_ERR_BAD_TENSOR),
      "unmatched dtype");
  manypy_value_free(args);
  free(wide);
  assert_null(result);
  call_heavy_and_check(g_module, "python_heavy.pt2 after refused calls");
}

typedef struct doctored {
  const char* file;
  manypy_code code;
  const char* message;
} doctored;

static void test_doctored_packages(void** state) {
  (void)state;
  static const doctored cases[] = {
      {"malformed/truncated.pt2", MANYPY_ERR_BAD_ARCHIVE, "truncated.pt2"},
      {"malformed/no_library.pt2", MANYPY_ERR_NOT_A_PACKAGE, "is not an AOTInductor package"},
      {"malformed/bad_library.pt2", MANYPY_ERR_BAD_ARCHIVE, "is cut short: its segment"},
      {"malformed/missing_dependency.pt2", MANYPY_ERR_LOADER, "libtorcx.so"},
      {"malformed/cuda_device.pt2", MANYPY_ERR_UNSUPPORTED_VERSION, "compiled for device 'cuda'"},
      {"malformed/other_machine.pt2", MANYPY_ERR_UNSUPPORTED_VERSION,
       "compiled for aarch64 CPUs; this host is x86_64"},
      {"malformed/aarch64_library.pt2", MANYPY_ERR_UNSUPPORTED_VERSION,
       "was compiled for aarch64; this host is x86_64"},
      {"malformed/newer_torch.pt2", MANYPY_ERR_LOADER, "aoti_torch_get_dtypf"},
      {"malformed/exported_only.pt2", MANYPY_ERR_NOT_A_PACKAGE,
       "holds an exported program but no AOTInductor-compiled model"},
      {"python_heavy_script.pt", MANYPY_ERR_NOT_A_PACKAGE, "manypy_script_load_file"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
    manypy_aoti_module* module = NULL;
    manypy_status* s = manypy_aoti_load_file(ARCHIVE(cases[k].file), NULL, &module);
    if (s == NULL || manypy_status_code(s) != cases[k].code ||
        strstr(manypy_status_message(s), cases[k].message) == NULL) {
      capi_print_status(cases[k].file, s, __FILE__, __LINE__);
      fail_msg("%s: expected code %d with '%s'", cases[k].file, cases[k].code, cases[k].message);
    }
    manypy_status_free(s);
    assert_null(module);
  }
  call_heavy_and_check(g_module, "python_heavy.pt2 after doctored packages");
}

static void test_trust(void** state) {
  (void)state;
  const char* path = ARCHIVE("python_heavy.pt2");
  char digest[65];
  SHA256_HEX(path, digest);
  manypy_archive_trust* other = trust_of(kOtherDigest);
  manypy_archive_trust* right = trust_of(digest);
  manypy_aoti_module* module = NULL;
  expect_message(
      EXPECT_CODE(manypy_aoti_load_file(path, other, &module), MANYPY_ERR_UNTRUSTED_ARCHIVE),
      digest);
  ASSERT_OK(manypy_aoti_load_file(path, right, &module));
  manypy_aoti_free(module);
  module = NULL;
  /* The host trust covers loads given none. */
  ASSERT_OK(manypy_set_host_archive_trust(other));
  ASSERT_CODE(manypy_aoti_load_file(path, NULL, &module), MANYPY_ERR_UNTRUSTED_ARCHIVE);
  size_t size = 0;
  void* bytes = READ_WHOLE_FILE(path, &size);
  ASSERT_CODE(manypy_aoti_load_bytes(bytes, size, NULL, &module), MANYPY_ERR_UNTRUSTED_ARCHIVE);
  /* Both must accept: the load's own trust does not widen the host's. */
  ASSERT_CODE(manypy_aoti_load_bytes(bytes, size, right, &module), MANYPY_ERR_UNTRUSTED_ARCHIVE);
  ASSERT_OK(manypy_set_host_archive_trust(right));
  ASSERT_OK(manypy_aoti_load_bytes(bytes, size, NULL, &module));
  manypy_aoti_free(module);
  module = NULL;
  ASSERT_CODE(manypy_aoti_load_bytes(bytes, size, other, &module), MANYPY_ERR_UNTRUSTED_ARCHIVE);
  ASSERT_OK(manypy_set_host_archive_trust(NULL));
  manypy_archive_trust_free(other);
  manypy_archive_trust_free(right);
  free(bytes);
}

typedef struct thread_work {
  int calls;
  int good;
  char error[256];
} thread_work;

static void* call_many(void* arg) {
  thread_work* work = arg;
  manypy_value* args = heavy_args();
  for (int k = 0; k < work->calls; ++k) {
    manypy_value* result = NULL;
    manypy_status* s = manypy_aoti_call(g_module, args, NULL, NULL, &result);
    if (s) {
      snprintf(work->error, sizeof work->error, "%s", manypy_status_message(s));
      manypy_status_free(s);
      continue;
    }
    work->good += heavy_result_ok(result);
    manypy_value_free(result);
  }
  manypy_value_free(args);
  return NULL;
}

static void test_threads(void** state) {
  (void)state;
  enum { kThreads = 6, kCalls = 200 };
  pthread_t threads[kThreads];
  thread_work work[kThreads];
  for (int t = 0; t < kThreads; ++t) {
    work[t] = (thread_work){.calls = kCalls};
    assert_int_equal(pthread_create(&threads[t], NULL, call_many, &work[t]), 0);
  }
  for (int t = 0; t < kThreads; ++t) {
    pthread_join(threads[t], NULL);
    if (work[t].error[0]) fail_msg("thread %d: %s", t, work[t].error);
    assert_int_equal(work[t].good, kCalls);
  }
}

static void test_deadlines(void** state) {
  (void)state;
  manypy_value* args = heavy_args();
  manypy_value* result = NULL;
  /* A deadline already past: refused before the model starts. */
  manypy_call_options* options = manypy_call_options_new();
  ASSERT_OK(manypy_call_options_set_deadline(options, 1));
  expect_message(EXPECT_CODE(manypy_aoti_call(g_module, args, NULL, options, &result),
                             MANYPY_ERR_DEADLINE_EXCEEDED),
                 "before the call started");
  manypy_call_options_free(options);
  /* A token cancelled before the call. */
  manypy_cancel_token* token = manypy_cancel_token_new();
  manypy_cancel_token_cancel(token);
  options = manypy_call_options_new();
  ASSERT_OK(manypy_call_options_set_cancel_token(options, token));
  ASSERT_CODE(manypy_aoti_call(g_module, args, NULL, options, &result), MANYPY_ERR_CANCELLED);
  manypy_call_options_free(options);
  manypy_cancel_token_free(token);
  /* A timeout of one nanosecond passes while the model runs: its result is
   * dropped. */
  options = manypy_call_options_new();
  ASSERT_OK(manypy_call_options_set_timeout(options, 1));
  ASSERT_CODE(manypy_aoti_call(g_module, args, NULL, options, &result),
              MANYPY_ERR_DEADLINE_EXCEEDED);
  manypy_call_options_free(options);
  /* A generous one changes nothing. */
  options = manypy_call_options_new();
  ASSERT_OK(manypy_call_options_set_timeout(options, 60LL * 1000 * 1000 * 1000));
  ASSERT_OK(manypy_aoti_call(g_module, args, NULL, options, &result));
  check_heavy(result, "python_heavy.pt2 within a timeout");
  manypy_value_free(result);
  manypy_call_options_free(options);
  manypy_value_free(args);
}

typedef struct async_outcome {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;
  int ok;
  char error[256];
} async_outcome;

static void on_done(void* user_data, manypy_value* result, manypy_status* status) {
  async_outcome* out = user_data;
  pthread_mutex_lock(&out->mu);
  if (status) {
    snprintf(out->error, sizeof out->error, "%s", manypy_status_message(status));
    manypy_status_free(status);
  } else {
    out->ok += heavy_result_ok(result);
    manypy_value_free(result);
  }
  out->done++;
  pthread_cond_broadcast(&out->cv);
  pthread_mutex_unlock(&out->mu);
}

/* Asynchronous calls, the module freed while they are in flight. */
static void test_async(void** state) {
  (void)state;
  enum { kCalls = 20 };
  manypy_aoti_module* module = load_aoti(ARCHIVE("python_heavy.pt2"));
  async_outcome out = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
  manypy_value* args = heavy_args();
  for (int k = 0; k < kCalls; ++k) {
    ASSERT_OK(manypy_aoti_call_async(module, args, NULL, NULL, on_done, &out));
  }
  manypy_aoti_free(module);
  manypy_value_free(args);
  pthread_mutex_lock(&out.mu);
  while (out.done < kCalls) pthread_cond_wait(&out.cv, &out.mu);
  pthread_mutex_unlock(&out.mu);
  if (out.error[0]) fail_msg("an asynchronous call failed: %s", out.error);
  assert_int_equal(out.ok, kCalls);
  /* Arguments that do not fit are refused at submission. */
  ASSERT_CODE(manypy_aoti_call_async(g_module, NULL, NULL, NULL, on_done, &out),
              MANYPY_ERR_INVALID_ARGUMENT);
}

typedef struct recorded {
  pthread_mutex_t mu;
  int runs;
  int with_context;
  size_t inputs;
} recorded;

static void on_exit_op(const manypy_op_event* event, void* user_data) {
  recorded* r = user_data;
  if (strcmp(event->name, "manypy::aoti_run") != 0) return;
  pthread_mutex_lock(&r->mu);
  r->runs++;
  if (strcmp(event->model_id, "heavy-pt2") == 0 && strcmp(event->request_id, "req-7") == 0) {
    r->with_context++;
  }
  r->inputs = event->num_inputs;
  pthread_mutex_unlock(&r->mu);
}

static void test_operator_record(void** state) {
  (void)state;
  recorded r = {.mu = PTHREAD_MUTEX_INITIALIZER};
  uint64_t id = 0;
  ASSERT_OK(manypy_add_op_callbacks(NULL, on_exit_op, &r, NULL, 1.0, 1, &id));
  manypy_call_options* options = manypy_call_options_new();
  ASSERT_OK(manypy_call_options_set_context(options, "heavy-pt2", "req-7"));
  manypy_value* args = heavy_args();
  manypy_value* result = NULL;
  for (int k = 0; k < 3; ++k) {
    ASSERT_OK(manypy_aoti_call(g_module, args, NULL, options, &result));
    manypy_value_free(result);
  }
  ASSERT_OK(manypy_remove_op_callbacks(id));
  assert_int_equal(r.runs, 3);
  assert_int_equal(r.with_context, 3);
  assert_int_equal(r.inputs, 1);
  manypy_value_free(args);
  manypy_call_options_free(options);
}

static void on_key(const char* key, void* user_data) {
  if (strcmp(key, "manypy.aoti.load") == 0) ++*(int*)user_data;
}

static void test_api_usage(void** state) {
  (void)state;
  int seen = 0;
  /* Keys already logged are replayed to a new handler: the load in setup. */
  ASSERT_OK(manypy_set_api_usage_handler(on_key, &seen, NULL));
  manypy_aoti_free(load_aoti(ARCHIVE("python_heavy.pt2")));
  ASSERT_OK(manypy_set_api_usage_handler(NULL, NULL, NULL));
  assert_int_equal(seen, 1);
}

static manypy_value* producer_files(void* user_data) {
  (void)user_data;
  manypy_value* dict = manypy_value_new_dict();
  manypy_value* text = NULL;
  if (dict == NULL) return NULL;
  if (manypy_value_new_string("{\"producer\": \"capi_aoti\"}", 25, &text) == NULL) {
    manypy_status_free(manypy_value_dict_set(dict, "producer_info.json", text));
  }
  return dict;
}

static void test_save_with_extra_files(void** state) {
  (void)state;
  ASSERT_OK(manypy_set_export_hook(producer_files, NULL, NULL));
  const char* dir = TEMP_DIR("aoti_save");
  char path[512];
  snprintf(path, sizeof path, "%s/heavy_stamped.pt2", dir);
  manypy_value* extra = manypy_value_new_dict();
  assert_non_null(extra);
  ASSERT_OK(manypy_value_dict_set(extra, "note.txt", STRING("served by manypy")));
  ASSERT_OK(manypy_archive_save_copy(ARCHIVE("python_heavy.pt2"), path, extra));
  manypy_value_free(extra);
  ASSERT_OK(manypy_set_export_hook(NULL, NULL, NULL));

  manypy_value* bytes = NULL;
  ASSERT_OK(manypy_archive_read_file(path, "extra/note.txt", &bytes));
  const void* data = NULL;
  size_t size = 0;
  ASSERT_OK(manypy_value_get_bytes(bytes, &data, &size));
  assert_int_equal(size, strlen("served by manypy"));
  assert_memory_equal(data, "served by manypy", size);
  manypy_value_free(bytes);
  ASSERT_OK(manypy_archive_read_file(path, "extra/producer_info.json", &bytes));
  manypy_value_free(bytes);
  /* The copy loads and computes as the original. */
  manypy_aoti_module* copy = load_aoti(path);
  call_heavy_and_check(copy, "the saved copy of python_heavy.pt2");
  manypy_aoti_free(copy);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_null_arguments),
      cmocka_unit_test(test_python_heavy),
      cmocka_unit_test(test_no_cuda_libraries_for_a_cpu_package),
      cmocka_unit_test(test_resnet18_from_bytes),
      cmocka_unit_test(test_metadata),
      cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_doctored_packages),
      cmocka_unit_test(test_trust),
      cmocka_unit_test(test_host_trust_covers_torchscript),
      cmocka_unit_test(test_threads),
      cmocka_unit_test(test_deadlines),
      cmocka_unit_test(test_async),
      cmocka_unit_test(test_operator_record),
      cmocka_unit_test(test_api_usage),
      cmocka_unit_test(test_save_with_extra_files),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}

#endif /* MANYPY_TEST_AOTI */
