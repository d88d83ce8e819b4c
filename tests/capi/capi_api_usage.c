/* API usage logging: each distinct key reaches the handler exactly once per
 * process, from torch in every interpreter, the host's libtorch, manypy's
 * entry points, the caller and model code. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "capi_test_support.h"

#define MAX_KEYS 256

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static char* g_keys[MAX_KEYS];
static int g_counts[MAX_KEYS];
static int g_nkeys;
static int g_freed;

static void on_key(const char* key, void* user_data) {
  assert_ptr_equal(user_data, &g_keys);
  pthread_mutex_lock(&g_mu);
  int k = 0;
  while (k < g_nkeys && strcmp(g_keys[k], key) != 0) ++k;
  if (k == g_nkeys && g_nkeys < MAX_KEYS) g_keys[g_nkeys++] = strdup(key);
  if (k < MAX_KEYS) g_counts[k]++;
  pthread_mutex_unlock(&g_mu);
}

static void on_free(void* user_data) {
  assert_ptr_equal(user_data, &g_keys);
  g_freed++;
}

static int count_of(const char* key) {
  pthread_mutex_lock(&g_mu);
  int n = 0;
  for (int k = 0; k < g_nkeys; ++k) {
    if (strcmp(g_keys[k], key) == 0) n = g_counts[k];
  }
  pthread_mutex_unlock(&g_mu);
  return n;
}

static void test_each_key_once_across_four_interpreters(void** state) {
  (void)state;
  /* Before any pool: the handler sees later keys as they come. */
  ASSERT_OK(manypy_set_api_usage_handler(on_key, &g_keys, on_free));
  manypy_pool* pool = MAKE_POOL(4, MANYPY_THREAD_MODE_DIRECT);
  /* Every interpreter imported torch, which logs torch.python.import: once. */
  assert_int_equal(count_of("torch.python.import"), 1);
  assert_int_equal(count_of("manypy.pool.create"), 1);

  /* Model code in every interpreter, twice each. */
  for (int32_t i = 0; i < 4; ++i) {
    ASSERT_OK(manypy_pool_exec(pool, i,
                               "import torch\n"
                               "torch._C._log_api_usage_once('model.custom.key')\n"
                               "torch._C._log_api_usage_once('model.custom.key')\n"));
  }
  assert_int_equal(count_of("model.custom.key"), 1);

  /* The caller's own keys. */
  ASSERT_OK(manypy_log_api_usage("app.request.served"));
  ASSERT_OK(manypy_log_api_usage("app.request.served"));
  assert_int_equal(count_of("app.request.served"), 1);
  manypy_status* s = EXPECT_CODE(manypy_log_api_usage(""), MANYPY_ERR_INVALID_ARGUMENT);
  manypy_status_free(s);
  s = EXPECT_CODE(manypy_log_api_usage(NULL), MANYPY_ERR_INVALID_ARGUMENT);
  manypy_status_free(s);

  /* Packages, objects and the host's TorchScript. */
  manypy_package* package = LOAD_PACKAGE(pool, "identity.pt");
  manypy_object* object = LOAD_MODEL(package);
  manypy_package* again = LOAD_PACKAGE(pool, "identity.pt");
  assert_int_equal(count_of("manypy.package.load"), 1);
  assert_int_equal(count_of("manypy.object.load"), 1);
  manypy_script_module* script = NULL;
  ASSERT_OK(manypy_script_load_file(ARCHIVE("python_heavy_script.pt"), &script));
  manypy_script_free(script);
  ASSERT_OK(manypy_script_load_file(ARCHIVE("python_heavy_script.pt"), &script));
  assert_int_equal(count_of("manypy.script.load"), 1);
  /* The host libtorch's own key: torch 1.13 logs torch.script.load, torch
   * 2.x torch.jit.load; one of them, once. */
  assert_int_equal(count_of("torch.script.load") + count_of("torch.jit.load"), 1);

  /* Every key so far came exactly once. */
  for (int k = 0; k < g_nkeys; ++k) {
    if (g_counts[k] != 1) fail_msg("key %s reached the handler %d times", g_keys[k], g_counts[k]);
  }
  manypy_script_free(script);
  manypy_object_free(object);
  manypy_package_free(again);
  manypy_package_free(package);
  manypy_pool_destroy(pool);

  /* A handler installed late is replayed every key seen, once; the old
   * one's user data is freed exactly once. */
  int seen_before = g_nkeys;
  pthread_mutex_lock(&g_mu);
  memset(g_counts, 0, sizeof g_counts);
  pthread_mutex_unlock(&g_mu);
  ASSERT_OK(manypy_set_api_usage_handler(on_key, &g_keys, on_free));
  assert_int_equal(g_freed, 1);
  assert_int_equal(g_nkeys, seen_before);
  for (int k = 0; k < g_nkeys; ++k) assert_int_equal(g_counts[k], 1);
  ASSERT_OK(manypy_set_api_usage_handler(NULL, NULL, NULL));
  assert_int_equal(g_freed, 2);
  ASSERT_OK(manypy_log_api_usage("after.removal"));
  assert_int_equal(count_of("after.removal"), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_each_key_once_across_four_interpreters),
  };
  return cmocka_run_group_tests_name("capi_api_usage", tests, NULL, NULL);
}
