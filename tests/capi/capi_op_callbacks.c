/* Operator callbacks: fire in every interpreter and on the host path with the
 * right interpreter index, carry the call's context (never another call's),
 * sample at the asked probability, report inputs when asked, and stop with
 * their user data freed once when removed. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi_test_support.h"

typedef struct counts {
  atomic_long enter, exit;
  atomic_long by_interpreter[4]; /* index + 1: slot 0 is the host (-1) */
  atomic_long add_ops;           /* enters of aten::add_ */
  atomic_long with_inputs;       /* aten::add events with a [3] tensor input */
  atomic_long bad_context;       /* events whose context breaks the test's rule */
  atomic_long any_inputs;        /* events that carried inputs */
  atomic_long freed;
  pthread_mutex_t mu;
  uint64_t thread_of_a, thread_of_b; /* torch thread ids seen with each request */
} counts;

static void on_enter(const manypy_op_event* e, void* user_data) {
  counts* c = user_data;
  assert_true(e->struct_size >= sizeof(manypy_op_event));
  atomic_fetch_add(&c->enter, 1);
  if (e->num_inputs > 0) atomic_fetch_add(&c->any_inputs, 1);
  if (e->interpreter >= -1 && e->interpreter < 3)
    atomic_fetch_add(&c->by_interpreter[e->interpreter + 1], 1);
  if (strcmp(e->name, "aten::add_") == 0) atomic_fetch_add(&c->add_ops, 1);
  if (strcmp(e->name, "aten::add") == 0 && e->num_inputs >= 2 &&
      e->inputs[0].kind == MANYPY_VALUE_TENSOR && e->inputs[0].ndim == 1 &&
      e->inputs[0].shape[0] == 3 && e->inputs[0].dtype.code == kDLFloat &&
      e->inputs[0].dtype.bits == 32) {
    atomic_fetch_add(&c->with_inputs, 1);
  }
  /* Requests "A" and "B" run concurrently on two threads: each torch thread
   * must only ever report one of them. */
  if (strcmp(e->request_id, "A") == 0 || strcmp(e->request_id, "B") == 0) {
    pthread_mutex_lock(&c->mu);
    uint64_t* mine = e->request_id[0] == 'A' ? &c->thread_of_a : &c->thread_of_b;
    uint64_t* other = e->request_id[0] == 'A' ? &c->thread_of_b : &c->thread_of_a;
    if (*mine == 0) *mine = e->thread_id;
    if (*mine != e->thread_id || *other == e->thread_id) atomic_fetch_add(&c->bad_context, 1);
    if (strcmp(e->model_id, "heavy") != 0) atomic_fetch_add(&c->bad_context, 1);
    pthread_mutex_unlock(&c->mu);
  }
}

static void on_leave(const manypy_op_event* e, void* user_data) {
  counts* c = user_data;
  if (e->end_ns < e->start_ns) atomic_fetch_add(&c->bad_context, 1);
  atomic_fetch_add(&c->exit, 1);
}

static void on_free(void* user_data) { atomic_fetch_add(&((counts*)user_data)->freed, 1); }

typedef struct caller {
  manypy_object* model;
  const char* request;
  manypy_value* args;
  manypy_value* kwargs;
  int errors;
} caller;

static void* call_many(void* arg) {
  caller* c = arg;
  manypy_call_options* options = manypy_call_options_new();
  manypy_status_free(manypy_call_options_set_context(options, "heavy", c->request));
  for (int k = 0; k < 50; ++k) {
    manypy_value* out = NULL;
    manypy_status* s = manypy_object_call(c->model, NULL, c->args, c->kwargs, options, &out);
    if (s) c->errors++;
    manypy_status_free(s);
    manypy_value_free(out);
  }
  manypy_call_options_free(options);
  return NULL;
}

static void test_callbacks(void** state) {
  (void)state;
  static counts c;
  pthread_mutex_init(&c.mu, NULL);
  manypy_pool* pool = MAKE_POOL(2, MANYPY_THREAD_MODE_DIRECT);
  ASSERT_OK(manypy_pool_exec_all(pool, "import torch\nx = torch.ones(3)"));
  uint64_t id = 0;
  ASSERT_OK(manypy_add_op_callbacks(on_enter, on_leave, &c, on_free, 1.0, 1, &id));

  /* Every interpreter, with its index; inputs reported. */
  for (int32_t i = 0; i < 2; ++i) ASSERT_OK(manypy_pool_exec(pool, i, "y = x + 1"));
  assert_true(atomic_load(&c.by_interpreter[1]) > 0);
  assert_true(atomic_load(&c.by_interpreter[2]) > 0);
  assert_true(atomic_load(&c.with_inputs) >= 2);
  assert_int_equal(atomic_load(&c.enter), atomic_load(&c.exit));

  /* An interpreter started after registering gets the callbacks too. */
  manypy_pool* later = MAKE_POOL(1, MANYPY_THREAD_MODE_DIRECT);
  ASSERT_OK(manypy_pool_exec(later, 0, "import torch\ntorch.ones(3) + 1"));
  assert_true(atomic_load(&c.by_interpreter[3]) > 0);
  manypy_pool_destroy(later);

  /* The host path reports interpreter -1. */
  manypy_script_module* script = NULL;
  ASSERT_OK(manypy_script_load_file(ARCHIVE("python_heavy_script.pt"), &script));
  float* input = READ_F32("python_heavy.input.bin", 4 * 64);
  const int64_t shape[2] = {4, 64};
  manypy_value* x = F32_TENSOR(input, 2, shape); /* copied */
  free(input);
  manypy_value* args = manypy_value_new_tuple();
  ASSERT_OK(manypy_value_append(args, x));
  manypy_value* out = NULL;
  long host_before = atomic_load(&c.by_interpreter[0]);
  ASSERT_OK(manypy_script_call(script, NULL, args, NULL, NULL, &out));
  manypy_value_free(out);
  assert_true(atomic_load(&c.by_interpreter[0]) > host_before);
  manypy_script_free(script);

  /* Two concurrent calls with different request ids never see each other's. */
  manypy_package* package = LOAD_PACKAGE(pool, "python_heavy.pt");
  manypy_object* model = LOAD_MODEL(package);
  caller a = {model, "A", args, NULL, 0}, b = {model, "B", args, NULL, 0};
  pthread_t ta, tb;
  pthread_create(&ta, NULL, call_many, &a);
  pthread_create(&tb, NULL, call_many, &b);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  assert_int_equal(a.errors + b.errors, 0);
  assert_true(c.thread_of_a != 0 && c.thread_of_b != 0);
  assert_int_equal(atomic_load(&c.bad_context), 0);

  /* Removing: no callback afterwards, user data freed once. */
  ASSERT_OK(manypy_remove_op_callbacks(id));
  assert_int_equal(atomic_load(&c.freed), 1);
  long enters = atomic_load(&c.enter);
  ASSERT_OK(manypy_pool_exec(pool, 0, "y = x + 1"));
  manypy_value* out2 = NULL;
  ASSERT_OK(manypy_object_call(model, NULL, args, NULL, NULL, &out2));
  manypy_value_free(out2);
  assert_int_equal(atomic_load(&c.enter), enters);
  manypy_status* s = EXPECT_CODE(manypy_remove_op_callbacks(id), MANYPY_ERR_NO_SUCH_NAME);
  manypy_status_free(s);

  manypy_value_free(args);
  manypy_object_free(model);
  manypy_package_free(package);
  manypy_pool_destroy(pool);
}

static void test_sampling_is_binomial(void** state) {
  (void)state;
  static counts all, sampled;
  manypy_pool* pool = MAKE_POOL(1, MANYPY_THREAD_MODE_DIRECT);
  uint64_t every = 0, tenth = 0;
  ASSERT_OK(manypy_add_op_callbacks(on_enter, NULL, &all, NULL, 1.0, 0, &every));
  ASSERT_OK(manypy_add_op_callbacks(on_enter, NULL, &sampled, NULL, 0.1, 0, &tenth));
  ASSERT_OK(manypy_pool_exec(
      pool, 0, "import torch\nx = torch.zeros(4)\nfor _ in range(30000):\n    x.add_(1)\n"));
  ASSERT_OK(manypy_remove_op_callbacks(tenth));
  ASSERT_OK(manypy_remove_op_callbacks(every));
  double n = (double)atomic_load(&all.add_ops), k = (double)atomic_load(&sampled.add_ops);
  double mean = 0.1 * n, sd = sqrt(n * 0.1 * 0.9);
  fprintf(stderr, "  aten::add_ calls %.0f, sampled %.0f (mean %.0f, sd %.1f)\n", n, k, mean, sd);
  assert_true(n >= 20000);
  /* Registered without inputs: no event carried any. */
  assert_int_equal(atomic_load(&all.any_inputs), 0);
  assert_int_equal(atomic_load(&sampled.any_inputs), 0);
  assert_true(fabs(k - mean) <= 6 * sd);
  manypy_status* s = EXPECT_CODE(
      manypy_add_op_callbacks(on_enter, NULL, NULL, NULL, 0.0, 0, &every), MANYPY_ERR_OUT_OF_RANGE);
  manypy_status_free(s);
  manypy_pool_destroy(pool);
}

/* Exit events report the inputs the operator was called with. torch 1.13
 * keeps RecordFunction's inputs only for the enter callbacks: on the boxed
 * path (torch.ops, TorchScript) they are a view of the operator's stack,
 * which holds its outputs by exit. Reading them at exit reported matmul's
 * [3, 4, 10] output as its first input, and read freed memory past the
 * stack (a crash under load from a JVM). So they are described at enter and
 * carried to exit. */
static atomic_long matmul_exits, matmul_exits_with_inputs;

static void on_matmul_exit(const manypy_op_event* e, void* user_data) {
  (void)user_data;
  if (strcmp(e->name, "aten::matmul") != 0) return;
  atomic_fetch_add(&matmul_exits, 1);
  const manypy_op_input* in = e->inputs;
  if (e->num_inputs == 2 && in[0].kind == MANYPY_VALUE_TENSOR && in[0].ndim == 3 &&
      in[0].shape[2] == 64 && in[1].kind == MANYPY_VALUE_TENSOR && in[1].ndim == 2 &&
      in[1].shape[0] == 64 && in[1].shape[1] == 10) {
    atomic_fetch_add(&matmul_exits_with_inputs, 1);
  }
}

static void test_exit_events_carry_the_inputs(void** state) {
  (void)state;
  manypy_pool* pool = MAKE_POOL(1, MANYPY_THREAD_MODE_DIRECT);
  uint64_t id = 0;
  ASSERT_OK(manypy_add_op_callbacks(NULL, on_matmul_exit, NULL, NULL, 1.0, 1, &id));
  ASSERT_OK(manypy_pool_exec(pool, 0,
                             "import torch\nx, w = torch.ones(3, 4, 64), torch.ones(64, 10)\n"
                             "for _ in range(200):\n    y = torch.ops.aten.matmul(x, w)\n"));
  ASSERT_OK(manypy_remove_op_callbacks(id));
  assert_int_equal(atomic_load(&matmul_exits), 200);
  assert_int_equal(atomic_load(&matmul_exits_with_inputs), 200);
  manypy_pool_destroy(pool);
}

/* Exec and eval with call options report the options' context; without a
 * context, events report "". */
static atomic_long with_exec_context, without_context, other_context;

static void on_context(const manypy_op_event* e, void* user_data) {
  (void)user_data;
  if (strcmp(e->name, "aten::add") != 0) return;
  if (strcmp(e->model_id, "exec-model") == 0 && strcmp(e->request_id, "exec-request") == 0) {
    atomic_fetch_add(&with_exec_context, 1);
  } else if (e->model_id[0] == '\0' && e->request_id[0] == '\0') {
    atomic_fetch_add(&without_context, 1);
  } else {
    atomic_fetch_add(&other_context, 1);
  }
}

static void test_exec_and_eval_report_the_context(void** state) {
  (void)state;
  manypy_pool* pool = MAKE_POOL(1, MANYPY_THREAD_MODE_HANDOFF);
  ASSERT_OK(manypy_pool_exec(pool, 0, "import torch\nx = torch.ones(3)"));
  uint64_t id = 0;
  ASSERT_OK(manypy_add_op_callbacks(on_context, NULL, NULL, NULL, 1.0, 0, &id));
  manypy_call_options* options = manypy_call_options_new();
  ASSERT_OK(manypy_call_options_set_context(options, "exec-model", "exec-request"));
  ASSERT_OK(manypy_pool_exec_with_options(pool, "y = x + 1", options));
  manypy_value* out = NULL;
  ASSERT_OK(manypy_pool_eval_with_options(pool, "(x + 2).sum().item()", options, &out));
  double sum = 0;
  ASSERT_OK(manypy_value_get_double(out, &sum));
  assert_true(sum == 9.0);
  manypy_value_free(out);
  assert_int_equal(atomic_load(&with_exec_context), 2);
  /* The context ends with the call. */
  ASSERT_OK(manypy_pool_exec_with_options(pool, "y = x + 1", NULL));
  ASSERT_OK(manypy_pool_exec(pool, 0, "y = x + 1"));
  ASSERT_OK(manypy_remove_op_callbacks(id));
  assert_int_equal(atomic_load(&without_context), 2);
  assert_int_equal(atomic_load(&with_exec_context), 2);
  assert_int_equal(atomic_load(&other_context), 0);
  manypy_call_options_free(options);
  manypy_pool_destroy(pool);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_callbacks),
      cmocka_unit_test(test_sampling_is_binomial),
      cmocka_unit_test(test_exit_events_carry_the_inputs),
      cmocka_unit_test(test_exec_and_eval_report_the_context),
  };
  return cmocka_run_group_tests_name("capi_op_callbacks", tests, NULL, NULL);
}
