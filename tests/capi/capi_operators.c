/* Custom operator libraries: loaded once through the C API, usable in every
 * interpreter (also one started afterwards), by a packaged model served
 * through the pool, and by TorchScript on the host. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "capi_test_support.h"

static const char kOpCall[] =
    "float(torch.ops.manypy_sample.scaled_add(torch.ones(3), torch.ones(3), 2.0).sum())";

static manypy_value* xy_args(void) {
  static float x[3] = {1, 2, 3}, y[3] = {10, 20, 30};
  int64_t shape[1] = {3};
  DLDataType f32 = {kDLFloat, 32, 1};
  manypy_value *a = NULL, *b = NULL;
  ASSERT_OK(
      manypy_value_new_tensor_from_buffer(x, sizeof x, f32, 1, shape, NULL, 0, NULL, NULL, &a));
  ASSERT_OK(
      manypy_value_new_tensor_from_buffer(y, sizeof y, f32, 1, shape, NULL, 0, NULL, NULL, &b));
  manypy_value* args = manypy_value_new_tuple();
  ASSERT_OK(manypy_value_append(args, a));
  ASSERT_OK(manypy_value_append(args, b));
  return args;
}

/* x + 0.5 * y for the model below. */
static void assert_model_result(const manypy_value* result) {
  DLManagedTensor* t = NULL;
  ASSERT_OK(manypy_value_get_tensor(result, &t));
  const float* v = (const float*)t->dl_tensor.data;
  assert_true(v[0] == 6.0f && v[1] == 12.0f && v[2] == 18.0f);
  t->deleter(t);
}

static void test_operator_library_everywhere(void** state) {
  (void)state;
  manypy_pool* pool = MAKE_POOL(2, MANYPY_THREAD_MODE_DIRECT);
  ASSERT_OK(manypy_pool_exec_all(pool, "import torch"));
  /* Not there yet. */
  manypy_value* v = NULL;
  manypy_status* s = EXPECT_CODE(manypy_pool_eval(pool, 0, kOpCall, &v), MANYPY_ERR_PYTHON);
  manypy_status_free(s);

  ASSERT_OK(manypy_load_operator_library(MANYPY_SAMPLE_OPS_PATH));
  for (int32_t i = 0; i < 2; ++i) assert_true(EVAL_DOUBLE(pool, i, kOpCall) == 9.0);

  /* An interpreter started after the library was loaded has it too. */
  manypy_pool* later = MAKE_POOL(1, MANYPY_THREAD_MODE_DIRECT);
  ASSERT_OK(manypy_pool_exec(later, 0, "import torch"));
  assert_true(EVAL_DOUBLE(later, 0, kOpCall) == 9.0);

  /* A packaged model that calls the operator, made in interpreter 0 and
   * served by the pool from both interpreters. */
  char package_path[256], script_path[256], code[2048];
  snprintf(package_path, sizeof package_path, "/tmp/manypy-ops-%d.pt", (int)getpid());
  snprintf(script_path, sizeof script_path, "/tmp/manypy-ops-script-%d.pt", (int)getpid());
  /* Build the module through a real import so the pickle refers to it. */
  snprintf(code, sizeof code,
           "import sys, types\n"
           "from torch.package import PackageExporter\n"
           "src = ('import torch\\n'\n"
           "       'class UsesOp(torch.nn.Module):\\n'\n"
           "       '    def forward(self, x, y):\\n'\n"
           "       '        return torch.ops.manypy_sample.scaled_add(x, y, 0.5)\\n')\n"
           "mod = types.ModuleType('uses_op')\n"
           "exec(src, mod.__dict__)\n"
           "sys.modules['uses_op'] = mod\n"
           "with PackageExporter('%s') as e:\n"
           "    e.save_source_string('uses_op', src)\n"
           "    e.save_pickle('model', 'model.pkl', mod.UsesOp())\n"
           "del sys.modules['uses_op']\n"
           "# TorchScript reads the source, which the package's importer has.\n"
           "from torch.package import PackageImporter\n"
           "packaged = PackageImporter('%s').load_pickle('model', 'model.pkl')\n"
           "torch.jit.save(torch.jit.script(packaged), '%s')\n",
           package_path, package_path, script_path);
  ASSERT_OK(manypy_pool_exec(pool, 0, code));
  manypy_package* package = NULL;
  ASSERT_OK(manypy_package_load_file(pool, package_path, &package));
  manypy_object* model = LOAD_MODEL(package);
  manypy_value* args = xy_args();
  for (int32_t i = 0; i < 2; ++i) {
    manypy_call_options* pin = manypy_call_options_new();
    ASSERT_OK(manypy_call_options_set_interpreter(pin, i));
    manypy_value* out = NULL;
    ASSERT_OK(manypy_object_call(model, NULL, args, NULL, pin, &out));
    assert_model_result(out);
    manypy_value_free(out);
    manypy_call_options_free(pin);
  }

  /* TorchScript on the host calls the host's copy of the operator. */
  manypy_script_module* script = NULL;
  ASSERT_OK(manypy_script_load_file(script_path, &script));
  manypy_value* out = NULL;
  ASSERT_OK(manypy_script_call(script, NULL, args, NULL, NULL, &out));
  assert_model_result(out);
  manypy_value_free(out);

  manypy_script_free(script);
  manypy_value_free(args);
  manypy_object_free(model);
  manypy_package_free(package);
  manypy_pool_destroy(later);
  manypy_pool_destroy(pool);
  unlink(package_path);
  unlink(script_path);
}

static void test_bad_libraries(void** state) {
  (void)state;
  manypy_status* s =
      EXPECT_CODE(manypy_load_operator_library("/no/such/libops.so"), MANYPY_ERR_NOT_FOUND);
  ASSERT_CONTAINS(manypy_status_message(s), "/no/such/libops.so");
  manypy_status_free(s);
  s = EXPECT_CODE(manypy_load_operator_library(ARCHIVE("identity.pt")), MANYPY_ERR_LOADER);
  ASSERT_CONTAINS(manypy_status_message(s), "identity.pt");
  manypy_status_free(s);
  s = EXPECT_CODE(manypy_load_operator_library(NULL), MANYPY_ERR_INVALID_ARGUMENT);
  manypy_status_free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_libraries),
      cmocka_unit_test(test_operator_library_everywhere),
  };
  return cmocka_run_group_tests_name("capi_operators", tests, NULL, NULL);
}
