/*
 * Hostile and careless input, each class of it: truncated and doctored
 * archives through every path that opens one, arguments past the depth
 * limit, tensors whose memory is not there, empty paths, names that are not
 * UTF-8, flags out of range, and random mutations of real archives through
 * the whole path (load, unpickle, call). None may crash the process or come
 * back as MANYPY_ERR_INTERNAL (which is for manypy's own bugs) or as
 * MANYPY_ERR_PYTHON when the archive is at fault.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "capi_test_support.h"

static manypy_pool* g_pool;

static int setup(void** state) {
  (void)state;
  manypy_status* s = capi_create_pool(1, &g_pool);
  if (s != NULL) {
    capi_print_status("setup", s, __FILE__, __LINE__);
    manypy_status_free(s);
    return -1;
  }
  return 0;
}

static int teardown(void** state) {
  (void)state;
  manypy_pool_destroy(g_pool);
  return 0;
}

/* The codes an archive's fault may give. */
static int archive_code(manypy_code code) {
  return code == MANYPY_ERR_BAD_ARCHIVE || code == MANYPY_ERR_NOT_A_PACKAGE ||
         code == MANYPY_ERR_UNSUPPORTED_VERSION;
}

/* A status from opening a bad archive: NULL (it loaded), or an archive code.
 * Frees it; fails the test with `what` otherwise. */
static void expect_archive_outcome(manypy_status* s, const char* what, size_t at) {
  if (s == NULL) return;
  manypy_code code = manypy_status_code(s);
  if (!archive_code(code)) {
    capi_print_status(what, s, __FILE__, __LINE__);
    manypy_status_free(s);
    fail_msg("%s (at %zu): %s, expected an archive code", what, at, manypy_code_name(code));
  }
  manypy_status_free(s);
}

/* A file of its own holding `data`; the caller unlinks it. */
static void write_file(const char* path, const void* data, size_t size) {
  FILE* f = fopen(path, "wb");
  assert_non_null(f);
  if (size > 0) assert_int_equal(fwrite(data, 1, size, f), size);
  assert_int_equal(fclose(f), 0);
}

/* Opens `data` every way an archive is opened: package from bytes and from a
 * file, archive list and read by path, TorchScript from bytes and file. */
static void open_every_way(const void* data, size_t size, const char* what, size_t at) {
  char path[64];
  snprintf(path, sizeof path, "/tmp/capi_hostile_%d.pt", (int)getpid());
  write_file(path, data, size);
  manypy_package* package = NULL;
  manypy_status* s = manypy_package_load_bytes(g_pool, size ? data : "", size, &package);
  expect_archive_outcome(s, what, at);
  manypy_package_free(package);
  package = NULL;
  expect_archive_outcome(manypy_package_load_file(g_pool, path, &package), what, at);
  manypy_package_free(package);
  manypy_value* v = NULL;
  expect_archive_outcome(manypy_archive_list_files(path, &v), what, at);
  manypy_value_free(v);
  v = NULL;
  s = manypy_archive_read_file(path, ".data/version", &v);
  if (s != NULL && manypy_status_code(s) == MANYPY_ERR_NO_SUCH_NAME) {
    manypy_status_free(s);
    s = NULL;
  }
  expect_archive_outcome(s, what, at);
  manypy_value_free(v);
  manypy_script_module* module = NULL;
  expect_archive_outcome(manypy_script_load_bytes(size ? data : "", size, &module), what, at);
  manypy_script_free(module);
  module = NULL;
  expect_archive_outcome(manypy_script_load_file(path, &module), what, at);
  manypy_script_free(module);
  unlink(path);
}

/* ---- truncated archives ------------------------------------------------- */

/* Every prefix of identity.pt, and 64 of a TorchScript archive: a model file
 * cut short by a failed download. */
static void test_every_truncation(void** state) {
  (void)state;
  size_t size = 0;
  unsigned char* good = READ_WHOLE_FILE(ARCHIVE("identity.pt"), &size);
  for (size_t n = 0; n < size; ++n) open_every_way(good, n, "identity.pt truncated", n);
  free(good);
  unsigned char* script = READ_WHOLE_FILE(ARCHIVE("loop_script.pt"), &size);
  for (size_t k = 0; k < 64; ++k) {
    const size_t n = size * k / 64;
    open_every_way(script, n, "loop_script.pt truncated", n);
  }
  free(script);
}

/* ---- doctored records ---------------------------------------------------- */

static void expect_load_pickle(const char* archive, manypy_code code, const char* needle) {
  manypy_package* package = LOAD_PACKAGE(g_pool, archive);
  manypy_object* object = NULL;
  manypy_status* s =
      EXPECT_CODE(manypy_package_load_pickle(package, "model", "model.pkl", &object), code);
  ASSERT_CONTAINS(manypy_status_message(s), needle);
  manypy_status_free(s);
  assert_null(object);
  manypy_package_free(package);
}

static void test_doctored_records(void** state) {
  (void)state;
  /* A storage shorter than its tensor would read its neighbours' bytes. */
  expect_load_pickle("malformed/short_storage.pt", MANYPY_ERR_BAD_ARCHIVE,
                     "holds 0 bytes but its tensor views");
  /* A deflated storage would be read as raw, compressed bytes. */
  expect_load_pickle("malformed/deflated_storage.pt", MANYPY_ERR_BAD_ARCHIVE, "is compressed");
  /* Packaged source that is not UTF-8. */
  expect_load_pickle("malformed/bad_source.pt", MANYPY_ERR_BAD_ARCHIVE, "utf-8");
  /* A version beyond 64 bits. */
  manypy_package* package = NULL;
  manypy_status* s =
      EXPECT_CODE(manypy_package_load_file(g_pool, ARCHIVE("malformed/huge_version.pt"), &package),
                  MANYPY_ERR_UNSUPPORTED_VERSION);
  manypy_status_free(s);
  manypy_value* files = NULL;
  ASSERT_CODE(manypy_archive_list_files(ARCHIVE("malformed/huge_version.pt"), &files),
              MANYPY_ERR_UNSUPPORTED_VERSION);
  /* TorchScript code that does not parse. */
  manypy_script_module* module = NULL;
  s = manypy_script_load_file(ARCHIVE("malformed/bad_script.pt"), &module);
  assert_non_null(s);
  if (manypy_status_code(s) != MANYPY_ERR_BAD_ARCHIVE &&
      manypy_status_code(s) != MANYPY_ERR_PYTHON) {
    capi_print_status("bad_script.pt", s, __FILE__, __LINE__);
    fail_msg("bad_script.pt: %s", manypy_code_name(manypy_status_code(s)));
  }
  manypy_status_free(s);
  /* A pickle that pops an empty stack: libtorch's unpickler crashed on it. */
  s = EXPECT_CODE(manypy_script_load_file(ARCHIVE("malformed/bad_pickle_script.pt"), &module),
                  MANYPY_ERR_BAD_ARCHIVE);
  ASSERT_CONTAINS(manypy_status_message(s), "constants.pkl");
  ASSERT_CONTAINS(manypy_status_message(s), "BUILD");
  manypy_status_free(s);
  assert_null(module);
  /* The interpreter still serves. */
  assert_int_equal(EVAL_INT64(g_pool, 0, "6 * 7"), 42);
}

/* ---- values ----------------------------------------------------------------- */

static void test_depth_limit(void** state) {
  (void)state;
  manypy_value* v = manypy_value_new_list();
  for (int depth = 2; depth <= 64; ++depth) {
    manypy_value* outer = manypy_value_new_list();
    ASSERT_OK(manypy_value_append(outer, v));
    v = outer;
  }
  /* 64 lists deep: one more is refused, and the item is freed with it. */
  manypy_value* outer = manypy_value_new_list();
  manypy_status* s = EXPECT_CODE(manypy_value_append(outer, v), MANYPY_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(manypy_status_message(s), "at most 64");
  manypy_status_free(s);
  manypy_value* dict = manypy_value_new_dict();
  v = manypy_value_new_list();
  for (int depth = 2; depth <= 64; ++depth) {
    manypy_value* wrap = manypy_value_new_tuple();
    ASSERT_OK(manypy_value_append(wrap, v));
    v = wrap;
  }
  ASSERT_CODE(manypy_value_dict_set(dict, "deep", v), MANYPY_ERR_INVALID_ARGUMENT);
  /* A Python result deeper than the limit is refused as unrepresentable. */
  manypy_value* r = NULL;
  s = EXPECT_CODE(manypy_pool_eval(g_pool, 0, "eval('[' * 65 + ']' * 65)", &r),
                  MANYPY_ERR_UNSUPPORTED_TYPE);
  ASSERT_CONTAINS(manypy_status_message(s), "nested more than 64 deep");
  manypy_status_free(s);
  ASSERT_OK(manypy_pool_eval(g_pool, 0, "eval('[' * 64 + ']' * 64)", &r));
  manypy_value_free(r);
  manypy_value_free(dict);
  manypy_value_free(outer);
}

/* ---- tensors ---------------------------------------------------------------- */

static void test_tensor_memory_that_is_not_there(void** state) {
  (void)state;
  static float data[6];
  const DLDataType f32 = {kDLFloat, 32, 1};
  const int64_t shape[2] = {2, 3};
  atomic_int deleted = 0;
  manypy_value* v = NULL;

  DLManagedTensor* t = capi_counted_tensor(data, f32, 2, shape, NULL, &deleted);
  t->dl_tensor.byte_offset = (uint64_t)1 << 40; /* 1 TiB past the buffer */
  manypy_status* s = EXPECT_CODE(manypy_value_new_tensor(t, &v), MANYPY_ERR_BAD_TENSOR);
  ASSERT_CONTAINS(manypy_status_message(s), "not mapped");
  manypy_status_free(s);

  t = capi_counted_tensor(NULL, f32, 2, shape, NULL, &deleted);
  s = EXPECT_CODE(manypy_value_new_tensor(t, &v), MANYPY_ERR_BAD_TENSOR);
  ASSERT_CONTAINS(manypy_status_message(s), "NULL");
  manypy_status_free(s);

  /* A page that was mapped and is no longer. */
  long page = sysconf(_SC_PAGESIZE);
  void* gone = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(gone != MAP_FAILED);
  assert_int_equal(munmap(gone, (size_t)page), 0);
  t = capi_counted_tensor(gone, f32, 2, shape, NULL, &deleted);
  ASSERT_CODE(manypy_value_new_tensor(t, &v), MANYPY_ERR_BAD_TENSOR);
  assert_int_equal(atomic_load(&deleted), 3); /* each deleter ran once */
  assert_null(v);

  /* A byte_offset inside the buffer is fine. */
  t = capi_counted_tensor(data, f32, 1, shape, NULL, &deleted);
  t->dl_tensor.byte_offset = 8;
  ASSERT_OK(manypy_value_new_tensor(t, &v));
  manypy_value_free(v);
  assert_int_equal(atomic_load(&deleted), 4);

  /* copy is a flag. */
  atomic_int released = 0;
  v = NULL;
  ASSERT_INVALID_ARG(manypy_value_new_tensor_from_buffer(data, sizeof data, f32, 2, shape, NULL, 2,
                                                         capi_count_release, &released, &v),
                     "manypy_value_new_tensor_from_buffer", "copy");
  assert_int_equal(atomic_load(&released), 1);
  assert_null(v);
}

/* ---- paths, names, flags ---------------------------------------------------- */

static void test_empty_paths(void** state) {
  (void)state;
  manypy_package* package = NULL;
  manypy_value* v = NULL;
  manypy_script_module* module = NULL;
  ASSERT_INVALID_ARG(manypy_package_load_file(g_pool, "", &package), "manypy_package_load_file",
                     "path");
  ASSERT_INVALID_ARG(manypy_archive_list_files("", &v), "manypy_archive_list_files", "path");
  ASSERT_INVALID_ARG(manypy_archive_read_file("", "x", &v), "manypy_archive_read_file", "path");
  ASSERT_INVALID_ARG(manypy_script_load_file("", &module), "manypy_script_load_file", "path");
  ASSERT_INVALID_ARG(manypy_load_operator_library(""), "manypy_load_operator_library", "path");
  ASSERT_OK(manypy_script_load_file(ARCHIVE("loop_script.pt"), &module));
  ASSERT_INVALID_ARG(manypy_script_save_file(module, "", NULL), "manypy_script_save_file", "path");
  manypy_script_free(module);
  package = LOAD_PACKAGE(g_pool, "identity.pt");
  ASSERT_INVALID_ARG(manypy_package_save_file(package, "", NULL), "manypy_package_save_file",
                     "path");
  manypy_package_free(package);
}

static void test_names_that_are_not_utf8(void** state) {
  (void)state;
  const char* bad = "na\xffme";
  manypy_package* package = LOAD_PACKAGE(g_pool, "identity.pt");
  manypy_object* identity = LOAD_MODEL(package);
  manypy_object* object = NULL;
  manypy_value* v = NULL;
  int has = -1;
  ASSERT_INVALID_ARG(manypy_package_load_pickle(package, bad, "model.pkl", &object),
                     "manypy_package_load_pickle", "module");
  ASSERT_INVALID_ARG(manypy_package_load_pickle(package, "model", bad, &object),
                     "manypy_package_load_pickle", "name");
  ASSERT_INVALID_ARG(manypy_object_call(identity, bad, NULL, NULL, NULL, &v), "manypy_object_call",
                     "method");
  ASSERT_INVALID_ARG(manypy_object_getattr(identity, bad, NULL, &v), "manypy_object_getattr",
                     "name");
  ASSERT_INVALID_ARG(manypy_object_hasattr(identity, bad, &has), "manypy_object_hasattr", "name");
  assert_int_equal(has, -1);
  ASSERT_INVALID_ARG(manypy_package_read_file(package, bad, &v), "manypy_package_read_file",
                     "name");
  ASSERT_INVALID_ARG(manypy_archive_read_file(ARCHIVE("identity.pt"), bad, &v),
                     "manypy_archive_read_file", "name");
  ASSERT_INVALID_ARG(manypy_log_api_usage(bad), "manypy_log_api_usage", "key");
  manypy_call_options* options = manypy_call_options_new();
  ASSERT_INVALID_ARG(manypy_call_options_set_context(options, bad, "r"),
                     "manypy_call_options_set_context", "model_id");
  manypy_call_options_free(options);
  manypy_value* dict = manypy_value_new_dict();
  const manypy_value* item = NULL;
  ASSERT_INVALID_ARG(manypy_value_dict_get(dict, bad, &item), "manypy_value_dict_get", "key");
  ASSERT_INVALID_ARG(manypy_value_dict_get_n(dict, bad, strlen(bad), &item),
                     "manypy_value_dict_get_n", "key");
  ASSERT_INVALID_ARG(manypy_value_dict_set_n(dict, bad, strlen(bad), manypy_value_new_none()),
                     "manypy_value_dict_set_n", "key");
  ASSERT_INVALID_ARG(manypy_status_new(MANYPY_ERR_PYTHON, bad), "manypy_status_new", "message");
  manypy_value_free(dict);
  manypy_script_module* module = NULL;
  ASSERT_OK(manypy_script_load_file(ARCHIVE("loop_script.pt"), &module));
  ASSERT_INVALID_ARG(manypy_script_call(module, bad, NULL, NULL, NULL, &v), "manypy_script_call",
                     "method");
  manypy_script_free(module);
  assert_null(object);
  assert_null(v);
  manypy_object_free(identity);
  manypy_package_free(package);
}

static int g_freed;
static void count_free(void* p) {
  (void)p;
  ++g_freed;
}

static void test_flags_out_of_range(void** state) {
  (void)state;
  uint64_t id = 0;
  g_freed = 0;
  ASSERT_INVALID_ARG(manypy_add_op_callbacks(NULL, NULL, NULL, count_free, 0.5, 2, &id),
                     "manypy_add_op_callbacks", "needs_inputs");
  assert_int_equal(g_freed, 1); /* user data freed once, also on failure */
}

/* ---- mutations through the whole path -------------------------------------- */

/* xorshift: the same cases on every run. */
static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_random(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return g_rng;
}

/* Flips 1 to 4 random bytes of `good` and runs it as far as it goes: load
 * from bytes, unpickle, call with a zero float32 tensor of `shape` (what the
 * model takes). Any status but INTERNAL, and PYTHON (the models' code raises
 * nothing on such input), is a fair outcome. */
static int g_outcomes[MANYPY_ERR_CANCELLED + 1]; /* by code; 0: the call succeeded */

static void run_mutant(const unsigned char* good, size_t size, unsigned char* buf,
                       const int64_t shape[2], int round) {
  memcpy(buf, good, size);
  int flips = 1 + (int)(next_random() % 4);
  for (int k = 0; k < flips; ++k) {
    buf[next_random() % size] ^= (unsigned char)(1 + next_random() % 255);
  }
  manypy_package* package = NULL;
  manypy_object* object = NULL;
  manypy_value* out = NULL;
  manypy_status* s = manypy_package_load_bytes(g_pool, buf, size, &package);
  if (s == NULL) s = manypy_package_load_pickle(package, "model", "model.pkl", &object);
  if (s == NULL) {
    static const float x[4 * 64];
    manypy_value* items[1] = {F32_TENSOR(x, 2, shape)};
    manypy_value* args = TUPLE_OF(1, items);
    s = manypy_object_call(object, NULL, args, NULL, NULL, &out);
    manypy_value_free(args);
  }
  manypy_code code = manypy_status_code(s);
  if (code >= 0 && code <= MANYPY_ERR_CANCELLED) ++g_outcomes[code];
  if (s != NULL) {
    if (code == MANYPY_ERR_INTERNAL || code == MANYPY_ERR_PYTHON) {
      char path[64];
      snprintf(path, sizeof path, "/tmp/capi_hostile_mutant_%d.pt", round);
      write_file(path, buf, size);
      capi_print_status("mutant", s, __FILE__, __LINE__);
      manypy_status_free(s);
      fail_msg("mutant %d (saved as %s): %s", round, path, manypy_code_name(code));
    }
    manypy_status_free(s);
  }
  manypy_value_free(out);
  manypy_object_free(object);
  manypy_package_free(package);
}

static void test_mutations_through_the_whole_path(void** state) {
  (void)state;
  size_t size = 0;
  unsigned char* good = READ_WHOLE_FILE(ARCHIVE("identity.pt"), &size);
  unsigned char* buf = malloc(size);
  assert_non_null(buf);
  const int64_t identity_shape[2] = {2, 3}, heavy_shape[2] = {4, 64};
  for (int round = 0; round < 3000; ++round) run_mutant(good, size, buf, identity_shape, round);
  for (int code = 0; code <= MANYPY_ERR_CANCELLED; ++code) {
    if (g_outcomes[code])
      print_message("mutants: %d x %s\n", g_outcomes[code], manypy_code_name(code));
  }
  /* Some mutants must load and run, or the test tests little. */
  assert_true(g_outcomes[MANYPY_OK] > 0);
  free(buf);
  free(good);
  /* An archive with weights: most flips land in tensor storages, which
   * load and run with whatever numbers they now hold. */
  good = READ_WHOLE_FILE(ARCHIVE("python_heavy.pt"), &size);
  buf = malloc(size);
  assert_non_null(buf);
  memset(g_outcomes, 0, sizeof g_outcomes);
  for (int round = 0; round < 200; ++round) run_mutant(good, size, buf, heavy_shape, 3000 + round);
  for (int code = 0; code <= MANYPY_ERR_CANCELLED; ++code) {
    if (g_outcomes[code])
      print_message("python_heavy mutants: %d x %s\n", g_outcomes[code], manypy_code_name(code));
  }
  free(buf);
  free(good);
  /* And the pool still serves. */
  assert_int_equal(EVAL_INT64(g_pool, 0, "6 * 7"), 42);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_truncation),
      cmocka_unit_test(test_doctored_records),
      cmocka_unit_test(test_depth_limit),
      cmocka_unit_test(test_tensor_memory_that_is_not_there),
      cmocka_unit_test(test_empty_paths),
      cmocka_unit_test(test_names_that_are_not_utf8),
      cmocka_unit_test(test_flags_out_of_range),
      cmocka_unit_test(test_mutations_through_the_whole_path),
  };
  return cmocka_run_group_tests_name("capi_hostile", tests, setup, teardown);
}
