/*
 * Process exit with live pools (hazard 6 of the isolation notes): the
 * process must exit with code 0 while a 2-interpreter pool that has run
 * torch is still alive.
 *
 *   capi_exit_live_pools return       main returns 0 without destroying the pool
 *   capi_exit_live_pools thread-exit  a non-main pthread calls exit(0)
 *   capi_exit_live_pools async        main returns 0 while asynchronous calls
 *                                     run and wait in both interpreters
 *   capi_exit_live_pools starting     main returns 0 while a serve-early pool
 *                                     starts its other interpreters in the
 *                                     background (import torch in progress:
 *                                     exit must wait for it, not run the
 *                                     namespaces' destructors under it)
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
  /* glibc's _dl_fini runs the namespaces' destructors first, this
   * program's after them. In `starting` mode, staying here keeps the
   * process alive for a start that, without the exit hook, would go on
   * importing torch in a namespace whose libraries were just destroyed: it
   * then crashes in most runs instead of being cut short by _exit. With the
   * hook no start runs by now, and this only delays the exit. */
  if (strcmp(g_mode, "starting") == 0) sleep(2);
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

/* How many copies of libtorch_python are mapped: one per namespace that
 * got as far as loading it (torch._C's import). */
static int torch_python_copies(void) {
  FILE* maps = fopen("/proc/self/maps", "r");
  if (maps == NULL) return -1;
  char line[4096];
  int copies = 0;
  while (fgets(line, sizeof line, maps) != NULL) {
    /* A library's first mapping is the one at file offset 0. */
    char offset[32];
    if (strstr(line, "/libtorch_python.so") != NULL && sscanf(line, "%*s %*s %31s", offset) == 1 &&
        strspn(offset, "0") == strlen(offset)) {
      ++copies;
    }
  }
  fclose(maps);
  return copies;
}

/* A serve-early pool of 3: manypy_pool_create returns once interpreter 0
 * serves; 1 and 2 start in the background, each a new namespace importing
 * torch. main returns as soon as another namespace has loaded
 * libtorch_python, that is in the middle of torch._C's initialization: the
 * exit's destructors then run the very libraries that initialization goes
 * on using (what capi_fuzz_behaviour met at random, as a replacement
 * started). */
static int exit_while_starting(void) {
  manypy_pool_options* options = manypy_pool_options_new();
  if (options == NULL) exit(2);
  manypy_status* s = manypy_pool_options_set_interpreters(options, 3);
  if (s != NULL) fail("set_interpreters", s);
  s = manypy_pool_options_set_serve_early(options, 1);
  if (s != NULL) fail("set_serve_early", s);
  manypy_pool* pool = NULL;
  s = manypy_pool_create(options, &pool);
  manypy_pool_options_free(options);
  if (s != NULL) fail("manypy_pool_create", s);
  const int before = torch_python_copies();
  manypy_pool_stats stats;
  for (;;) {
    memset(&stats, 0, sizeof stats);
    stats.struct_size = sizeof stats;
    s = manypy_pool_get_stats(pool, &stats);
    if (s != NULL) fail("manypy_pool_get_stats", s);
    if (stats.starting == 0 || torch_python_copies() > before) break;
    usleep(200);
  }
  /* Not a timing assertion: it checks that the case under test is the one
   * set up (interpreters 1 and 2 take a torch import each to start). */
  if (stats.starting == 0) {
    fprintf(stderr, "capi_exit_live_pools[starting]: no interpreter was starting at exit\n");
    exit(2);
  }
  printf("capi_exit_live_pools[starting]: reached exit with %zu interpreter(s) starting\n",
         stats.starting);
  fflush(stdout);
  return 0; /* the pool is deliberately left alive, and starting */
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
                    strcmp(argv[1], "async") != 0 && strcmp(argv[1], "starting") != 0)) {
    fprintf(stderr, "usage: %s return|thread-exit|async|starting\n", argv[0]);
    return 2;
  }
  g_mode = argv[1];
  if (strcmp(g_mode, "starting") == 0) return exit_while_starting();
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
