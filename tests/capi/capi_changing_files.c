/*
 * Archives whose files change after they were loaded (docs/security.md,
 * "What was checked is what runs"; docs/models.md, "Memory"): overwritten
 * in place after the allow-list checked them, truncated as `cp new.pt
 * model.pt` does first, overwritten with other bytes, and replaced. A
 * loaded package goes on running exactly what was loaded, in the
 * interpreter that unpickled it and in every lazy replica after, and the
 * host never sees the file change (a truncated file mapped into memory
 * SIGBUSes on the next access).
 *
 * One pool of 2 interpreters per test: interpreter 1 makes its replica
 * after the file changed.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capi_test_support.h"

static char g_marker[64];
static capi_heavy_case g_heavy;

static int marker_exists(void) { return access(g_marker, F_OK) == 0; }

static manypy_pool* pool_of_two(manypy_pool_options* options) {
  ASSERT_OK(manypy_pool_options_set_interpreters(options, 2));
  manypy_pool* pool = NULL;
  ASSERT_OK(manypy_pool_create(options, &pool));
  manypy_pool_options_free(options);
  return pool;
}

/* A copy of sample archive `name` as <a new directory>/model.pt. */
static const char* copy_of(const char* name) {
  static char path[512];
  snprintf(path, sizeof path, "%s/model.pt", TEMP_DIR("changing"));
  size_t size = 0;
  void* bytes = READ_WHOLE_FILE(ARCHIVE(name), &size);
  WRITE_FILE(path, bytes, size, 1);
  free(bytes);
  return path;
}

/* python_heavy's expected outputs from interpreter `interpreter`. */
static void assert_heavy_serves(manypy_object* heavy, int32_t interpreter, const char* what) {
  manypy_value* args = HEAVY_ARGS(&g_heavy);
  manypy_value* kwargs = capi_heavy_kwargs();
  manypy_call_options* options = CALL_OPTIONS(interpreter, 0);
  manypy_value* result = NULL;
  ASSERT_OK(manypy_object_call(heavy, NULL, args, kwargs, options, &result));
  CHECK_HEAVY_RESULT(&g_heavy, result, what);
  manypy_value_free(result);
  manypy_call_options_free(options);
  manypy_value_free(kwargs);
  manypy_value_free(args);
}

/* The allow-list hashed twin_harmless.pt; twin_runs_code.pt, of the same
 * size, then overwrites it in place. What unpickles, now and in the lazy
 * replica, must be what was hashed. */
static void test_overwrite_after_the_trust_check_runs_nothing_new(void** state) {
  (void)state;
  const char* path = copy_of("malformed/twin_harmless.pt");
  char digest[65];
  SHA256_HEX(path, digest);
  manypy_pool_options* options = manypy_pool_options_new();
  ASSERT_OK(manypy_pool_options_add_trusted_sha256(options, digest));
  manypy_pool* pool = pool_of_two(options);
  manypy_package* package = NULL;
  ASSERT_OK(manypy_package_load_file(pool, path, &package));

  size_t size = 0;
  void* other = READ_WHOLE_FILE(ARCHIVE("malformed/twin_runs_code.pt"), &size);
  WRITE_FILE(path, other, size, 0);
  free(other);

  manypy_object* object = NULL; /* the harmless pickle's exec() gives None */
  ASSERT_OK(manypy_package_load_pickle(package, "model", "model.pkl", &object));
  assert_false(marker_exists());
  /* Interpreter 1 unpickles its replica first; None is then not callable. */
  manypy_call_options* on_1 = CALL_OPTIONS(1, 0);
  manypy_value* out = NULL;
  manypy_status* s =
      EXPECT_CODE(manypy_object_call(object, NULL, NULL, NULL, on_1, &out), MANYPY_ERR_PYTHON);
  ASSERT_CONTAINS(manypy_status_message(s), "not callable");
  manypy_status_free(s);
  assert_false(marker_exists());

  /* Loaded again, the file is what it is now: refused. */
  manypy_package* again = NULL;
  ASSERT_CODE(manypy_package_load_file(pool, path, &again), MANYPY_ERR_UNTRUSTED_ARCHIVE);
  assert_false(marker_exists());

  manypy_call_options_free(on_1);
  manypy_object_free(object);
  manypy_package_free(package);
  manypy_pool_destroy(pool);
}

/* python_heavy.pt copied, loaded and served; then `change` is done to the
 * file; then it must serve the same, from interpreter 0 and from a new
 * replica in interpreter 1. */
static void assert_loaded_model_survives(void (*change)(const char* path), const char* what) {
  const char* path = copy_of("python_heavy.pt");
  manypy_pool* pool = pool_of_two(manypy_pool_options_new());
  manypy_package* package = NULL;
  ASSERT_OK(manypy_package_load_file(pool, path, &package));
  manypy_object* heavy = LOAD_MODEL(package);
  assert_heavy_serves(heavy, 0, "before the change");
  change(path);
  char label[96];
  snprintf(label, sizeof label, "interpreter 0 after %s", what);
  assert_heavy_serves(heavy, 0, label);
  snprintf(label, sizeof label, "a new replica after %s", what);
  assert_heavy_serves(heavy, 1, label);
  manypy_object_free(heavy);
  manypy_package_free(package);
  manypy_pool_destroy(pool);
}

/* `cp new.pt model.pt` truncates model.pt before it writes. */
static void truncate_it(const char* path) { assert_int_equal(truncate(path, 0), 0); }

static void test_truncated_file_keeps_serving(void** state) {
  (void)state;
  assert_loaded_model_survives(truncate_it, "the truncation");
}

/* Other bytes written over the weights of a loaded model change nothing. */
static void overwrite_it(const char* path) {
  size_t size = 0;
  void* bytes = READ_WHOLE_FILE(path, &size);
  memset(bytes, 0x3f, size); /* 0x3f3f3f3f is 0.747 as a float */
  WRITE_FILE(path, bytes, size, 0);
  free(bytes);
}

static void test_overwritten_file_changes_no_weight(void** state) {
  (void)state;
  assert_loaded_model_survives(overwrite_it, "the overwrite");
}

/* A deploy: the new model is copied over the old file and loaded; the old
 * package serves the old model until it is freed. */
static void test_replaced_file_loads_anew(void** state) {
  (void)state;
  const char* path = copy_of("identity.pt");
  manypy_pool* pool = pool_of_two(manypy_pool_options_new());
  manypy_package* old_package = NULL;
  ASSERT_OK(manypy_package_load_file(pool, path, &old_package));
  manypy_object* identity = LOAD_MODEL(old_package);

  size_t size = 0;
  void* bytes = READ_WHOLE_FILE(ARCHIVE("python_heavy.pt"), &size);
  WRITE_FILE(path, bytes, size, 1);
  free(bytes);
  manypy_package* new_package = NULL;
  ASSERT_OK(manypy_package_load_file(pool, path, &new_package));
  manypy_object* heavy = LOAD_MODEL(new_package);
  assert_heavy_serves(heavy, 1, "the new model");

  for (int32_t i = 0; i < 2; ++i) {
    float x[3] = {1, 2, 3};
    int64_t shape[1] = {3};
    manypy_value* items[1] = {F32_TENSOR(x, 1, shape)};
    manypy_value* args = TUPLE_OF(1, items);
    manypy_call_options* options = CALL_OPTIONS(i, 0);
    manypy_value* out = NULL;
    ASSERT_OK(manypy_object_call(identity, NULL, args, NULL, options, &out));
    ASSERT_F32_TENSOR(out, 1, shape, x, 0, "the old model, still loaded");
    manypy_value_free(out);
    manypy_call_options_free(options);
    manypy_value_free(args);
  }
  manypy_object_free(heavy);
  manypy_package_free(new_package);
  manypy_object_free(identity);
  manypy_package_free(old_package);
  manypy_pool_destroy(pool);
}

static int setup(void** state) {
  (void)state;
  g_heavy = HEAVY_CASE_LOAD();
  return 0;
}

static int teardown(void** state) {
  (void)state;
  capi_heavy_case_free(&g_heavy);
  capi_remove_temp_dirs();
  return 0;
}

int main(void) {
  snprintf(g_marker, sizeof g_marker, "/tmp/capi_changing_marker_%d", (int)getpid());
  unlink(g_marker);
  /* Before any interpreter starts: each copies the environment then. */
  setenv("MANYPY_MARKER", g_marker, 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_overwrite_after_the_trust_check_runs_nothing_new),
      cmocka_unit_test(test_truncated_file_keeps_serving),
      cmocka_unit_test(test_overwritten_file_changes_no_weight),
      cmocka_unit_test(test_replaced_file_loads_anew),
  };
  int failed = cmocka_run_group_tests_name("capi_changing_files", tests, setup, teardown);
  unlink(g_marker);
  return failed;
}
