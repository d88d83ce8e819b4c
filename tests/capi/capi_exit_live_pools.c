/*
 * Process exit with live pools (hazard 6 of the isolation notes): the
 * process must exit with code 0 while a 2-interpreter pool that has run
 * torch is still alive.
 *
 *   capi_exit_live_pools return       main returns 0 without destroying the pool
 *   capi_exit_live_pools thread-exit  a non-main pthread calls exit(0)
 *   capi_exit_live_pools async        main returns 0 while asynchronous calls
 *                                     run and wait in both interpreters
 *
 * Not a cmocka program: cmocka's runner would own the exit path under test.
 * run_exit_live_pools.sh checks the exit code and the marker lines:
 *   "capi_exit_live_pools[<mode>]: reached exit"   printed just before exit
 *   "capi_exit_live_pools: destructors ran"         from this program's ELF
 *                                                   destructor, during exit()
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "manypy.h"

static const char* g_mode = "?";

static void fail(const char* what, manypy_status* status) {
  fprintf(stderr, "capi_exit_live_pools[%s]: %s failed: %s: %s\n%s\n", g_mode, what,
          manypy_code_name(manypy_status_code(status)), manypy_status_message(status),
          manypy_status_traceback(status));
  manypy_status_free(status);
  exit(2);
}

static double eval_double(manypy_pool* pool, int32_t i, const char* expr) {
  manypy_value* value = NULL;
  manypy_status* s = manypy_pool_eval(pool, i, expr, &value);
  if (s != NULL) fail(expr, s);
  double out = 0;
  s = manypy_value_get_double(value, &out);
  manypy_value_free(value);
  if (s != NULL) fail(expr, s);
  return out;
}

__attribute__((destructor)) static void at_destruction(void) {
  static const char line[] = "capi_exit_live_pools: destructors ran\n";
  ssize_t ignored = write(STDOUT_FILENO, line, sizeof line - 1);
  (void)ignored;
}

static manypy_pool* make_live_pool(void) {
  manypy_pool_options* options = manypy_pool_options_new();
  if (options == NULL) exit(2);
  manypy_status* s = manypy_pool_options_set_interpreters(options, 2);
  if (s != NULL) fail("set_interpreters", s);
  manypy_pool* pool = NULL;
  s = manypy_pool_create(options, &pool);
  manypy_pool_options_free(options);
  if (s != NULL) fail("manypy_pool_create", s);
  s = manypy_pool_exec_all(pool,
                           "import torch\n"
                           "live_tensor = torch.ones(3) * 2\n");
  if (s != NULL) fail("exec_all", s);
  for (int32_t i = 0; i < 2; ++i) {
    double sum = eval_double(pool, i, "live_tensor.sum().item()");
    if (sum != 6.0) {
      fprintf(stderr, "capi_exit_live_pools[%s]: interpreter %d: sum %g, expected 6\n", g_mode,
              (int)i, sum);
      exit(2);
    }
  }
  return pool;
}

static void* exiting_thread(void* arg) {
  manypy_pool* pool = arg;
  /* This thread enters both interpreters too before it exits the process. */
  for (int32_t i = 0; i < 2; ++i) {
    if (eval_double(pool, i, "float(live_tensor.mul(3).sum().item())") != 18.0) {
      fprintf(stderr, "capi_exit_live_pools[thread-exit]: wrong result on the exiting thread\n");
      exit(2);
    }
  }
  printf("capi_exit_live_pools[thread-exit]: reached exit\n");
  fflush(stdout);
  exit(0);
}

static void ignore_outcome(void* user_data, manypy_value* result, manypy_status* status) {
  (void)user_data;
  manypy_value_free(result);
  manypy_status_free(status);
}

/* Queues 200 calls of stuck.pt's sleep(0.05) (10 s of work): the process
 * exits while one runs in each interpreter and the rest wait. */
static void queue_async_calls(manypy_pool* pool) {
  manypy_package* package = NULL;
  manypy_status* s = manypy_package_load_file(pool, MANYPY_ARCHIVES_DIR "/stuck.pt", &package);
  if (s != NULL) fail("stuck.pt", s);
  manypy_object* stuck = NULL;
  s = manypy_package_load_pickle(package, "model", "model.pkl", &stuck);
  if (s != NULL) fail("load_pickle", s);
  manypy_value* args = manypy_value_new_tuple();
  s = manypy_value_append(args, manypy_value_new_double(0.05));
  if (s != NULL) fail("append", s);
  for (int k = 0; k < 200; ++k) {
    s = manypy_object_call_async(stuck, "sleep", args, NULL, NULL, ignore_outcome, NULL);
    if (s != NULL) fail("manypy_object_call_async", s);
  }
  manypy_value_free(args);
  usleep(100 * 1000); /* both interpreters are inside a call */
  if (manypy_pool_in_flight(pool) < 150) {
    fprintf(stderr, "capi_exit_live_pools[async]: only %zu calls in flight\n",
            manypy_pool_in_flight(pool));
    exit(2);
  }
}

int main(int argc, char** argv) {
  if (argc != 2 || (strcmp(argv[1], "return") != 0 && strcmp(argv[1], "thread-exit") != 0 &&
                    strcmp(argv[1], "async") != 0)) {
    fprintf(stderr, "usage: %s return|thread-exit|async\n", argv[0]);
    return 2;
  }
  g_mode = argv[1];
  manypy_pool* pool = make_live_pool();
  if (strcmp(g_mode, "async") == 0) {
    queue_async_calls(pool);
    printf("capi_exit_live_pools[async]: reached exit\n");
    fflush(stdout);
    return 0; /* the calls are deliberately left running and queued */
  }
  if (strcmp(g_mode, "return") == 0) {
    printf("capi_exit_live_pools[return]: reached exit\n");
    fflush(stdout);
    return 0; /* the pool is deliberately left alive */
  }
  pthread_t thread;
  if (pthread_create(&thread, NULL, exiting_thread, pool) != 0) {
    fprintf(stderr, "pthread_create failed\n");
    return 2;
  }
  pthread_join(thread, NULL); /* never returns: the thread exits the process */
  fprintf(stderr, "capi_exit_live_pools[thread-exit]: the exiting thread returned\n");
  return 3;
}
