/*
 * Trusted archives and the process-exit guard. runs_code.pt's pickle writes
 * the file $MANYPY_MARKER names when it is unpickled: a pool that does not
 * trust it refuses it and the marker never appears; a pool with no
 * allow-list runs it (what the allow-list is for). Code calling os._exit
 * raises instead of ending the host; a pool that allows it (in a child
 * process) does end with the status.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capi_test_support.h"

static char g_marker[64];
static const char* g_self;

static int marker_exists(void) { return access(g_marker, F_OK) == 0; }

static manypy_pool* pool_with(manypy_pool_options* options) {
  manypy_pool* pool = NULL;
  ASSERT_OK(manypy_pool_create(options, &pool));
  manypy_pool_options_free(options);
  return pool;
}

/* Code the host runs (manypy_pool_exec, _eval) stays in the interpreter as
 * an archive's does: in a pool that checks nothing it counts as an
 * unchecked archive, so a pool with an allow-list never gets that
 * interpreter; in a pool that checks, it is the host's own under that
 * pool's policy, and the interpreter serves the next such pool. First in
 * the suite, so that the process has no other interpreter. */
static void test_host_code_counts_as_its_pools(void** state) {
  (void)state;
  manypy_pool* open_pool = pool_with(manypy_pool_options_new());
  ASSERT_OK(manypy_pool_exec(open_pool, 0, "import torch\ntorch.open_pool_was_here = 1"));
  manypy_pool_destroy(open_pool); /* its interpreter is idle, and marked */
  char identity_digest[65];
  SHA256_HEX(ARCHIVE("identity.pt"), identity_digest);
  for (int k = 0; k < 2; ++k) {
    manypy_pool_options* options = manypy_pool_options_new();
    ASSERT_OK(manypy_pool_options_add_trusted_sha256(options, identity_digest));
    manypy_pool* narrow = pool_with(options);
    assert_false(EVAL_BOOL(narrow, 0, "hasattr(__import__('torch'), 'open_pool_was_here')"));
    /* The second narrow pool gets the first one's interpreter back. */
    assert_int_equal(EVAL_BOOL(narrow, 0, "hasattr(__import__('torch'), 'narrow_pool_was_here')"),
                     k == 1);
    ASSERT_OK(manypy_pool_exec(narrow, 0, "import torch\ntorch.narrow_pool_was_here = 1"));
    manypy_pool_destroy(narrow);
  }
}

static void test_allow_list_refuses_before_anything_runs(void** state) {
  (void)state;
  char identity_digest[65], runs_code_digest[65];
  SHA256_HEX(ARCHIVE("identity.pt"), identity_digest);
  SHA256_HEX(ARCHIVE("malformed/runs_code.pt"), runs_code_digest);
  manypy_pool_options* options = manypy_pool_options_new();
  ASSERT_OK(manypy_pool_options_add_trusted_sha256(options, identity_digest));
  manypy_pool* pool = pool_with(options);

  manypy_package* package = NULL;
  manypy_status* s =
      EXPECT_CODE(manypy_package_load_file(pool, ARCHIVE("malformed/runs_code.pt"), &package),
                  MANYPY_ERR_UNTRUSTED_ARCHIVE);
  ASSERT_CONTAINS(manypy_status_message(s), runs_code_digest);
  manypy_status_free(s);
  size_t size = 0;
  void* bytes = READ_WHOLE_FILE(ARCHIVE("malformed/runs_code.pt"), &size);
  ASSERT_CODE(manypy_package_load_bytes(pool, bytes, size, &package), MANYPY_ERR_UNTRUSTED_ARCHIVE);
  free(bytes);
  assert_null(package);
  assert_false(marker_exists());
  /* Reading its records runs nothing, trusted or not. */
  manypy_value* files = NULL;
  ASSERT_OK(manypy_archive_list_files(ARCHIVE("malformed/runs_code.pt"), &files));
  manypy_value_free(files);

  /* The trusted one loads and serves. */
  package = LOAD_PACKAGE(pool, "identity.pt");
  manypy_object* identity = LOAD_MODEL(package);
  manypy_object_free(identity);
  manypy_package_free(package);
  manypy_pool_destroy(pool);
  assert_false(marker_exists());
}

static int verify(const uint8_t* sha256, const char* origin, void* user_data) {
  (void)sha256;
  ++*(int*)user_data;
  return strstr(origin, "identity.pt") != NULL;
}

static int g_verifier_data_freed;
static void free_verifier_data(void* p) {
  (void)p;
  ++g_verifier_data_freed;
}

static void test_verifier(void** state) {
  (void)state;
  static int asked = 0;
  g_verifier_data_freed = 0;
  manypy_pool_options* options = manypy_pool_options_new();
  ASSERT_OK(manypy_pool_options_set_archive_verifier(options, verify, &asked, free_verifier_data));
  manypy_pool* pool = pool_with(options); /* the pool still holds the verifier */
  assert_int_equal(g_verifier_data_freed, 0);
  /* Creating the pool may have asked about archives an interpreter it
   * reuses ran before (identity.pt, in the test above). */
  asked = 0;
  manypy_package* package = NULL;
  ASSERT_CODE(manypy_package_load_file(pool, ARCHIVE("malformed/runs_code.pt"), &package),
              MANYPY_ERR_UNTRUSTED_ARCHIVE);
  ASSERT_OK(manypy_package_load_file(pool, ARCHIVE("identity.pt"), &package));
  assert_int_equal(asked, 2);
  manypy_package_free(package);
  manypy_pool_destroy(pool);
  assert_int_equal(g_verifier_data_freed, 1);
  assert_false(marker_exists());
}

static void test_bad_arguments(void** state) {
  (void)state;
  manypy_pool_options* options = manypy_pool_options_new();
  ASSERT_INVALID_ARG(manypy_pool_options_add_trusted_sha256(options, "abc"),
                     "manypy_pool_options_add_trusted_sha256", "hex_digest");
  char not_hex[65];
  memset(not_hex, 'g', 64);
  not_hex[64] = '\0';
  ASSERT_INVALID_ARG(manypy_pool_options_add_trusted_sha256(options, not_hex),
                     "manypy_pool_options_add_trusted_sha256", "hex_digest");
  ASSERT_INVALID_ARG(manypy_pool_options_set_allow_process_exit(options, 2),
                     "manypy_pool_options_set_allow_process_exit", "allow");
  g_verifier_data_freed = 0;
  ASSERT_INVALID_ARG(
      manypy_pool_options_set_archive_verifier(NULL, verify, NULL, free_verifier_data),
      "manypy_pool_options_set_archive_verifier", "options");
  assert_int_equal(g_verifier_data_freed, 1); /* freed even on failure */
  ASSERT_OK(manypy_pool_options_set_archive_verifier(options, verify, NULL, free_verifier_data));
  ASSERT_OK(manypy_pool_options_set_archive_verifier(options, NULL, NULL, NULL));
  assert_int_equal(g_verifier_data_freed, 2); /* replaced: the old one freed */
  manypy_pool_options_free(options);
}

/* Without an allow-list the pickle runs: what the allow-list protects. */
static void test_without_allow_list_the_pickle_runs(void** state) {
  (void)state;
  manypy_pool* pool = pool_with(manypy_pool_options_new());
  manypy_package* package = LOAD_PACKAGE(pool, "malformed/runs_code.pt");
  manypy_object* object = NULL;
  manypy_status* s = manypy_package_load_pickle(package, "model", "model.pkl", &object);
  manypy_status_free(s); /* exec returns None: an object or not, the code ran */
  manypy_object_free(object);
  assert_true(marker_exists());
  unlink(g_marker);
  manypy_package_free(package);
  manypy_pool_destroy(pool);
}

static void test_os_exit_raises(void** state) {
  (void)state;
  manypy_pool* pool = pool_with(manypy_pool_options_new());
  manypy_status* s =
      EXPECT_CODE(manypy_pool_exec(pool, 0, "import os\nos._exit(3)"), MANYPY_ERR_PYTHON);
  assert_string_equal(manypy_status_python_type(s), "manypy.ProcessExitRefused");
  ASSERT_CONTAINS(manypy_status_message(s), "os._exit(3) would end the host process");
  manypy_status_free(s);
  s = EXPECT_CODE(manypy_pool_exec(pool, 0, "import posix\nposix.abort()"), MANYPY_ERR_PYTHON);
  manypy_status_free(s);
  assert_int_equal(EVAL_INT64(pool, 0, "6 * 7"), 42);
  manypy_pool_destroy(pool);
}

/* In a child: a pool that allows process exit ends with os._exit's status. */
static int child_exit(void) {
  manypy_pool_options* options = manypy_pool_options_new();
  manypy_status* s = manypy_pool_options_set_allow_process_exit(options, 1);
  manypy_pool* pool = NULL;
  if (s == NULL) s = manypy_pool_create(options, &pool);
  if (s == NULL) s = manypy_pool_exec(pool, 0, "import os\nos._exit(3)");
  fprintf(stderr, "child: still running: %s\n", manypy_status_message(s));
  return 1;
}

static void test_allowed_os_exit_ends_the_process(void** state) {
  (void)state;
  char command[4200];
  snprintf(command, sizeof command, "'%s' --child-exit", g_self);
  int status = system(command);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 3);
}

/* TorchScript loaded on the host: TorchScript's frontend compiles an
 * archive's code as it loads, so a trust is checked before libtorch reads
 * anything. One manypy_archive_trust serves host loads and pools. */
static void test_trust_covers_torchscript_on_the_host(void** state) {
  (void)state;
  char invert_digest[65], loop_digest[65], identity_digest[65];
  SHA256_HEX(ARCHIVE("invert_script.pt"), invert_digest);
  SHA256_HEX(ARCHIVE("loop_script.pt"), loop_digest);
  SHA256_HEX(ARCHIVE("identity.pt"), identity_digest);
  manypy_archive_trust* trust = manypy_archive_trust_new();
  assert_non_null(trust);
  ASSERT_OK(manypy_archive_trust_add_sha256(trust, invert_digest));
  ASSERT_OK(manypy_archive_trust_add_sha256(trust, identity_digest));

  manypy_script_module* module = NULL;
  manypy_status* s =
      EXPECT_CODE(manypy_script_load_file_trusted(ARCHIVE("loop_script.pt"), trust, &module),
                  MANYPY_ERR_UNTRUSTED_ARCHIVE);
  ASSERT_CONTAINS(manypy_status_message(s), loop_digest);
  manypy_status_free(s);
  size_t size = 0;
  void* bytes = READ_WHOLE_FILE(ARCHIVE("loop_script.pt"), &size);
  ASSERT_CODE(manypy_script_load_bytes_trusted(bytes, size, trust, &module),
              MANYPY_ERR_UNTRUSTED_ARCHIVE);
  assert_null(module);
  ASSERT_OK(manypy_script_load_bytes_trusted(bytes, size, NULL, &module)); /* no trust: no check */
  manypy_script_free(module);
  module = NULL;
  free(bytes);
  ASSERT_OK(manypy_script_load_file_trusted(ARCHIVE("invert_script.pt"), trust, &module));
  manypy_script_free(module);

  /* A verifier, on the trust, is asked about what is not listed. */
  static int asked = 0;
  ASSERT_OK(manypy_archive_trust_set_verifier(trust, verify, &asked, NULL));
  ASSERT_CODE(manypy_script_load_file_trusted(ARCHIVE("loop_script.pt"), trust, &module),
              MANYPY_ERR_UNTRUSTED_ARCHIVE);
  assert_int_equal(asked, 1);
  ASSERT_OK(manypy_archive_trust_set_verifier(trust, NULL, NULL, NULL));

  /* The same trust, given to a pool. */
  manypy_pool_options* options = manypy_pool_options_new();
  ASSERT_OK(manypy_pool_options_set_archive_trust(options, trust));
  manypy_archive_trust_free(trust); /* the options hold a copy */
  manypy_pool* pool = pool_with(options);
  manypy_package* package = NULL;
  ASSERT_CODE(manypy_package_load_file(pool, ARCHIVE("malformed/runs_code.pt"), &package),
              MANYPY_ERR_UNTRUSTED_ARCHIVE);
  package = LOAD_PACKAGE(pool, "identity.pt");
  manypy_package_free(package);
  manypy_pool_destroy(pool);
  assert_false(marker_exists());

  ASSERT_INVALID_ARG(manypy_archive_trust_add_sha256(NULL, invert_digest),
                     "manypy_archive_trust_add_sha256", "trust");
  g_verifier_data_freed = 0;
  ASSERT_INVALID_ARG(manypy_archive_trust_set_verifier(NULL, verify, NULL, free_verifier_data),
                     "manypy_archive_trust_set_verifier", "trust");
  assert_int_equal(g_verifier_data_freed, 1);
  ASSERT_INVALID_ARG(manypy_script_load_file_trusted(NULL, NULL, &module),
                     "manypy_script_load_file_trusted", "path");
  manypy_archive_trust_free(NULL);
}

/* Code from an archive that a pool without an allow-list ran, here a patch
 * of a torch class and of a stdlib function (installed modules, which
 * interpreters keep from one pool to the next), never runs in a pool that
 * trusts only another archive: that pool gets other interpreters. One that
 * trusts nothing may take the patched one. Last: it patches an
 * interpreter of this process for good. */
static void test_code_of_an_open_pool_never_serves_a_narrower_one(void** state) {
  (void)state;
  char patched[96];
  snprintf(patched, sizeof patched, "%s.patched", g_marker);
  unlink(patched);
  manypy_pool* open_pool = pool_with(manypy_pool_options_new());
  manypy_package* hostile = LOAD_PACKAGE(open_pool, "hostile.pt");
  manypy_object* model = LOAD_MODEL(hostile);
  manypy_value* items[1] = {STRING(patched)};
  manypy_value* args = TUPLE_OF(1, items);
  manypy_value* out = NULL;
  ASSERT_OK(manypy_object_call(model, "patch_installed", args, NULL, NULL, &out));
  manypy_value_free(out);
  manypy_value_free(args);
  const char* is_patched =
      "__import__('torch').nn.Module.__call__.__name__ == 'patched_call' "
      "and __import__('os').path.join.__name__ == 'patched_join'";
  assert_true(EVAL_BOOL(open_pool, 0, is_patched));
  manypy_object_free(model);
  manypy_package_free(hostile);
  manypy_pool_destroy(open_pool); /* its interpreter is idle again, and patched */
  unlink(patched);                /* giving it back ran os.path.join there */

  char identity_digest[65];
  SHA256_HEX(ARCHIVE("identity.pt"), identity_digest);
  manypy_pool_options* options = manypy_pool_options_new();
  ASSERT_OK(manypy_pool_options_add_trusted_sha256(options, identity_digest));
  ASSERT_OK(manypy_pool_options_set_interpreters(options, 2));
  manypy_pool* narrow = pool_with(options);
  for (int32_t i = 0; i < 2; ++i) assert_false(EVAL_BOOL(narrow, i, is_patched));
  manypy_package* package = LOAD_PACKAGE(narrow, "identity.pt");
  manypy_object* identity = LOAD_MODEL(package);
  for (int32_t i = 0; i < 2; ++i) {
    float x[2] = {1, 2};
    int64_t shape[1] = {2};
    manypy_value* xs[1] = {F32_TENSOR(x, 1, shape)};
    manypy_value* call_args = TUPLE_OF(1, xs);
    manypy_call_options* on = CALL_OPTIONS(i, 0);
    ASSERT_OK(manypy_object_call(identity, NULL, call_args, NULL, on, &out));
    manypy_value_free(out);
    manypy_call_options_free(on);
    manypy_value_free(call_args);
  }
  assert_int_equal(access(patched, F_OK), -1); /* no patched code ran */
  manypy_object_free(identity);
  manypy_package_free(package);
  manypy_pool_destroy(narrow);

  /* A pool that checks nothing may be served by the patched interpreter:
   * of 3 idle interpreters, it takes the first idle ones, which include it. */
  options = manypy_pool_options_new();
  ASSERT_OK(manypy_pool_options_set_interpreters(options, 3));
  manypy_pool* any = pool_with(options);
  int patched_ones = 0;
  for (int32_t i = 0; i < 3; ++i) patched_ones += EVAL_BOOL(any, i, is_patched);
  assert_int_equal(patched_ones, 1);
  manypy_pool_destroy(any);
  unlink(patched);
}

int main(int argc, char** argv) {
  g_self = argv[0];
  if (argc == 2 && strcmp(argv[1], "--child-exit") == 0) return child_exit();
  snprintf(g_marker, sizeof g_marker, "/tmp/capi_trust_marker_%d", (int)getpid());
  unlink(g_marker);
  setenv("MANYPY_MARKER", g_marker, 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_host_code_counts_as_its_pools),
      cmocka_unit_test(test_allow_list_refuses_before_anything_runs),
      cmocka_unit_test(test_verifier),
      cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_without_allow_list_the_pickle_runs),
      cmocka_unit_test(test_os_exit_raises),
      cmocka_unit_test(test_allowed_os_exit_ends_the_process),
      cmocka_unit_test(test_trust_covers_torchscript_on_the_host),
      cmocka_unit_test(test_code_of_an_open_pool_never_serves_a_narrower_one),
  };
  int failed = cmocka_run_group_tests_name("capi_trust", tests, NULL, NULL);
  unlink(g_marker);
  return failed;
}
