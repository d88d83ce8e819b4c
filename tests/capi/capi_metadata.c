/* Archive metadata: extra files round-trip through TorchScript and
 * torch.package archives, and the process-wide export hook stamps every
 * archive written, from C and from Python inside an interpreter. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capi_test_support.h"

static const char kProducerInfo[] = "{\"producer\": \"capi_metadata\"}";
static int g_hook_calls;
static int g_freed;

static manypy_value* producer_info_hook(void* user_data) {
  assert_ptr_equal(user_data, &g_hook_calls);
  g_hook_calls++;
  manypy_value* files = manypy_value_new_dict();
  manypy_value* text = NULL;
  if (manypy_value_new_string(kProducerInfo, strlen(kProducerInfo), &text) == NULL) {
    manypy_status_free(manypy_value_dict_set(files, "producer_info.json", text));
  }
  return files;
}

static void count_free(void* user_data) {
  assert_ptr_equal(user_data, &g_hook_calls);
  g_freed++;
}

/* The record `name` of the archive at `path`, as a NUL-terminated copy. */
static char* read_record(const char* path, const char* name) {
  manypy_value* bytes = NULL;
  ASSERT_OK(manypy_archive_read_file(path, name, &bytes));
  const void* data = NULL;
  size_t size = 0;
  ASSERT_OK(manypy_value_get_bytes(bytes, &data, &size));
  char* copy = malloc(size + 1);
  memcpy(copy, data, size);
  copy[size] = '\0';
  manypy_value_free(bytes);
  return copy;
}

static void assert_record(const char* path, const char* name, const char* expected) {
  char* text = read_record(path, name);
  assert_string_equal(text, expected);
  free(text);
}

static void temp_path(char* out, size_t size, const char* suffix) {
  snprintf(out, size, "/tmp/manypy-metadata-%d-%s", (int)getpid(), suffix);
}

static void test_torchscript_extra_files_and_hook_from_c(void** state) {
  (void)state;
  ASSERT_OK(manypy_set_export_hook(producer_info_hook, &g_hook_calls, count_free));
  manypy_script_module* module = NULL;
  ASSERT_OK(manypy_script_load_file(ARCHIVE("python_heavy_script.pt"), &module));
  manypy_value* extra = manypy_value_new_dict();
  ASSERT_OK(manypy_value_dict_set(extra, "note.txt", manypy_value_new_bytes("hello\0x", 7)));
  char path[256];
  temp_path(path, sizeof path, "script.pt");
  int calls = g_hook_calls;
  ASSERT_OK(manypy_script_save_file(module, path, extra));
  assert_int_equal(g_hook_calls, calls + 1);

  manypy_value* bytes = NULL;
  ASSERT_OK(manypy_archive_read_file(path, "extra/note.txt", &bytes));
  const void* data = NULL;
  size_t size = 0;
  ASSERT_OK(manypy_value_get_bytes(bytes, &data, &size));
  assert_int_equal(size, 7);
  assert_memory_equal(data, "hello\0x", 7);
  manypy_value_free(bytes);
  assert_record(path, "extra/producer_info.json", kProducerInfo);

  /* The saved module still loads and has the files. */
  manypy_script_module* reloaded = NULL;
  ASSERT_OK(manypy_script_load_file(path, &reloaded));
  manypy_script_free(reloaded);

  /* Bad input. */
  manypy_status* s =
      EXPECT_CODE(manypy_archive_read_file(path, "extra/nope", &bytes), MANYPY_ERR_NO_SUCH_NAME);
  manypy_status_free(s);
  manypy_value* not_dict = manypy_value_new_int64(1);
  s = EXPECT_CODE(manypy_script_save_file(module, path, not_dict), MANYPY_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(manypy_status_message(s), "manypy_script_save_file");
  manypy_status_free(s);
  manypy_value_free(not_dict);
  s = EXPECT_CODE(manypy_script_save_file(module, "/no/such/dir/x.pt", NULL), MANYPY_ERR_NOT_FOUND);
  manypy_status_free(s);
  manypy_value_free(extra);
  manypy_script_free(module);
  unlink(path);
}

static void test_hook_stamps_archives_written_by_python(void** state) {
  (void)state;
  manypy_pool* pool = MAKE_POOL(2, MANYPY_THREAD_MODE_DIRECT);
  char script_path[256], package_path[256], code[2048];
  temp_path(script_path, sizeof script_path, "from-python.pt");
  temp_path(package_path, sizeof package_path, "package.pt");
  /* torch.jit.save in interpreter 0, PackageExporter in interpreter 1: both
   * namespaces' libtorch and Python were hooked at start. */
  snprintf(code, sizeof code,
           "import torch\n"
           "torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), %s%s%s)\n",
           "'", script_path, "'");
  ASSERT_OK(manypy_pool_exec(pool, 0, code));
  snprintf(code, sizeof code,
           "import torch\n"
           "from torch.package import PackageExporter\n"
           "with PackageExporter('%s') as e:\n"
           "    e.save_text('notes', 'readme.txt', 'packaged in an interpreter')\n",
           package_path);
  ASSERT_OK(manypy_pool_exec(pool, 1, code));
  assert_record(script_path, "extra/producer_info.json", kProducerInfo);
  assert_record(package_path, "extra/producer_info.json", kProducerInfo);
  assert_record(package_path, "notes/readme.txt", "packaged in an interpreter");

  /* The stamped package is still a torch.package manypy can load. */
  manypy_package* package = NULL;
  ASSERT_OK(manypy_package_load_file(pool, package_path, &package));
  manypy_package_free(package);

  /* A torch.package written through the C API: a copy of a loaded package
   * with extra files, stamped by the hook, that still serves its model. */
  char copy_path[256];
  temp_path(copy_path, sizeof copy_path, "identity-copy.pt");
  manypy_package* identity = LOAD_PACKAGE(pool, "identity.pt");
  manypy_value* extra = manypy_value_new_dict();
  ASSERT_OK(
      manypy_value_dict_set(extra, "model_card.md", manypy_value_new_bytes("# identity", 10)));
  ASSERT_OK(manypy_package_save_file(identity, copy_path, extra));
  manypy_value_free(extra);
  assert_record(copy_path, "extra/model_card.md", "# identity");
  assert_record(copy_path, "extra/producer_info.json", kProducerInfo);
  assert_record(copy_path, ".data/version", "6\n");
  manypy_package* copy = NULL;
  ASSERT_OK(manypy_package_load_file(pool, copy_path, &copy));
  manypy_object* model = LOAD_MODEL(copy);
  manypy_value* args = manypy_value_new_tuple();
  ASSERT_OK(manypy_value_append(args, manypy_value_new_int64(42)));
  manypy_value* out = NULL;
  ASSERT_OK(manypy_object_call(model, NULL, args, NULL, NULL, &out));
  int64_t answer = 0;
  ASSERT_OK(manypy_value_get_int64(out, &answer));
  assert_int_equal(answer, 42);
  manypy_value_free(out);
  manypy_value_free(args);
  manypy_object_free(model);
  manypy_package_free(copy);
  manypy_status* bad = EXPECT_CODE(manypy_package_save_file(identity, "/no/such/dir/x.pt", NULL),
                                   MANYPY_ERR_NOT_FOUND);
  manypy_status_free(bad);
  manypy_package_free(identity);
  unlink(copy_path);

  /* Removing the hook: nothing is added any more, and the user data is
   * freed exactly once. */
  ASSERT_OK(manypy_set_export_hook(NULL, NULL, NULL));
  assert_int_equal(g_freed, 1);
  unlink(script_path);
  ASSERT_OK(manypy_pool_exec(pool, 0,
                             "torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), "
                             "__import__('tempfile').gettempdir() + '/manypy-nohook.pt')"));
  manypy_value* bytes = NULL;
  manypy_status* s = EXPECT_CODE(
      manypy_archive_read_file("/tmp/manypy-nohook.pt", "extra/producer_info.json", &bytes),
      MANYPY_ERR_NO_SUCH_NAME);
  manypy_status_free(s);
  unlink("/tmp/manypy-nohook.pt");
  unlink(package_path);
  manypy_pool_destroy(pool);
}

static void test_reading_malformed_archives(void** state) {
  (void)state;
  manypy_value* out = NULL;
  manypy_status* s = EXPECT_CODE(manypy_archive_list_files(ARCHIVE("malformed/not_a_zip.pt"), &out),
                                 MANYPY_ERR_BAD_ARCHIVE);
  manypy_status_free(s);
  s = EXPECT_CODE(manypy_archive_read_file(ARCHIVE("malformed/truncated.pt"), "x", &out),
                  MANYPY_ERR_BAD_ARCHIVE);
  manypy_status_free(s);
  s = EXPECT_CODE(manypy_archive_list_files("/no/such/archive.pt", &out), MANYPY_ERR_NOT_FOUND);
  manypy_status_free(s);
  s = EXPECT_CODE(manypy_archive_list_files(ARCHIVE("malformed/future_version.pt"), &out),
                  MANYPY_ERR_UNSUPPORTED_VERSION);
  manypy_status_free(s);
  assert_null(out);
  ASSERT_OK(manypy_archive_list_files(ARCHIVE("resnet18_script.pt"), &out));
  size_t n = 0;
  ASSERT_OK(manypy_value_length(out, &n));
  assert_true(n > 3);
  manypy_value_free(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_torchscript_extra_files_and_hook_from_c),
      cmocka_unit_test(test_hook_stamps_archives_written_by_python),
      cmocka_unit_test(test_reading_malformed_archives),
  };
  return cmocka_run_group_tests_name("capi_metadata", tests, NULL, NULL);
}
