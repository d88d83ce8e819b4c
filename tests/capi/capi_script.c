/*
 * TorchScript on the host (libtorch, no interpreter): the sample scripted
 * archives against the expected outputs, loader errors, call errors; and a
 * TorchScript archive made inside an interpreter by torch.jit.script of a
 * class loaded from a torch.package, then run on the host. One interpreter.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capi_test_support.h"

#define SENTINEL_MODULE ((manypy_script_module*)(uintptr_t)0x4d4d4d4d)
#define SENTINEL_VALUE ((manypy_value*)(uintptr_t)0x7a7a7a7a)

static const int64_t kHeavyInput[2] = {4, 64};
static const int64_t kHeavyLogits[2] = {4, 10};
static const int64_t kHeavyNorm[1] = {4};
static const int64_t kResnetInput[4] = {1, 3, 224, 224};
static const int64_t kResnetOut[2] = {1, 1000};

static float* g_heavy_input;
static float* g_heavy_logits;
static float* g_heavy_norm;

static manypy_script_module* load_script(const char* path) {
  manypy_script_module* module = SENTINEL_MODULE;
  manypy_status* s = manypy_script_load_file(path, &module);
  if (s != NULL) {
    capi_print_status(path, s, __FILE__, __LINE__);
    manypy_status_free(s);
    fail_msg("manypy_script_load_file(%s) failed", path);
  }
  assert_true(module != NULL && module != SENTINEL_MODULE);
  return module;
}

static manypy_value* heavy_args(void) {
  manypy_value* items[1] = {F32_TENSOR(g_heavy_input, 2, kHeavyInput)};
  return TUPLE_OF(1, items);
}

/* Runs python_heavy's TorchScript with the expected-file inputs and checks
 * the outputs (float32 within 1e-5 relative). */
static void check_heavy_script(manypy_script_module* module, const char* method, const char* what) {
  manypy_value* args = heavy_args();
  manypy_value* kwargs = capi_heavy_kwargs();
  manypy_value* result = NULL;
  ASSERT_OK(manypy_script_call(module, method, args, kwargs, NULL, &result));
  manypy_value_free(kwargs);
  manypy_value_free(args);
  assert_int_equal(manypy_value_get_kind(result), MANYPY_VALUE_DICT);
  size_t n = 0;
  ASSERT_OK(manypy_value_length(result, &n));
  assert_int_equal(n, 3);
  const manypy_value *logits = NULL, *norm = NULL, *steps = NULL;
  ASSERT_OK(manypy_value_dict_get(result, "logits", &logits));
  ASSERT_OK(manypy_value_dict_get(result, "norm", &norm));
  ASSERT_OK(manypy_value_dict_get(result, "steps", &steps));
  double e1 = ASSERT_F32_TENSOR(logits, 2, kHeavyLogits, g_heavy_logits, 1e-5, what);
  double e2 = ASSERT_F32_TENSOR(norm, 1, kHeavyNorm, g_heavy_norm, 1e-5, what);
  int64_t s = 0;
  ASSERT_OK(manypy_value_get_int64(steps, &s));
  assert_int_equal(s, 5);
  fprintf(stderr, "  %s: max |diff| logits %.3g, norm %.3g\n", what, e1, e2);
  manypy_value_free(result);
}

/* ---- the sample TorchScript archives --------------------------------------------- */

static void test_python_heavy_script(void** state) {
  (void)state;
  manypy_script_module* module = load_script(ARCHIVE("python_heavy_script.pt"));
  check_heavy_script(module, NULL, "python_heavy_script.pt");
  check_heavy_script(module, "forward", "python_heavy_script.pt forward");
  /* Positional steps and normalize too; defaults give steps 8. */
  manypy_value* items[1] = {F32_TENSOR(g_heavy_input, 2, kHeavyInput)};
  manypy_value* args = LIST_OF(1, items);
  manypy_value* result = NULL;
  ASSERT_OK(manypy_script_call(module, NULL, args, NULL, NULL, &result));
  const manypy_value* steps = NULL;
  ASSERT_OK(manypy_value_dict_get(result, "steps", &steps));
  int64_t s = 0;
  ASSERT_OK(manypy_value_get_int64(steps, &s));
  assert_int_equal(s, 8);
  manypy_value_free(result);
  manypy_value_free(args);
  manypy_script_free(module);
}

static void test_resnet18_script(void** state) {
  (void)state;
  float* input = READ_F32("resnet18.input.bin", 3 * 224 * 224);
  float* expected = READ_F32("resnet18.expected.out.bin", 1000);
  manypy_script_module* module = load_script(ARCHIVE("resnet18_script.pt"));
  manypy_value* items[1] = {F32_TENSOR(input, 4, kResnetInput)};
  manypy_value* args = LIST_OF(1, items);
  manypy_value* result = NULL;
  ASSERT_OK(manypy_script_call(module, NULL, args, NULL, NULL, &result));
  double e = ASSERT_F32_TENSOR(result, 2, kResnetOut, expected, 1e-4, "resnet18_script.pt");
  fprintf(stderr, "  resnet18_script.pt: max |diff| %.3g\n", e);
  manypy_value_free(result);
  manypy_value_free(args);
  manypy_script_free(module);
  free(input);
  free(expected);
}

static void test_load_bytes(void** state) {
  (void)state;
  size_t size = 0;
  char* data = READ_WHOLE_FILE(ARCHIVE("python_heavy_script.pt"), &size);
  manypy_script_module* module = SENTINEL_MODULE;
  ASSERT_OK(manypy_script_load_bytes(data, size, &module));
  /* The bytes are the caller's again once the call returned. */
  memset(data, 0xAB, size);
  free(data);
  check_heavy_script(module, NULL, "python_heavy_script.pt from bytes");
  manypy_script_free(module);
}

/* A tensor argument whose data starts at DLTensor.byte_offset. */
static void test_input_with_byte_offset(void** state) {
  (void)state;
  manypy_script_module* module = load_script(ARCHIVE("python_heavy_script.pt"));
  /* One garbage row, then the input. */
  float* buffer = malloc((5 * 64) * sizeof(float));
  for (int k = 0; k < 64; ++k) buffer[k] = 1e6f;
  memcpy(buffer + 64, g_heavy_input, 4 * 64 * sizeof(float));
  atomic_int deleted = 0;
  const DLDataType f32 = {kDLFloat, 32, 1};
  DLManagedTensor* t = capi_counted_tensor(buffer, f32, 2, kHeavyInput, NULL, &deleted);
  t->dl_tensor.byte_offset = 64 * sizeof(float);
  manypy_value* x = NULL;
  ASSERT_OK(manypy_value_new_tensor(t, &x));
  manypy_value* args = manypy_value_new_list();
  ASSERT_OK(manypy_value_append(args, x));
  manypy_value* kwargs = capi_heavy_kwargs();
  manypy_value* result = NULL;
  ASSERT_OK(manypy_script_call(module, NULL, args, kwargs, NULL, &result));
  const manypy_value* logits = NULL;
  ASSERT_OK(manypy_value_dict_get(result, "logits", &logits));
  ASSERT_F32_TENSOR(logits, 2, kHeavyLogits, g_heavy_logits, 1e-5,
                    "logits for an input with byte_offset 256");
  manypy_value_free(result);
  manypy_value_free(kwargs);
  manypy_value_free(args);
  assert_int_equal(atomic_load(&deleted), 1);
  free(buffer);
  manypy_script_free(module);
}

/* ---- errors ------------------------------------------------------------------------- */

static void check_script_load_fails(const char* path, manypy_code code, const char* needle) {
  manypy_script_module* module = SENTINEL_MODULE;
  manypy_status* s = EXPECT_CODE(manypy_script_load_file(path, &module), code);
  fprintf(stderr, "  %s -> %s: %s\n", path, manypy_code_name(code), manypy_status_message(s));
  ASSERT_CONTAINS(manypy_status_message(s), path);
  ASSERT_CONTAINS(manypy_status_message(s), needle);
  manypy_status_free(s);
  assert_ptr_equal(module, SENTINEL_MODULE);
}

static void test_load_errors(void** state) {
  (void)state;
  check_script_load_fails(ARCHIVE("no_such_script.pt"), MANYPY_ERR_NOT_FOUND, "cannot open");
  /* A torch.package archive: the message names the right loader. */
  check_script_load_fails(ARCHIVE("python_heavy.pt"), MANYPY_ERR_BAD_ARCHIVE,
                          "manypy_package_load_file");
  check_script_load_fails(ARCHIVE("identity.pt"), MANYPY_ERR_BAD_ARCHIVE,
                          "manypy_package_load_file");
  check_script_load_fails(ARCHIVE("malformed/not_a_zip.pt"), MANYPY_ERR_BAD_ARCHIVE,
                          "not a zip archive");
  check_script_load_fails(ARCHIVE("malformed/truncated.pt"), MANYPY_ERR_BAD_ARCHIVE, "truncated");
  check_script_load_fails(ARCHIVE("malformed/future_version.pt"), MANYPY_ERR_UNSUPPORTED_VERSION,
                          "version 99");
  /* From memory. */
  size_t size = 0;
  char* data = READ_WHOLE_FILE(ARCHIVE("identity.pt"), &size);
  manypy_script_module* module = SENTINEL_MODULE;
  manypy_status* s =
      EXPECT_CODE(manypy_script_load_bytes(data, size, &module), MANYPY_ERR_BAD_ARCHIVE);
  ASSERT_CONTAINS(manypy_status_message(s), "manypy_package_load_file");
  manypy_status_free(s);
  free(data);
  ASSERT_CODE(manypy_script_load_bytes("not a zip", 9, &module), MANYPY_ERR_BAD_ARCHIVE);
  assert_ptr_equal(module, SENTINEL_MODULE);
}

static void test_call_errors(void** state) {
  (void)state;
  manypy_script_module* module = load_script(ARCHIVE("python_heavy_script.pt"));
  manypy_value* args = heavy_args();
  manypy_value* result = SENTINEL_VALUE;
  /* A missing method. */
  manypy_status* s =
      EXPECT_CODE(manypy_script_call(module, "no_such_method", args, NULL, NULL, &result),
                  MANYPY_ERR_NO_SUCH_NAME);
  ASSERT_CONTAINS(manypy_status_message(s), "no_such_method");
  manypy_status_free(s);
  /* No arguments: the method raises. */
  s = EXPECT_CODE(manypy_script_call(module, NULL, NULL, NULL, NULL, &result), MANYPY_ERR_PYTHON);
  ASSERT_CONTAINS(manypy_status_message(s), "forward");
  ASSERT_CONTAINS(manypy_status_message(s), "x");
  manypy_status_free(s);
  /* An argument of the wrong type (a string for steps). */
  manypy_value* kwargs = manypy_value_new_dict();
  ASSERT_OK(manypy_value_dict_set(kwargs, "steps", STRING("five")));
  ASSERT_CODE(manypy_script_call(module, NULL, args, kwargs, NULL, &result), MANYPY_ERR_PYTHON);
  manypy_value_free(kwargs);
  /* Bytes have no TorchScript type. */
  manypy_value* bytes_items[1] = {manypy_value_new_bytes("ab", 2)};
  manypy_value* with_bytes = LIST_OF(1, bytes_items);
  s = EXPECT_CODE(manypy_script_call(module, NULL, with_bytes, NULL, NULL, &result),
                  MANYPY_ERR_UNSUPPORTED_TYPE);
  ASSERT_CONTAINS(manypy_status_message(s), "bytes");
  manypy_status_free(s);
  manypy_value_free(with_bytes);
  /* args must be a list or tuple, kwargs a dict. */
  manypy_value* num = manypy_value_new_int64(1);
  s = EXPECT_CODE(manypy_script_call(module, NULL, num, NULL, NULL, &result),
                  MANYPY_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(manypy_status_message(s), "args must be a list or tuple");
  manypy_status_free(s);
  s = EXPECT_CODE(manypy_script_call(module, NULL, args, num, NULL, &result),
                  MANYPY_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(manypy_status_message(s), "kwargs must be a dict");
  manypy_status_free(s);
  manypy_value_free(num);
  assert_ptr_equal(result, SENTINEL_VALUE);
  /* Still works. */
  check_heavy_script(module, NULL, "python_heavy_script.pt after errors");
  manypy_value_free(args);
  manypy_script_free(module);
}

/* An error raised while the method runs (here torch's shape check inside
 * F.linear): manypy.h says MANYPY_ERR_PYTHON with TorchScript's message; a
 * status message is one line, the TorchScript traceback goes to the
 * traceback. */
static void test_error_raised_by_method(void** state) {
  (void)state;
  manypy_script_module* module = load_script(ARCHIVE("python_heavy_script.pt"));
  static float small[4 * 63];
  const int64_t bad_shape[2] = {4, 63};
  manypy_value* bad_items[1] = {F32_TENSOR(small, 2, bad_shape)};
  manypy_value* bad = LIST_OF(1, bad_items);
  manypy_value* result = SENTINEL_VALUE;
  manypy_status* s = manypy_script_call(module, NULL, bad, NULL, NULL, &result);
  manypy_value_free(bad);
  manypy_script_free(module);
  s = EXPECT_CODE(s, MANYPY_ERR_PYTHON);
  ASSERT_STARTS_WITH(manypy_status_message(s), "TorchScript forward: ");
  ASSERT_CONTAINS(manypy_status_message(s), "mat1 and mat2 shapes cannot be multiplied");
  ASSERT_CONTAINS(manypy_status_traceback(s), "mat1 and mat2 shapes cannot be multiplied");
  int one_line = strchr(manypy_status_message(s), '\n') == NULL;
  manypy_status_free(s);
  assert_true(one_line);
  assert_ptr_equal(result, SENTINEL_VALUE);
}

static void test_null_arguments_and_threads(void** state) {
  (void)state;
  manypy_script_module* module = SENTINEL_MODULE;
  ASSERT_INVALID_ARG(manypy_script_load_file(NULL, &module), "manypy_script_load_file", "path");
  ASSERT_INVALID_ARG(manypy_script_load_file(ARCHIVE("resnet18_script.pt"), NULL),
                     "manypy_script_load_file", "out_module");
  ASSERT_INVALID_ARG(manypy_script_load_bytes(NULL, 10, &module), "manypy_script_load_bytes",
                     "data");
  ASSERT_INVALID_ARG(manypy_script_load_bytes("x", 1, NULL), "manypy_script_load_bytes",
                     "out_module");
  assert_ptr_equal(module, SENTINEL_MODULE);
  manypy_value* result = SENTINEL_VALUE;
  ASSERT_INVALID_ARG(manypy_script_call(NULL, NULL, NULL, NULL, NULL, &result),
                     "manypy_script_call", "module");
  module = load_script(ARCHIVE("python_heavy_script.pt"));
  ASSERT_INVALID_ARG(manypy_script_call(module, NULL, NULL, NULL, NULL, NULL), "manypy_script_call",
                     "out_result");
  assert_ptr_equal(result, SENTINEL_VALUE);
  manypy_script_free(module);
  manypy_script_free(NULL);

  manypy_status* s = EXPECT_CODE(manypy_script_set_intra_op_threads(0), MANYPY_ERR_OUT_OF_RANGE);
  ASSERT_CONTAINS(manypy_status_message(s), "manypy_script_set_intra_op_threads");
  manypy_status_free(s);
  ASSERT_CODE(manypy_script_set_intra_op_threads(-1), MANYPY_ERR_OUT_OF_RANGE);
  ASSERT_OK(manypy_script_set_intra_op_threads(1));
}

/* ---- torch.jit.script of a packaged class, inside an interpreter ------------- */

static void test_script_a_packaged_model_in_an_interpreter(void** state) {
  (void)state;
  double t0 = capi_now();
  manypy_pool* pool = MAKE_POOL(1, MANYPY_THREAD_MODE_DIRECT);
  char source[8192];
  /* The path goes in as a Python string literal. */
  char path_literal[4200];
  snprintf(path_literal, sizeof path_literal, "'%s/python_heavy.pt'", capi_archives_dir());
  snprintf(source, sizeof source,
           "import os, tempfile\n"
           "import torch\n"
           "from torch.package import PackageImporter\n"
           "importer = PackageImporter(%s)\n"
           "model = importer.load_pickle('model', 'model.pkl')\n"
           "assert type(model).__name__ == 'PythonHeavy'\n"
           "assert type(model).__module__.startswith('<torch_package_'), type(model).__module__\n"
           "scripted = torch.jit.script(model)\n"
           "fd, scripted_path = tempfile.mkstemp(prefix='capi_script_', suffix='.pt')\n"
           "os.close(fd)\n"
           "torch.jit.save(scripted, scripted_path)\n"
           "with torch.no_grad():\n"
           "    x = torch.ones(2, 64)\n"
           "    eager = model(x, steps=3, normalize=True)['logits']\n"
           "    same = torch.allclose(scripted(x, steps=3, normalize=True)['logits'], eager,"
           " atol=1e-6)\n",
           path_literal);
  ASSERT_OK(manypy_pool_exec(pool, 0, source));
  assert_int_equal(EVAL_BOOL(pool, 0, "same"), 1);
  size_t n = 0;
  char* path = EVAL_STRING(pool, 0, "scripted_path", &n);
  manypy_pool_destroy(pool);
  fprintf(stderr, "  scripted in an interpreter to %s in %.1f s\n", path, capi_now() - t0);

  /* On the host: no interpreter involved. The file goes once loaded. */
  manypy_script_module* module = NULL;
  manypy_status* s = manypy_script_load_file(path, &module);
  unlink(path);
  free(path);
  ASSERT_OK(s);
  check_heavy_script(module, NULL, "torch.jit.script of the packaged PythonHeavy");
  manypy_script_free(module);
}

static void test_read_expected_files(void** state) {
  (void)state;
  g_heavy_input = READ_F32("python_heavy.input.bin", 4 * 64);
  g_heavy_logits = READ_F32("python_heavy.expected.logits.bin", 4 * 10);
  g_heavy_norm = READ_F32("python_heavy.expected.norm.bin", 4);
}

int main(void) {
  double t0 = capi_now();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_read_expected_files),
      cmocka_unit_test(test_python_heavy_script),
      cmocka_unit_test(test_resnet18_script),
      cmocka_unit_test(test_load_bytes),
      cmocka_unit_test(test_input_with_byte_offset),
      cmocka_unit_test(test_load_errors),
      cmocka_unit_test(test_call_errors),
      cmocka_unit_test(test_error_raised_by_method),
      cmocka_unit_test(test_null_arguments_and_threads),
      cmocka_unit_test(test_script_a_packaged_model_in_an_interpreter),
  };
  int failed = cmocka_run_group_tests_name("capi_script", tests, NULL, NULL);
  free(g_heavy_input);
  free(g_heavy_logits);
  free(g_heavy_norm);
  fprintf(stderr, "capi_script: %.1f s\n", capi_now() - t0);
  return failed == 0 ? 0 : 1;
}
