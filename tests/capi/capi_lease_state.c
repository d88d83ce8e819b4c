/*
 * Leases start clean (docs/isolation.md, "What a lease puts back"): a
 * setting that one pool's model code changes for its whole interpreter, or
 * for the thread that runs it, is back to its default when the next pool
 * leases that interpreter. One test per setting: a pool's model
 * (hostile.pt's change_lease_state, samples/models/hostile.py) changes it,
 * the pool is destroyed, and a new pool, leasing the same interpreter,
 * reads it. Each runs DIRECT then DIRECT (the calls run on this thread, so
 * torch's per-thread settings change on a host thread) and HANDOFF then
 * HANDOFF (on the interpreter's own thread).
 *
 * The process holds one interpreter, and every pool of 1 leases it again;
 * the last test closes sys.stdout, which cannot be put back: that
 * interpreter is retired, and the next pool gets a new one.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi_test_support.h"

#define T "__import__('torch')"
#define S "__import__('sys')"
#define W "__import__('warnings')"
#define GC "__import__('gc')"

typedef struct lease_case {
  const char* setter; /* a key of hostile.LEASE_STATE_SETTERS */
  const char* read;   /* an expression whose str value shows the setting */
  int torch2_only;    /* the setter needs torch 2.x */
  int replaces;       /* it replaces a function: undo it after the test */
  /* Changed by manypy_pool_exec instead: an object call puts the caller's
   * grad mode back as it returns, exec does not. */
  const char* exec;
} lease_case;

static const lease_case kCases[] = {
    {"gc_disable", "repr(" GC ".isenabled())", 0, 0, NULL},
    {"gc_threshold", "repr(" GC ".get_threshold())", 0, 0, NULL},
    {"gc_debug", "repr(" GC ".get_debug())", 0, 0, NULL},
    {"gc_callback", "repr(len(" GC ".callbacks))", 0, 0, NULL},
    {"warnings_error", "repr((" W ".filters, " W ".defaultaction))", 0, 0, NULL},
    {"warnings_default_action", "repr((" W ".filters, " W ".defaultaction))", 0, 0, NULL},
    {"warnings_showwarning", "repr(" W ".showwarning is " W "._showwarning_orig)", 0, 0, NULL},
    {"warnings_filters_not_a_list", "repr((" W ".filters, " W ".defaultaction))", 0, 0, NULL},
    {"default_dtype", "str(" T ".zeros(1).dtype)", 0, 0, NULL},
    {"default_tensor_type", T ".tensor([1.5]).type()", 0, 0, NULL},
    {"deterministic",
     "repr((" T ".are_deterministic_algorithms_enabled(), " T
     ".is_deterministic_algorithms_warn_only_enabled()))",
     0, 0, NULL},
    {"flush_denormal", "repr(" T ".tensor([1e-310], dtype=" T ".float64).mul(1.0).item())", 0, 0,
     NULL},
    {"grad_mode", "repr(" T ".is_grad_enabled())", 0, 0,
     "import torch\ntorch.set_grad_enabled(False)\n"},
    {"inference_mode", "repr(" T ".is_inference_mode_enabled())", 0, 0, NULL},
    /* What a matmul gives, then the state: dtype, cache, nesting. */
    {"autocast",
     "repr((str((" T ".ones(2, 2) @ " T ".ones(2, 2)).dtype), (" T ".get_autocast_dtype('cpu') if "
     "hasattr(" T ", 'get_autocast_dtype') else " T ".get_autocast_cpu_dtype()), " T
     ".is_autocast_cache_enabled(), " T ".autocast_increment_nesting(), " T
     ".autocast_decrement_nesting()))",
     0, 0, NULL},
    {"default_device", "str(" T ".empty(1).device)", 1, 0, NULL},
    {"function_mode", "repr(" T "._C._len_torch_function_stack())", 0, 0, NULL},
    {"anomaly", "repr((" T ".is_anomaly_enabled(), " T ".is_anomaly_check_nan_enabled()))", 0, 0,
     NULL},
    {"torch_flags",
     "repr((" T ".is_warn_always_enabled(), " T ".get_float32_matmul_precision(), " T
     ".backends.mkldnn.enabled, " T ".backends.cudnn.benchmark, " T
     "._tensor_str.PRINT_OPTS.precision))",
     0, 0, NULL},
    {"recursion_limit", "repr(" S ".getrecursionlimit())", 0, 0, NULL},
    {"switch_interval", "repr(" S ".getswitchinterval())", 0, 0, NULL},
    {"streams",
     "repr(tuple(getattr(" S ", n) is getattr(" S ", '__' + n + '__') for n in ('stdin', "
     "'stdout', 'stderr')))",
     0, 0, NULL},
    {"hooks",
     "repr((" S ".displayhook is " S ".__displayhook__, " S ".excepthook is " S
     ".__excepthook__, " S ".unraisablehook is " S
     ".__unraisablehook__, __import__('threading').excepthook is "
     "__import__('threading').__excepthook__))",
     0, 0, NULL},
    {"int_max_str_digits", "repr(" S ".get_int_max_str_digits())", 0, 0, NULL},
    {"dlopen_global", "repr(" S ".getdlopenflags())", 0, 0, NULL},
    /* Hostile: the functions the clean-up would call are gone or raise. */
    {"default_dtype_deleted", "str(" T ".zeros(1).dtype)", 0, 1, NULL},
    {"gc_enable_raises", "repr(" GC ".isenabled())", 0, 1, NULL},
};

static manypy_pool* g_pool;
static manypy_package* g_package;
static manypy_object* g_model;
static int g_mark; /* tells this process's leases apart */

static void free_pool(void) {
  manypy_object_free(g_model);
  manypy_package_free(g_package);
  manypy_pool_destroy(g_pool);
  g_model = NULL;
  g_package = NULL;
  g_pool = NULL;
}

static int teardown(void** state) {
  (void)state;
  free_pool();
  return 0;
}

static const char* mode_name(manypy_thread_mode mode) {
  return mode == MANYPY_THREAD_MODE_DIRECT ? "DIRECT" : "HANDOFF";
}

/* A pool of 1 in `mode`, with hostile.pt's model loaded. */
static void hostile_pool(manypy_thread_mode mode) {
  g_pool = MAKE_POOL(1, mode);
  g_package = LOAD_PACKAGE(g_pool, "hostile.pt");
  g_model = LOAD_MODEL(g_package);
}

static void call_model(const char* method, const char* argument) {
  manypy_value* items[1] = {argument ? STRING(argument) : NULL};
  manypy_value* args = TUPLE_OF(argument ? 1 : 0, items);
  manypy_value* out = NULL;
  ASSERT_OK(manypy_object_call(g_model, method, args, NULL, NULL, &out));
  manypy_value_free(out);
  manypy_value_free(args);
}

/* Marks the pool's interpreter (a module that stays imported between
 * leases keeps the mark) and returns the mark. */
static int mark_interpreter(void) {
  char source[96];
  snprintf(source, sizeof source, "import json\njson._lease_mark = %d\n", ++g_mark);
  ASSERT_OK(manypy_pool_exec(g_pool, 0, source));
  return g_mark;
}

static int has_mark(int mark) {
  char expr[96];
  snprintf(expr, sizeof expr, "getattr(__import__('json'), '_lease_mark', None) == %d", mark);
  return EVAL_BOOL(g_pool, 0, expr);
}

static void check_case(const lease_case* c, manypy_thread_mode mode) {
  hostile_pool(mode);
  char* before = EVAL_STRING(g_pool, 0, c->read, NULL);
  const int mark = mark_interpreter();
  if (c->exec != NULL) {
    ASSERT_OK(manypy_pool_exec(g_pool, 0, c->exec));
  } else {
    call_model("change_lease_state", c->setter);
  }
  char* changed = EVAL_STRING(g_pool, 0, c->read, NULL);
  if (strcmp(before, changed) == 0) {
    fail_msg("%s in a %s pool did not change %s (%s)", c->setter, mode_name(mode), c->read, before);
  }
  free_pool();

  /* The same interpreter, leased by a new pool. */
  g_pool = MAKE_POOL(1, mode);
  if (!has_mark(mark)) fail_msg("%s: the next pool did not lease the same interpreter", c->setter);
  char* after = EVAL_STRING(g_pool, 0, c->read, NULL);
  if (strcmp(before, after) != 0) {
    fail_msg("after %s in a %s pool, the next pool read %s as\n  %s\nnot as before\n  %s",
             c->setter, mode_name(mode), c->read, after, before);
  }
  if (c->replaces) {
    manypy_pool_destroy(g_pool);
    hostile_pool(mode);
    call_model("undo_replacements", NULL);
  }
  free_pool();
  free(before);
  free(changed);
  free(after);
}

static void test_setting(void** state) {
  const lease_case* c = *state;
  if (c->torch2_only) {
    g_pool = MAKE_POOL(1, MANYPY_THREAD_MODE_DIRECT);
    int has = EVAL_BOOL(g_pool, 0, "hasattr(" T ", 'set_default_device')");
    free_pool();
    if (!has) skip(); /* reported as skipped, not passed */
  }
  check_case(c, MANYPY_THREAD_MODE_DIRECT);
  check_case(c, MANYPY_THREAD_MODE_HANDOFF);
}

/* A closed sys.stdout cannot be put back: the interpreter is retired, not
 * leased again, and the next pool gets a new one that prints. */
static void test_a_setting_that_cannot_be_put_back_retires_the_interpreter(void** state) {
  (void)state;
  hostile_pool(MANYPY_THREAD_MODE_DIRECT);
  const int mark = mark_interpreter();
  call_model("change_lease_state", "stdout_closed");
  assert_int_equal(EVAL_BOOL(g_pool, 0, S ".stdout.closed"), 1);
  free_pool();
  g_pool = MAKE_POOL(1, MANYPY_THREAD_MODE_DIRECT);
  assert_int_equal(has_mark(mark), 0);
  assert_int_equal(EVAL_BOOL(g_pool, 0, S ".stdout.closed"), 0);
  ASSERT_OK(manypy_pool_exec(g_pool, 0, "print(end='')"));
  free_pool();
}

/* An argument runs only the tests it matches (cmocka's glob): a setting's
 * test alone starts from defaults even where leases do not put them back. */
int main(int argc, char** argv) {
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  enum { kCount = sizeof kCases / sizeof kCases[0] };
  struct CMUnitTest tests[kCount + 1];
  for (size_t i = 0; i < kCount; ++i) {
    tests[i] =
        (struct CMUnitTest){kCases[i].setter, test_setting, NULL, teardown, (void*)&kCases[i]};
  }
  tests[kCount] = (struct CMUnitTest)cmocka_unit_test_teardown(
      test_a_setting_that_cannot_be_put_back_retires_the_interpreter, teardown);
  return _cmocka_run_group_tests("capi_lease_state", tests, kCount + 1, NULL, NULL);
}
