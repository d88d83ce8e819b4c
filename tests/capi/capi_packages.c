/*
 * torch.package archives: loading from a file and from memory, reading
 * records, and every malformed archive with its code and message; the pool
 * keeps serving after each failure. Two interpreters.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capi_test_support.h"

#define POOL_SIZE 2
#define SENTINEL_PACKAGE ((manypy_package*)(uintptr_t)0x5a5a5a5a)
#define SENTINEL_OBJECT ((manypy_object*)(uintptr_t)0x6b6b6b6b)
#define SENTINEL_VALUE ((manypy_value*)(uintptr_t)0x7a7a7a7a)

static manypy_pool* g_pool;

/* Whether a list of strings holds `name`. */
static int list_has(const manypy_value* list, const char* name) {
  size_t n = 0;
  ASSERT_OK(manypy_value_length(list, &n));
  for (size_t k = 0; k < n; ++k) {
    const manypy_value* item = NULL;
    ASSERT_OK(manypy_value_get_item(list, k, &item));
    const char* s = NULL;
    ASSERT_OK(manypy_value_get_string(item, &s, NULL));
    if (strcmp(s, name) == 0) return 1;
  }
  return 0;
}

/* identity(x) on interpreter `interp` gives x back: the pool serves. */
static void assert_identity_serves(manypy_object* identity, int32_t interp) {
  static const float data[6] = {1, 2, 3, 4, 5, 6};
  const int64_t shape[2] = {2, 3};
  manypy_value* items[1] = {F32_TENSOR(data, 2, shape)};
  manypy_value* args = LIST_OF(1, items);
  manypy_call_options* options = manypy_call_options_new();
  ASSERT_OK(manypy_call_options_set_interpreter(options, interp));
  manypy_value* r = NULL;
  manypy_status* s = manypy_object_call(identity, NULL, args, NULL, options, &r);
  manypy_call_options_free(options);
  manypy_value_free(args);
  ASSERT_OK(s);
  ASSERT_F32_TENSOR(r, 2, shape, data, 0, "identity result");
  manypy_value_free(r);
}

/* The pool still runs code and models on every interpreter. */
static void assert_pool_serves(void) {
  manypy_package* package = LOAD_PACKAGE(g_pool, "identity.pt");
  manypy_object* identity = LOAD_MODEL(package);
  for (int32_t i = 0; i < POOL_SIZE; ++i) {
    assert_int_equal(EVAL_INT64(g_pool, i, "6 * 7"), 42);
    assert_identity_serves(identity, i);
  }
  manypy_object_free(identity);
  manypy_package_free(package);
}

/* ---- good archives ------------------------------------------------------------ */

static void check_records(const manypy_package* package, const char* source_record) {
  manypy_value* list = NULL;
  ASSERT_OK(manypy_package_list_files(package, &list));
  assert_int_equal(manypy_value_get_kind(list), MANYPY_VALUE_LIST);
  assert_true(list_has(list, "model/model.pkl"));
  assert_true(list_has(list, ".data/version"));
  assert_true(list_has(list, ".data/extern_modules"));
  assert_true(list_has(list, source_record));
  /* Names are relative to the archive's top folder. */
  assert_false(list_has(list, "identity/.data/version"));
  manypy_value_free(list);

  manypy_value* bytes = NULL;
  ASSERT_OK(manypy_package_read_file(package, ".data/version", &bytes));
  assert_int_equal(manypy_value_get_kind(bytes), MANYPY_VALUE_BYTES);
  const void* data = NULL;
  size_t n = 0;
  ASSERT_OK(manypy_value_get_bytes(bytes, &data, &n));
  assert_int_equal(n, 2);
  assert_memory_equal(data, "6\n", 2);
  manypy_value_free(bytes);

  /* A source record, binary-safe. */
  ASSERT_OK(manypy_package_read_file(package, source_record, &bytes));
  ASSERT_OK(manypy_value_get_bytes(bytes, &data, &n));
  assert_true(n > 100);
  char* text = strndup(data, n);
  ASSERT_CONTAINS(text, "def forward(");
  free(text);
  manypy_value_free(bytes);

  /* A missing record. */
  manypy_value* out = SENTINEL_VALUE;
  manypy_status* s = EXPECT_CODE(manypy_package_read_file(package, "model/nope.pkl", &out),
                                 MANYPY_ERR_NO_SUCH_NAME);
  ASSERT_CONTAINS(manypy_status_message(s), "'model/nope.pkl'");
  manypy_status_free(s);
  assert_ptr_equal(out, SENTINEL_VALUE);
  /* Names are exact. */
  ASSERT_CODE(manypy_package_read_file(package, "model/model.pk", &out), MANYPY_ERR_NO_SUCH_NAME);
}

static void test_load_file_identity(void** state) {
  (void)state;
  manypy_package* package = LOAD_PACKAGE(g_pool, "identity.pt");
  check_records(package, "identity.py");
  manypy_object* identity = LOAD_MODEL(package);
  for (int32_t i = 0; i < POOL_SIZE; ++i) assert_identity_serves(identity, i);
  manypy_object_free(identity);
  manypy_package_free(package);
}

static void test_load_file_python_heavy(void** state) {
  (void)state;
  manypy_package* package = LOAD_PACKAGE(g_pool, "python_heavy.pt");
  check_records(package, "python_heavy.py");
  manypy_value* list = NULL;
  ASSERT_OK(manypy_package_list_files(package, &list));
  /* Its weights are tensor storage records. */
  assert_true(list_has(list, ".data/0.storage"));
  manypy_value_free(list);
  manypy_object* model = LOAD_MODEL(package);
  int has = -1;
  ASSERT_OK(manypy_object_hasattr(model, "step_w", &has));
  assert_int_equal(has, 1);
  manypy_object_free(model);
  manypy_package_free(package);
}

static void test_load_bytes(void** state) {
  (void)state;
  const char* names[] = {"identity.pt", "python_heavy.pt"};
  const char* sources[] = {"identity.py", "python_heavy.py"};
  for (int k = 0; k < 2; ++k) {
    size_t size = 0;
    char* data = READ_WHOLE_FILE(ARCHIVE(names[k]), &size);
    manypy_package* package = SENTINEL_PACKAGE;
    ASSERT_OK(manypy_package_load_bytes(g_pool, data, size, &package));
    assert_true(package != NULL && package != SENTINEL_PACKAGE);
    /* The bytes were copied: the caller's buffer may go at once. */
    memset(data, 0xAB, size);
    free(data);
    check_records(package, sources[k]);
    manypy_object* model = LOAD_MODEL(package);
    if (k == 0) {
      for (int32_t i = 0; i < POOL_SIZE; ++i) assert_identity_serves(model, i);
    } else {
      manypy_value* training = NULL;
      ASSERT_OK(manypy_object_getattr(model, "training", NULL, &training));
      assert_int_equal(manypy_value_get_kind(training), MANYPY_VALUE_BOOL);
      manypy_value_free(training);
    }
    manypy_object_free(model);
    manypy_package_free(package);
  }
}

/* The same file loaded twice: two independent packages. */
static void test_two_packages_of_one_file(void** state) {
  (void)state;
  manypy_package* a = LOAD_PACKAGE(g_pool, "identity.pt");
  manypy_package* b = LOAD_PACKAGE(g_pool, "identity.pt");
  manypy_object* oa = LOAD_MODEL(a);
  manypy_object* ob = LOAD_MODEL(b);
  manypy_package_free(a);
  manypy_object_free(oa);
  assert_identity_serves(ob, 0);
  assert_identity_serves(ob, 1);
  manypy_object_free(ob);
  manypy_package_free(b);
}

/* ---- malformed archives ------------------------------------------------------- */

/* load_file must fail with `code`; its message must name the path and hold
 * `needle`; *out_package must be untouched. Then the pool still serves. */
static void check_load_file_fails(const char* path, manypy_code code, const char* needle) {
  manypy_package* package = SENTINEL_PACKAGE;
  manypy_status* s = EXPECT_CODE(manypy_package_load_file(g_pool, path, &package), code);
  fprintf(stderr, "  %s -> %s: %s\n", path, manypy_code_name(code), manypy_status_message(s));
  ASSERT_CONTAINS(manypy_status_message(s), path);
  ASSERT_CONTAINS(manypy_status_message(s), needle);
  /* Found without running Python: no Python type or traceback. */
  assert_string_equal(manypy_status_python_type(s), "");
  assert_string_equal(manypy_status_traceback(s), "");
  manypy_status_free(s);
  assert_ptr_equal(package, SENTINEL_PACKAGE);
  assert_pool_serves();
}

static void check_load_bytes_fails(const char* name, manypy_code code, const char* needle) {
  size_t size = 0;
  void* data = READ_WHOLE_FILE(ARCHIVE(name), &size);
  manypy_package* package = SENTINEL_PACKAGE;
  manypy_status* s = manypy_package_load_bytes(g_pool, data, size, &package);
  free(data);
  s = EXPECT_CODE(s, code);
  ASSERT_CONTAINS(manypy_status_message(s), "<bytes>");
  ASSERT_CONTAINS(manypy_status_message(s), needle);
  manypy_status_free(s);
  assert_ptr_equal(package, SENTINEL_PACKAGE);
}

static void test_missing_file(void** state) {
  (void)state;
  check_load_file_fails(ARCHIVE("no_such_archive.pt"), MANYPY_ERR_NOT_FOUND,
                        "No such file or directory");
  check_load_file_fails("/nonexistent-dir/model.pt", MANYPY_ERR_NOT_FOUND, "cannot open");
}

static void test_not_a_zip(void** state) {
  (void)state;
  check_load_file_fails(ARCHIVE("malformed/not_a_zip.pt"), MANYPY_ERR_BAD_ARCHIVE, "not a zip");
  check_load_bytes_fails("malformed/not_a_zip.pt", MANYPY_ERR_BAD_ARCHIVE, "not a zip");
}

static void test_truncated(void** state) {
  (void)state;
  check_load_file_fails(ARCHIVE("malformed/truncated.pt"), MANYPY_ERR_BAD_ARCHIVE, "truncated");
  check_load_bytes_fails("malformed/truncated.pt", MANYPY_ERR_BAD_ARCHIVE, "truncated");
}

static void test_plain_zip(void** state) {
  (void)state;
  check_load_file_fails(ARCHIVE("malformed/plain.zip"), MANYPY_ERR_NOT_A_PACKAGE,
                        "not a PyTorch archive");
  check_load_bytes_fails("malformed/plain.zip", MANYPY_ERR_NOT_A_PACKAGE, "not a PyTorch archive");
}

static void test_torchscript_archive(void** state) {
  (void)state;
  check_load_file_fails(ARCHIVE("resnet18_script.pt"), MANYPY_ERR_NOT_A_PACKAGE,
                        "manypy_script_load_file");
  check_load_bytes_fails("python_heavy_script.pt", MANYPY_ERR_NOT_A_PACKAGE,
                         "manypy_script_load_file");
}

static void test_future_version(void** state) {
  (void)state;
  check_load_file_fails(ARCHIVE("malformed/future_version.pt"), MANYPY_ERR_UNSUPPORTED_VERSION,
                        "version 99");
  check_load_bytes_fails("malformed/future_version.pt", MANYPY_ERR_UNSUPPORTED_VERSION,
                         "version 99");
}

static void test_not_regular_or_empty(void** state) {
  (void)state;
  check_load_file_fails(capi_archives_dir(), MANYPY_ERR_BAD_ARCHIVE, "not a regular file");
  /* An empty file (removed before anything can fail). */
  char path[] = "/tmp/capi_packages_empty_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  manypy_package* empty = SENTINEL_PACKAGE;
  manypy_status* s = manypy_package_load_file(g_pool, path, &empty);
  unlink(path);
  s = EXPECT_CODE(s, MANYPY_ERR_BAD_ARCHIVE);
  ASSERT_CONTAINS(manypy_status_message(s), path);
  ASSERT_CONTAINS(manypy_status_message(s), "zip archive");
  manypy_status_free(s);
  assert_ptr_equal(empty, SENTINEL_PACKAGE);
  /* Zero bytes from memory. */
  manypy_package* package = SENTINEL_PACKAGE;
  ASSERT_CODE(manypy_package_load_bytes(g_pool, "", 0, &package), MANYPY_ERR_BAD_ARCHIVE);
  assert_ptr_equal(package, SENTINEL_PACKAGE);
}

/* The zip structure is fine, so the package loads; the pickle's CRC fails
 * when an interpreter opens it. */
static void test_corrupt_record(void** state) {
  (void)state;
  manypy_package* package = LOAD_PACKAGE(g_pool, "malformed/corrupt.pt");
  manypy_object* object = SENTINEL_OBJECT;
  for (int attempt = 0; attempt < 2; ++attempt) { /* and again: no state left behind */
    manypy_status* s = EXPECT_CODE(
        manypy_package_load_pickle(package, "model", "model.pkl", &object), MANYPY_ERR_BAD_ARCHIVE);
    fprintf(stderr, "  corrupt.pt load_pickle -> %s\n", manypy_status_message(s));
    ASSERT_CONTAINS(manypy_status_message(s), "CRC");
    ASSERT_CONTAINS(manypy_status_message(s), "model/model.pkl");
    manypy_status_free(s);
    assert_ptr_equal(object, SENTINEL_OBJECT);
  }
  /* Records are still readable without Python. */
  manypy_value* bytes = NULL;
  ASSERT_OK(manypy_package_read_file(package, ".data/version", &bytes));
  manypy_value_free(bytes);
  manypy_package_free(package);
  assert_pool_serves();
}

static void test_missing_extern(void** state) {
  (void)state;
  manypy_package* package = LOAD_PACKAGE(g_pool, "malformed/missing_extern.pt");
  manypy_object* object = SENTINEL_OBJECT;
  manypy_status* s = EXPECT_CODE(manypy_package_load_pickle(package, "model", "model.pkl", &object),
                                 MANYPY_ERR_MODULE_NOT_FOUND);
  ASSERT_CONTAINS(manypy_status_message(s), "manypy_missing_dep");
  ASSERT_CONTAINS(manypy_status_message(s), "ModuleNotFoundError");
  manypy_status_free(s);
  assert_ptr_equal(object, SENTINEL_OBJECT);
  manypy_package_free(package);
  assert_pool_serves();
}

/* A module the package does not have: there is no such pickle record, which
 * the host sees without running Python. */
static void test_missing_module_in_package(void** state) {
  (void)state;
  manypy_package* package = LOAD_PACKAGE(g_pool, "identity.pt");
  manypy_object* object = SENTINEL_OBJECT;
  manypy_status* s =
      EXPECT_CODE(manypy_package_load_pickle(package, "no_such_module", "model.pkl", &object),
                  MANYPY_ERR_NO_SUCH_NAME);
  ASSERT_CONTAINS(manypy_status_message(s), "no record 'no_such_module/model.pkl'");
  manypy_status_free(s);
  assert_ptr_equal(object, SENTINEL_OBJECT);
  manypy_package_free(package);
}

/* A pickle record that does not exist is a name that does not exist
 * (manypy.h: MANYPY_ERR_NO_SUCH_NAME is for a missing "record"). */
static void test_missing_pickle_record(void** state) {
  (void)state;
  manypy_package* package = LOAD_PACKAGE(g_pool, "identity.pt");
  manypy_object* object = SENTINEL_OBJECT;
  manypy_status* s = manypy_package_load_pickle(package, "model", "nope.pkl", &object);
  manypy_package_free(package);
  s = EXPECT_CODE(s, MANYPY_ERR_NO_SUCH_NAME);
  ASSERT_CONTAINS(manypy_status_message(s), "model/nope.pkl");
  manypy_status_free(s);
  assert_ptr_equal(object, SENTINEL_OBJECT);
}

/* manypy.h: manypy_status_python_type and manypy_status_traceback are the
 * Python exception's for MANYPY_ERR_PYTHON and MANYPY_ERR_SYNTAX, and ""
 * otherwise. Errors that come from a Python exception but get another code
 * (MODULE_NOT_FOUND, BAD_ARCHIVE, NO_SUCH_NAME) must follow that too (or
 * the header must say otherwise). */
/* The header: a status carries the Python type and traceback exactly when a
 * Python exception caused it, whatever the (more specific) code. */
static void test_python_type_when_python_raised(void** state) {
  (void)state;
  manypy_package* extern_package = LOAD_PACKAGE(g_pool, "malformed/missing_extern.pt");
  manypy_package* corrupt = LOAD_PACKAGE(g_pool, "malformed/corrupt.pt");
  manypy_package* identity_package = LOAD_PACKAGE(g_pool, "identity.pt");
  manypy_object* identity = LOAD_MODEL(identity_package);
  manypy_object* object = NULL;
  manypy_value* value = NULL;
  manypy_package* never = NULL;
  struct {
    const char* what;
    manypy_status* status;
    manypy_code code;
    const char* python_type; /* "" : no exception involved, so no traceback */
  } cases[] = {
      {"missing extern module",
       manypy_package_load_pickle(extern_package, "model", "model.pkl", &object),
       MANYPY_ERR_MODULE_NOT_FOUND, "ModuleNotFoundError"},
      {"corrupt record", manypy_package_load_pickle(corrupt, "model", "model.pkl", &object),
       MANYPY_ERR_BAD_ARCHIVE, "manypy.ArchiveError"},
      {"missing method", manypy_object_call(identity, "nope", NULL, NULL, NULL, &value),
       MANYPY_ERR_NO_SUCH_NAME, "AttributeError"},
      {"missing attribute", manypy_object_getattr(identity, "nope", NULL, &value),
       MANYPY_ERR_NO_SUCH_NAME, "AttributeError"},
      {"missing pickle record",
       manypy_package_load_pickle(identity_package, "model", "nope.pkl", &object),
       MANYPY_ERR_NO_SUCH_NAME, ""},
      {"not a zip", manypy_package_load_file(g_pool, ARCHIVE("malformed/not_a_zip.pt"), &never),
       MANYPY_ERR_BAD_ARCHIVE, ""},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
    manypy_status* s = cases[k].status;
    if (manypy_status_code(s) != cases[k].code) {
      capi_print_status(cases[k].what, s, __FILE__, __LINE__);
      fail_msg("%s: %s", cases[k].what, manypy_code_name(manypy_status_code(s)));
    }
    if (strcmp(manypy_status_python_type(s), cases[k].python_type) != 0) {
      fail_msg("%s: python_type \"%s\", expected \"%s\"", cases[k].what,
               manypy_status_python_type(s), cases[k].python_type);
    }
    int has_traceback = manypy_status_traceback(s)[0] != '\0';
    if (has_traceback != (cases[k].python_type[0] != '\0')) {
      fail_msg("%s: %s traceback", cases[k].what, has_traceback ? "unexpected" : "missing");
    }
    manypy_status_free(s);
  }
  assert_null(object);
  assert_null(never);
  manypy_object_free(identity);
  manypy_package_free(identity_package);
  manypy_package_free(corrupt);
  manypy_package_free(extern_package);
}

static void test_null_arguments(void** state) {
  (void)state;
  manypy_package* package = SENTINEL_PACKAGE;
  const char* path = ARCHIVE("identity.pt");
  ASSERT_INVALID_ARG(manypy_package_load_file(NULL, path, &package), "manypy_package_load_file",
                     "pool");
  ASSERT_INVALID_ARG(manypy_package_load_file(g_pool, NULL, &package), "manypy_package_load_file",
                     "path");
  ASSERT_INVALID_ARG(manypy_package_load_file(g_pool, path, NULL), "manypy_package_load_file",
                     "out_package");
  ASSERT_INVALID_ARG(manypy_package_load_bytes(NULL, "x", 1, &package), "manypy_package_load_bytes",
                     "pool");
  ASSERT_INVALID_ARG(manypy_package_load_bytes(g_pool, NULL, 10, &package),
                     "manypy_package_load_bytes", "data");
  ASSERT_INVALID_ARG(manypy_package_load_bytes(g_pool, "x", 1, NULL), "manypy_package_load_bytes",
                     "out_package");
  assert_ptr_equal(package, SENTINEL_PACKAGE);

  package = LOAD_PACKAGE(g_pool, "identity.pt");
  manypy_value* v = SENTINEL_VALUE;
  ASSERT_INVALID_ARG(manypy_package_list_files(NULL, &v), "manypy_package_list_files", "package");
  ASSERT_INVALID_ARG(manypy_package_list_files(package, NULL), "manypy_package_list_files",
                     "out_list");
  ASSERT_INVALID_ARG(manypy_package_read_file(NULL, "x", &v), "manypy_package_read_file",
                     "package");
  ASSERT_INVALID_ARG(manypy_package_read_file(package, NULL, &v), "manypy_package_read_file",
                     "name");
  ASSERT_INVALID_ARG(manypy_package_read_file(package, "x", NULL), "manypy_package_read_file",
                     "out_bytes");
  assert_ptr_equal(v, SENTINEL_VALUE);
  manypy_object* object = SENTINEL_OBJECT;
  ASSERT_INVALID_ARG(manypy_package_load_pickle(NULL, "model", "model.pkl", &object),
                     "manypy_package_load_pickle", "package");
  ASSERT_INVALID_ARG(manypy_package_load_pickle(package, NULL, "model.pkl", &object),
                     "manypy_package_load_pickle", "module");
  ASSERT_INVALID_ARG(manypy_package_load_pickle(package, "model", NULL, &object),
                     "manypy_package_load_pickle", "name");
  ASSERT_INVALID_ARG(manypy_package_load_pickle(package, "model", "model.pkl", NULL),
                     "manypy_package_load_pickle", "out_object");
  assert_ptr_equal(object, SENTINEL_OBJECT);
  manypy_package_free(package);
  manypy_package_free(NULL);
  manypy_object_free(NULL);
}

static int pool_setup(void** state) {
  (void)state;
  double t0 = capi_now();
  manypy_status* s = capi_create_pool(POOL_SIZE, &g_pool);
  if (s != NULL) {
    capi_print_status("creating the pool", s, __FILE__, __LINE__);
    manypy_status_free(s);
    return -1;
  }
  fprintf(stderr, "capi_packages: %d interpreters in %.2f s\n", POOL_SIZE, capi_now() - t0);
  return 0;
}

static int pool_teardown(void** state) {
  (void)state;
  manypy_pool_destroy(g_pool);
  return 0;
}

int main(void) {
  double t0 = capi_now();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_load_file_identity),
      cmocka_unit_test(test_load_file_python_heavy),
      cmocka_unit_test(test_load_bytes),
      cmocka_unit_test(test_two_packages_of_one_file),
      cmocka_unit_test(test_missing_file),
      cmocka_unit_test(test_not_a_zip),
      cmocka_unit_test(test_truncated),
      cmocka_unit_test(test_plain_zip),
      cmocka_unit_test(test_torchscript_archive),
      cmocka_unit_test(test_future_version),
      cmocka_unit_test(test_not_regular_or_empty),
      cmocka_unit_test(test_corrupt_record),
      cmocka_unit_test(test_missing_extern),
      cmocka_unit_test(test_missing_module_in_package),
      cmocka_unit_test(test_missing_pickle_record),
      cmocka_unit_test(test_python_type_when_python_raised),
      cmocka_unit_test(test_null_arguments),
  };
  int failed = cmocka_run_group_tests_name("capi_packages", tests, pool_setup, pool_teardown);
  fprintf(stderr, "capi_packages: %.1f s\n", capi_now() - t0);
  return failed == 0 ? 0 : 1;
}
