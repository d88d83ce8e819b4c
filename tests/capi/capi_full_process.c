/*
 * A process full of interpreters: a pool of manypy_max_interpreters(), the
 * 15 that glibc's link-map namespaces allow, on every torch (torch 2.x used
 * to stop at 7, for want of pthread keys; docs/isolation.md, hazard 3).
 *
 * - Every namespace keeps its pthread keys to itself: no library there used
 *   its libc's own key table, and the host keeps its keys.
 * - Every kind of sample model serves on every interpreter, every output
 *   checked: python_heavy, ResNet-18 and the transformer encoder with a bool
 *   padding mask.
 * - Threads that model code starts, which start threads, on stacks that
 *   earlier threads used (hazard 11), in every interpreter.
 * - Keys made and deleted in every namespace, by threads that come and go,
 *   while host threads that also come and go make calls: no value is ever
 *   seen under the wrong key, and every result is right.
 *
 * Runs with GLIBC_TUNABLES as scripts/env.sh sets it (15 interpreters need
 * more optional static TLS than glibc's default; hazard 4).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi_test_support.h"

#define FULL 15 /* glibc's DL_NNS - 1 */
#define HOST_THREADS 2
#define HOST_THREAD_GENERATIONS 12

static manypy_pool* g_pool;
static capi_heavy_case g_heavy_case;
static manypy_package* g_heavy_package;
static manypy_object* g_heavy;
static manypy_value* g_heavy_args;
static manypy_value* g_heavy_kwargs;
static manypy_value* g_reference[FULL]; /* python_heavy's result on each interpreter */
static int64_t g_keys_held[FULL];       /* keys in use in each namespace, at first */

/* Calls `object` with `args` on every interpreter and checks the float32
 * result against `expected`; returns the largest difference seen. */
static double check_on_every_interpreter(manypy_object* object, const manypy_value* args,
                                         const char* model, int32_t ndim, const int64_t* shape,
                                         const float* expected, double rtol) {
  double worst = 0;
  for (int32_t i = 0; i < FULL; ++i) {
    manypy_call_options* options = CALL_OPTIONS(i, 0);
    manypy_value* result = NULL;
    ASSERT_OK(manypy_object_call(object, NULL, args, NULL, options, &result));
    manypy_call_options_free(options);
    char what[64];
    snprintf(what, sizeof what, "%s on interpreter %d", model, (int)i);
    double e = ASSERT_F32_TENSOR(result, ndim, shape, expected, rtol, what);
    if (e > worst) worst = e;
    manypy_value_free(result);
  }
  return worst;
}

static int setup(void** state) {
  (void)state;
  if (manypy_max_interpreters() != FULL) {
    fprintf(stderr, "manypy_max_interpreters() = %zu, expected %d on every torch\n",
            manypy_max_interpreters(), FULL);
    return -1;
  }
  double t0 = capi_now();
  if (capi_create_pool(FULL, &g_pool) != NULL) {
    fprintf(stderr, "a pool of %d interpreters could not start\n", FULL);
    return -1;
  }
  fprintf(stderr, "  pool of %d: %.1f s\n", FULL, capi_now() - t0);
  return 0;
}

static int teardown(void** state) {
  (void)state;
  for (int i = 0; i < FULL; ++i) manypy_value_free(g_reference[i]);
  manypy_value_free(g_heavy_args);
  manypy_value_free(g_heavy_kwargs);
  manypy_object_free(g_heavy);
  manypy_package_free(g_heavy_package);
  capi_heavy_case_free(&g_heavy_case);
  manypy_pool_destroy(g_pool);
  return 0;
}

/* ---- keys ----------------------------------------------------------------------------- */

/* Python that makes one key through CPython's PyThread_tss API, whose
 * pthread_key_create is the one every library in the namespace binds to,
 * and returns its number: the lowest free key, so the keys held. */
static const char kKeysHeld[] =
    "import ctypes\n"
    "# This interpreter's own libpython, not the host program's symbols.\n"
    "_api = ctypes.pythonapi\n"
    "_api.PyThread_tss_alloc.restype = ctypes.c_void_p\n"
    "for _f in ('create', 'delete', 'free'):\n"
    "    getattr(_api, 'PyThread_tss_' + _f).argtypes = [ctypes.c_void_p]\n"
    "_api.PyThread_tss_get.argtypes = [ctypes.c_void_p]\n"
    "_api.PyThread_tss_get.restype = ctypes.c_void_p\n"
    "_api.PyThread_tss_set.argtypes = [ctypes.c_void_p, ctypes.c_void_p]\n"
    "def tss_new():\n"
    "    t = _api.PyThread_tss_alloc()\n"
    "    if not t or _api.PyThread_tss_create(t) != 0:\n"
    "        raise RuntimeError('PyThread_tss_create failed')\n"
    "    return t\n"
    "def tss_key(t):\n"
    "    return ctypes.c_uint.from_address(t + 4).value  # Py_tss_t._key\n"
    "def tss_drop(t):\n"
    "    _api.PyThread_tss_delete(t)\n"
    "    _api.PyThread_tss_free(t)\n"
    "def keys_held():\n"
    "    t = tss_new()\n"
    "    try:\n"
    "        return tss_key(t)\n"
    "    finally:\n"
    "        tss_drop(t)\n"
    "def libc_table_first_key():\n"
    "    libc = ctypes.CDLL('libc.so.6')  # this namespace's own libc\n"
    "    key = ctypes.c_uint()\n"
    "    if libc.pthread_key_create(ctypes.byref(key), None) != 0:\n"
    "        return -1\n"
    "    libc.pthread_key_delete(key)\n"
    "    return key.value\n";

static void test_every_namespace_keeps_its_keys(void** state) {
  (void)state;
  ASSERT_OK(manypy_pool_exec_all(g_pool, kKeysHeld));
  int64_t* held = g_keys_held;
  for (int32_t i = 0; i < FULL; ++i) {
    /* No library in the namespace made a key in its libc's own table: they
     * all went to the interpreter library's key space. */
    assert_int_equal(EVAL_INT64(g_pool, i, "libc_table_first_key()"), 0);
    held[i] = EVAL_INT64(g_pool, i, "keys_held()");
    /* torch and Python hold some; each namespace numbers its own from 0. */
    assert_true(held[i] >= 8 && held[i] < 1024);
  }
  fprintf(stderr, "  keys held in interpreter 0 (Python, torch): %lld; in 14: %lld\n",
          (long long)held[0], (long long)held[FULL - 1]);
  /* The host's keys are its own: none of its 1024 is claimed for
   * interpreters, so a new one is a low number. */
  pthread_key_t host_key;
  assert_int_equal(pthread_key_create(&host_key, NULL), 0);
  fprintf(stderr, "  the host's next key: %u\n", host_key);
  assert_true(host_key < 128);
  assert_int_equal(pthread_setspecific(host_key, (void*)0x5eed), 0);
  for (int32_t i = 0; i < FULL; ++i)
    assert_int_equal(EVAL_INT64(g_pool, i, "keys_held()"), held[i]);
  assert_ptr_equal(pthread_getspecific(host_key), (void*)0x5eed);
  assert_int_equal(pthread_key_delete(host_key), 0);
}

/* ---- every kind of model on every interpreter ------------------------------------------- */

static void test_python_heavy_everywhere(void** state) {
  (void)state;
  g_heavy_case = HEAVY_CASE_LOAD();
  g_heavy_package = LOAD_PACKAGE(g_pool, "python_heavy.pt");
  g_heavy = LOAD_MODEL(g_heavy_package);
  g_heavy_args = HEAVY_ARGS(&g_heavy_case);
  g_heavy_kwargs = capi_heavy_kwargs();
  for (int32_t i = 0; i < FULL; ++i) {
    manypy_call_options* options = CALL_OPTIONS(i, 0);
    ASSERT_OK(
        manypy_object_call(g_heavy, NULL, g_heavy_args, g_heavy_kwargs, options, &g_reference[i]));
    manypy_call_options_free(options);
    char what[64];
    snprintf(what, sizeof what, "python_heavy on interpreter %d", (int)i);
    CHECK_HEAVY_RESULT(&g_heavy_case, g_reference[i], what);
  }
}

static void test_resnet18_everywhere(void** state) {
  (void)state;
  static const int64_t input_shape[4] = {1, 3, 224, 224}, out_shape[2] = {1, 1000};
  float* input = READ_F32("resnet18.input.bin", 3 * 224 * 224);
  float* expected = READ_F32("resnet18.expected.out.bin", 1000);
  manypy_package* package = LOAD_PACKAGE(g_pool, "resnet18.pt");
  manypy_object* resnet = LOAD_MODEL(package);
  manypy_value* items[1] = {F32_TENSOR(input, 4, input_shape)};
  manypy_value* args = LIST_OF(1, items);
  double worst = check_on_every_interpreter(resnet, args, "resnet18", 2, out_shape, expected, 1e-4);
  fprintf(stderr, "  resnet18 on %d interpreters: max |diff| %.3g\n", FULL, worst);
  manypy_value_free(args);
  manypy_object_free(resnet);
  manypy_package_free(package);
  free(input);
  free(expected);
}

static void test_encoder_everywhere(void** state) {
  (void)state;
  static const DLDataType kBool = {MANYPY_DL_BOOL, 8, 1};
  static const int64_t src_shape[3] = {3, 7, 32}, mask_shape[2] = {3, 7};
  float* src = READ_F32("encoder.src.bin", 3 * 7 * 32);
  float* expected = READ_F32("encoder.expected.out.bin", 3 * 7 * 32);
  size_t mask_size = 0;
  unsigned char* mask = READ_WHOLE_FILE(ARCHIVE("encoder.mask.bin"), &mask_size);
  assert_int_equal(mask_size, 21);
  manypy_value* mask_value = NULL;
  ASSERT_OK(manypy_value_new_tensor_from_buffer(mask, mask_size, kBool, 2, mask_shape, NULL, 0,
                                                NULL, NULL, &mask_value));
  manypy_package* package = LOAD_PACKAGE(g_pool, "encoder.pt");
  manypy_object* encoder = LOAD_MODEL(package);
  manypy_value* items[2] = {F32_TENSOR(src, 3, src_shape), mask_value};
  manypy_value* args = TUPLE_OF(2, items);
  check_on_every_interpreter(encoder, args, "encoder", 3, src_shape, expected, 1e-5);
  manypy_value_free(args);
  manypy_object_free(encoder);
  manypy_package_free(package);
  free(mask);
  free(src);
  free(expected);
}

/* ---- threads that model code starts ---------------------------------------------------- */

/* Every thread of the process is made by the host's libc, whose stack cache
 * and frees match ld.so's: threads that start threads that run torch (and
 * so use dynamic TLS), a thread pool, and all of it beside host threads. */
static void test_threads_that_model_code_starts(void** state) {
  (void)state;
  static const char kThreads[] =
      "import threading, torch\n"
      "from concurrent.futures import ThreadPoolExecutor\n"
      "def _work(k):\n"
      "    return float(torch.full((8,), float(k)).sum())\n"
      "def _nested(out):\n"
      "    inner = []\n"
      "    for k in range(10):\n"
      "        t = threading.Thread(target=lambda k=k: inner.append(_work(k)))\n"
      "        t.start()\n"
      "        t.join()\n"
      "    out.append(sum(inner))\n"
      "_out = []\n"
      "_outer = [threading.Thread(target=_nested, args=(_out,)) for _ in range(5)]\n"
      "for t in _outer: t.start()\n"
      "for t in _outer: t.join()\n"
      "with ThreadPoolExecutor(4) as _ex:\n"
      "    _pooled = sum(_ex.map(_work, range(100)))\n"
      "threads_result = (_out, _pooled)\n";
  double t0 = capi_now();
  ASSERT_OK(manypy_pool_exec_all(g_pool, kThreads));
  for (int32_t i = 0; i < FULL; ++i) {
    /* 5 x sum(8k for k < 10) = 5 x 360; the pool: 8 x sum(range(100)). */
    char* result = EVAL_STRING(g_pool, i, "repr(threads_result)", NULL);
    assert_string_equal(result, "([360.0, 360.0, 360.0, 360.0, 360.0], 39600.0)");
    free(result);
  }
  fprintf(stderr, "  %d threads started by model code in each of %d interpreters: %.1f s\n",
          5 + 50 + 4, FULL, capi_now() - t0);
}

/* ---- keys churned while calls run ------------------------------------------------------- */

/* In each interpreter, a Python thread that, until told to stop, makes keys,
 * sets and checks values, starts short-lived threads that set a key and
 * end, and deletes the keys; it counts what went wrong. */
static const char kChurn[] =
    "import threading, torch\n"
    "churn_stop = threading.Event()\n"
    "churn_report = {'rounds': 0, 'wrong': [], 'threads': 0}\n"
    "def _churn():\n"
    "    r = 0\n"
    "    while not churn_stop.is_set():\n"
    "        r += 1\n"
    "        keys = [tss_new() for _ in range(8)]\n"
    "        for n, t in enumerate(keys):\n"
    "            if _api.PyThread_tss_get(t) is not None:\n"
    "                churn_report['wrong'].append(('fresh key has a value', r, tss_key(t)))\n"
    "            _api.PyThread_tss_set(t, 1000 * r + n + 1)\n"
    "        if r % 10 == 0:\n"
    "            def _short(t=keys[0], v=7 * r):\n"
    "                if _api.PyThread_tss_get(t) is not None:\n"
    "                    churn_report['wrong'].append(('new thread sees a value', r))\n"
    "                _api.PyThread_tss_set(t, v)\n"
    "                if _api.PyThread_tss_get(t) != v:\n"
    "                    churn_report['wrong'].append(('short thread lost its value', r))\n"
    "                if float(torch.ones(4).sum()) != 4.0:  # torch's thread-locals too\n"
    "                    churn_report['wrong'].append(('torch in a short thread', r))\n"
    "            th = threading.Thread(target=_short)\n"
    "            th.start()\n"
    "            th.join()\n"
    "            churn_report['threads'] += 1\n"
    "        for n, t in enumerate(keys):\n"
    "            if _api.PyThread_tss_get(t) != 1000 * r + n + 1:\n"
    "                churn_report['wrong'].append(('value changed', r, tss_key(t)))\n"
    "        for t in keys:\n"
    "            tss_drop(t)\n"
    "        churn_report['rounds'] = r\n"
    "churn_thread = threading.Thread(target=_churn)\n"
    "churn_thread.start()\n";

struct host_thread {
  int32_t interpreter;
  int calls;
  int errors;
  char first_error[512];
};

static void note_error(struct host_thread* t, const char* what) {
  if (t->errors++ == 0) snprintf(t->first_error, sizeof t->first_error, "%s", what);
}

/* A host thread that makes a few pinned calls and ends: its exit runs the
 * namespace's key destructors (libgomp's, LLVM's) for that thread. */
static void* host_caller(void* arg) {
  struct host_thread* t = arg;
  manypy_call_options* options = manypy_call_options_new();
  if (options == NULL || manypy_call_options_set_interpreter(options, t->interpreter) != NULL) {
    note_error(t, "call options");
    return NULL;
  }
  for (int k = 0; k < t->calls; ++k) {
    manypy_value* result = NULL;
    manypy_status* s =
        manypy_object_call(g_heavy, NULL, g_heavy_args, g_heavy_kwargs, options, &result);
    if (s != NULL) {
      note_error(t, manypy_status_message(s));
      manypy_status_free(s);
      continue;
    }
    char why[256];
    if (!capi_values_equal(result, g_reference[t->interpreter], why, sizeof why)) {
      note_error(t, why);
    }
    manypy_value_free(result);
  }
  manypy_call_options_free(options);
  return NULL;
}

static void test_keys_churn_while_calls_run(void** state) {
  (void)state;
  assert_non_null(g_heavy);
  /* Libraries make some keys at their first use in a new thread (4 on
   * torch 1.13): a first such thread, then the level the churn must keep. */
  ASSERT_OK(manypy_pool_exec_all(
      g_pool,
      "import threading, torch\n"
      "_t = threading.Thread(target=lambda: (float(torch.ones(4).sum()), keys_held()))\n"
      "_t.start()\n"
      "_t.join()\n"));
  for (int32_t i = 0; i < FULL; ++i) g_keys_held[i] = EVAL_INT64(g_pool, i, "keys_held()");
  ASSERT_OK(manypy_pool_exec_all(g_pool, kChurn));
  double t0 = capi_now();
  int calls = 0;
  for (int gen = 0; gen < HOST_THREAD_GENERATIONS; ++gen) {
    pthread_t threads[HOST_THREADS];
    struct host_thread work[HOST_THREADS];
    for (int k = 0; k < HOST_THREADS; ++k) {
      work[k] = (struct host_thread){.interpreter = (gen * HOST_THREADS + k) % FULL, .calls = 20};
      assert_int_equal(pthread_create(&threads[k], NULL, host_caller, &work[k]), 0);
    }
    for (int k = 0; k < HOST_THREADS; ++k) {
      assert_int_equal(pthread_join(threads[k], NULL), 0);
      if (work[k].errors != 0) {
        fail_msg("host thread on interpreter %d: %d errors, first: %s", (int)work[k].interpreter,
                 work[k].errors, work[k].first_error);
      }
      calls += work[k].calls;
    }
  }
  ASSERT_OK(manypy_pool_exec_all(g_pool, "churn_stop.set()\nchurn_thread.join()\n"));
  fprintf(stderr, "  %d checked calls from %d short-lived host threads in %.1f s\n", calls,
          HOST_THREADS * HOST_THREAD_GENERATIONS, capi_now() - t0);
  for (int32_t i = 0; i < FULL; ++i) {
    char* wrong = EVAL_STRING(g_pool, i, "repr(churn_report['wrong'][:3])", NULL);
    assert_string_equal(wrong, "[]");
    free(wrong);
    int64_t rounds = EVAL_INT64(g_pool, i, "churn_report['rounds']");
    int64_t threads = EVAL_INT64(g_pool, i, "churn_report['threads']");
    if (i == 0 || i == FULL - 1) {
      fprintf(stderr, "  interpreter %d: %lld rounds of 8 keys, %lld short threads\n", (int)i,
              (long long)rounds, (long long)threads);
    }
    assert_true(rounds > 0);
    /* Every key the churn made was given back. */
    assert_int_equal(EVAL_INT64(g_pool, i, "keys_held()"), g_keys_held[i]);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_namespace_keeps_its_keys),
      cmocka_unit_test(test_python_heavy_everywhere),
      cmocka_unit_test(test_resnet18_everywhere),
      cmocka_unit_test(test_encoder_everywhere),
      cmocka_unit_test(test_threads_that_model_code_starts),
      cmocka_unit_test(test_keys_churn_while_calls_run),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
