/*
 * Dynamic batching (manypy_batcher_*), on batching.pt: concurrent requests
 * are concatenated along the batch dimension, run once and split back;
 * requests that cannot share a batch do not; errors fail the whole batch;
 * stopped requests are dropped; the batch sizes reach the Prometheus text.
 * Runs in DIRECT and in HANDOFF mode (a pool of 2 interpreters each).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "capi_test_support.h"

static capi_fixture g; /* batching.pt */
static const char* g_mode = "";

static int setup_direct(void** state) {
  (void)state;
  g_mode = "direct";
  return capi_fixture_setup(&g, 2, MANYPY_THREAD_MODE_DIRECT, "batching.pt");
}

static int setup_handoff(void** state) {
  (void)state;
  g_mode = "handoff";
  return capi_fixture_setup(&g, 2, MANYPY_THREAD_MODE_HANDOFF, "batching.pt");
}

static int teardown(void** state) {
  (void)state;
  capi_fixture_teardown(&g);
  return 0;
}

static manypy_batcher* make_batcher(manypy_object* model, const char* method, size_t max_batch,
                                    int64_t max_wait_us) {
  manypy_batcher_options* o = manypy_batcher_options_new();
  ASSERT_OK(manypy_batcher_options_set_max_batch(o, max_batch));
  ASSERT_OK(manypy_batcher_options_set_max_wait_us(o, max_wait_us));
  manypy_batcher* b = NULL;
  ASSERT_OK(manypy_batcher_new(model, method, o, &b));
  manypy_batcher_options_free(o);
  return b;
}

/* A float32 tensor of `rows` x `cols` whose row r holds first + r. */
static manypy_value* rows_tensor(int rows, int cols, float first) {
  float data[64];
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) data[r * cols + c] = first + (float)r;
  }
  int64_t shape[2] = {rows, cols};
  return F32_TENSOR(data, 2, shape);
}

static manypy_value* args_of(manypy_value* x) {
  manypy_value* items[1] = {x};
  return TUPLE_OF(1, items);
}

/* ---- many clients at once ----------------------------------------------- */

typedef struct client {
  manypy_batcher* batcher;
  int index;
  int cols;       /* the requests' width: different widths never share */
  int rows_seen;  /* rows(x)'s answer: its batch's rows */
  int forward_ok; /* forward's answer was its own rows, * 2 + 1 */
  char error[256];
} client;

static pthread_barrier_t g_start;

static void* client_main(void* arg) {
  client* c = arg;
  float first = (float)(c->index * 10);
  float data[8];
  int64_t shape[2] = {1, c->cols};
  for (int k = 0; k < c->cols; ++k) data[k] = first;
  manypy_value* x = NULL;
  manypy_value* args = manypy_value_new_tuple();
  manypy_status* s = manypy_value_new_tensor_from_buffer(data, sizeof(float) * (size_t)c->cols,
                                                         (DLDataType){kDLFloat, 32, 1}, 2, shape,
                                                         NULL, 1, NULL, NULL, &x);
  if (s == NULL) s = manypy_value_append(args, x);
  pthread_barrier_wait(&g_start);
  manypy_value* out = NULL;
  if (s == NULL) s = manypy_batcher_call(c->batcher, args, NULL, NULL, &out);
  if (s == NULL) {
    manypy_value* rows_out = out;
    DLManagedTensor* t = NULL;
    s = manypy_value_get_tensor(rows_out, &t);
    if (s == NULL) {
      if (t->dl_tensor.ndim == 1 && t->dl_tensor.shape[0] == 1) {
        c->rows_seen = (int)((float*)t->dl_tensor.data)[0];
      } else if (t->dl_tensor.ndim == 2 && t->dl_tensor.shape[0] == 1) {
        const float* got =
            (const float*)((const char*)t->dl_tensor.data + t->dl_tensor.byte_offset);
        c->forward_ok = 1;
        for (int k = 0; k < c->cols; ++k) {
          if (got[k] != first * 2 + 1) c->forward_ok = 0;
        }
      }
      t->deleter(t);
    }
    manypy_value_free(out);
  }
  if (s != NULL) {
    snprintf(c->error, sizeof c->error, "%s: %s", manypy_code_name(manypy_status_code(s)),
             manypy_status_message(s));
    manypy_status_free(s);
  }
  manypy_value_free(args);
  return NULL;
}

/* Runs `n` clients at once through `b`; client k sends width cols(k). */
static void run_clients(manypy_batcher* b, client* clients, int n, int (*cols)(int)) {
  pthread_t threads[32];
  pthread_barrier_init(&g_start, NULL, (unsigned)n);
  for (int k = 0; k < n; ++k) {
    memset(&clients[k], 0, sizeof clients[k]);
    clients[k].batcher = b;
    clients[k].index = k;
    clients[k].cols = cols(k);
    pthread_create(&threads[k], NULL, client_main, &clients[k]);
  }
  for (int k = 0; k < n; ++k) pthread_join(threads[k], NULL);
  pthread_barrier_destroy(&g_start);
  for (int k = 0; k < n; ++k) {
    if (clients[k].error[0] != '\0') fail_msg("client %d: %s", k, clients[k].error);
  }
}

static int width_2(int k) {
  (void)k;
  return 2;
}

static int width_2_or_3(int k) { return 2 + k % 2; }

static void test_concurrent_requests_share_batches(void** state) {
  (void)state;
  /* A long wait: 16 clients released at once fill batches of 8. */
  manypy_batcher* b = make_batcher(g.model, "rows", 8, 500 * 1000);
  client clients[16];
  run_clients(b, clients, 16, width_2);
  int largest = 0;
  for (int k = 0; k < 16; ++k) {
    if (clients[k].rows_seen > largest) largest = clients[k].rows_seen;
    assert_in_range(clients[k].rows_seen, 1, 8);
  }
  print_message("16 clients: largest batch %d rows\n", largest);
  assert_true(largest > 1);
  manypy_batcher_free(b);
}

static void test_each_request_gets_its_own_rows(void** state) {
  (void)state;
  manypy_batcher* b = make_batcher(g.model, NULL, 8, 20 * 1000);
  client clients[16];
  run_clients(b, clients, 16, width_2);
  for (int k = 0; k < 16; ++k) assert_true(clients[k].forward_ok);
  manypy_batcher_free(b);
}

static void test_different_shapes_are_not_stacked(void** state) {
  (void)state;
  /* Widths 2 and 3 cannot be concatenated: two batches of at most 4. */
  manypy_batcher* b = make_batcher(g.model, "rows", 8, 300 * 1000);
  client clients[8];
  run_clients(b, clients, 8, width_2_or_3);
  for (int k = 0; k < 8; ++k) assert_in_range(clients[k].rows_seen, 1, 4);
  manypy_batcher_free(b);
}

/* ---- asynchronous requests ------------------------------------------------ */

typedef struct outcome {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;
  manypy_value* result[8];
  manypy_status* status[8];
} outcome;

typedef struct slot {
  outcome* o;
  int index;
} slot;

static void outcome_done(void* user_data, manypy_value* result, manypy_status* status) {
  slot* s = user_data;
  pthread_mutex_lock(&s->o->mu);
  s->o->result[s->index] = result;
  s->o->status[s->index] = status;
  s->o->done++;
  pthread_cond_broadcast(&s->o->cv);
  pthread_mutex_unlock(&s->o->mu);
}

static void outcome_wait(outcome* o, int n) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 60;
  pthread_mutex_lock(&o->mu);
  while (o->done < n) {
    if (pthread_cond_timedwait(&o->cv, &o->mu, &until) != 0) break;
  }
  pthread_mutex_unlock(&o->mu);
  assert_int_equal(o->done, n);
}

static void outcome_free(outcome* o, int n) {
  for (int k = 0; k < n; ++k) {
    manypy_value_free(o->result[k]);
    manypy_status_free(o->status[k]);
  }
}

/* Submits `n` asynchronous requests to `b`, request k with the arguments
 * make_args(k) (freed here), with `options` (may be NULL), and waits for
 * all their outcomes. */
static void submit_each(manypy_batcher* b, int n, manypy_value* (*make_args)(int k),
                        const manypy_call_options* options, outcome* o, slot* slots) {
  memset(o, 0, sizeof *o);
  pthread_mutex_init(&o->mu, NULL);
  pthread_cond_init(&o->cv, NULL);
  for (int k = 0; k < n; ++k) {
    slots[k] = (slot){o, k};
    manypy_value* args = make_args(k);
    ASSERT_OK(manypy_batcher_call_async(b, args, NULL, options, outcome_done, &slots[k]));
    manypy_value_free(args);
  }
  outcome_wait(o, n);
}

/* (x,) with x one row of width 2 holding k. */
static manypy_value* one_row(int k) { return args_of(rows_tensor(1, 2, (float)k)); }

static void submit_rows(manypy_batcher* b, int n, const manypy_call_options* options, outcome* o,
                        slot* slots) {
  submit_each(b, n, one_row, options, o, slots);
}

static void test_an_error_fails_every_request_of_its_batch(void** state) {
  (void)state;
  outcome o;
  slot slots[4];
  manypy_batcher* b = make_batcher(g.model, "fail", 4, 10 * 1000 * 1000);
  submit_rows(b, 4, NULL, &o, slots);
  for (int k = 0; k < 4; ++k) {
    assert_non_null(o.status[k]);
    assert_int_equal(manypy_status_code(o.status[k]), MANYPY_ERR_PYTHON);
    assert_string_equal(manypy_status_python_type(o.status[k]), "ValueError");
    ASSERT_CONTAINS(manypy_status_message(o.status[k]), "refused a batch of 4 rows");
  }
  outcome_free(&o, 4);
  manypy_batcher_free(b);
}

static void test_fewer_rows_than_the_batch_fail_it(void** state) {
  (void)state;
  outcome o;
  slot slots[4];
  manypy_batcher* b = make_batcher(g.model, "drop_row", 4, 10 * 1000 * 1000);
  submit_rows(b, 4, NULL, &o, slots);
  for (int k = 0; k < 4; ++k) {
    assert_int_equal(manypy_status_code(o.status[k]), MANYPY_ERR_BAD_TENSOR);
    ASSERT_CONTAINS(manypy_status_message(o.status[k]), "does not have the 4 rows of its batch");
  }
  outcome_free(&o, 4);
  manypy_batcher_free(b);
}

/* pair(x, y): x one row holding k, y one row holding 100. */
static manypy_value* pair_args(int k) {
  manypy_value* items[2] = {rows_tensor(1, 2, (float)k), rows_tensor(1, 2, 100)};
  return capi_list_of(1, 2, items, __FILE__, __LINE__);
}

static void test_tuple_and_dict_results_are_split(void** state) {
  (void)state;
  manypy_batcher* b = make_batcher(g.model, "pair", 3, 10 * 1000 * 1000);
  outcome o;
  slot slots[3];
  submit_each(b, 3, pair_args, NULL, &o, slots);
  for (int k = 0; k < 3; ++k) {
    assert_null(o.status[k]);
    /* (x + y, {"sum": x.sum(dim=1), "label": "pair"}) of its own row. */
    const manypy_value* sum_of = NULL;
    const manypy_value* dict = NULL;
    ASSERT_OK(manypy_value_get_item(o.result[k], 0, &sum_of));
    ASSERT_OK(manypy_value_get_item(o.result[k], 1, &dict));
    float want[2] = {(float)k + 100, (float)k + 100};
    int64_t shape[2] = {1, 2};
    ASSERT_F32_TENSOR(sum_of, 2, shape, want, 0, "x + y");
    const manypy_value* sum = NULL;
    ASSERT_OK(manypy_value_dict_get(dict, "sum", &sum));
    float want_sum[1] = {2.0f * (float)k};
    int64_t sum_shape[1] = {1};
    ASSERT_F32_TENSOR(sum, 1, sum_shape, want_sum, 0, "x.sum(dim=1)");
    const manypy_value* label = NULL;
    ASSERT_OK(manypy_value_dict_get(dict, "label", &label));
    const char* text = NULL;
    size_t length = 0;
    ASSERT_OK(manypy_value_get_string(label, &text, &length));
    assert_string_equal(text, "pair");
  }
  outcome_free(&o, 3);
  manypy_batcher_free(b);
}

/* scale(x, factor): factor 5 for even k, 3 for odd. */
static manypy_value* scale_args(int k) {
  manypy_value* items[2] = {rows_tensor(1, 2, 1), manypy_value_new_double(k % 2 ? 3.0 : 5.0)};
  return capi_list_of(1, 2, items, __FILE__, __LINE__);
}

static void test_other_arguments_must_match_to_share(void** state) {
  (void)state;
  /* Two factors, two batches; each result its own. */
  manypy_batcher* b = make_batcher(g.model, "scale", 4, 200 * 1000);
  outcome o;
  slot slots[4];
  submit_each(b, 4, scale_args, NULL, &o, slots);
  for (int k = 0; k < 4; ++k) {
    float f = k % 2 ? 3.0f : 5.0f;
    float want[2] = {f, f};
    int64_t shape[2] = {1, 2};
    ASSERT_F32_TENSOR(o.result[k], 2, shape, want, 0, "scale(x, factor)");
  }
  outcome_free(&o, 4);
  manypy_batcher_free(b);
}

/* One row of width 2: float32 for even k, float64 for odd. */
static manypy_value* mixed_dtype_args(int k) {
  double d[2] = {1, 2};
  float f[2] = {1, 2};
  int64_t shape[2] = {1, 2};
  manypy_value* x = NULL;
  manypy_status* s = manypy_value_new_tensor_from_buffer(
      k % 2 ? (void*)d : (void*)f, k % 2 ? sizeof d : sizeof f,
      (DLDataType){kDLFloat, (uint8_t)(k % 2 ? 64 : 32), 1}, 2, shape, NULL, 1, NULL, NULL, &x);
  ASSERT_OK(s);
  return args_of(x);
}

static void test_dtypes_must_match_to_share(void** state) {
  (void)state;
  manypy_batcher* b = make_batcher(g.model, "rows", 8, 200 * 1000);
  outcome o;
  slot slots[4];
  submit_each(b, 4, mixed_dtype_args, NULL, &o, slots);
  for (int k = 0; k < 4; ++k) {
    assert_null(o.status[k]);
    DLManagedTensor* t = NULL;
    ASSERT_OK(manypy_value_get_tensor(o.result[k], &t));
    assert_int_equal((int)((float*)t->dl_tensor.data)[0], 2); /* two of each dtype */
    t->deleter(t);
  }
  outcome_free(&o, 4);
  manypy_batcher_free(b);
}

static void test_requests_the_batcher_cannot_split_are_refused(void** state) {
  (void)state;
  manypy_batcher* b = make_batcher(g.model, NULL, 8, 1000);
  manypy_value* out = NULL;
  /* No tensor. */
  manypy_value* items[1] = {manypy_value_new_int64(1)};
  manypy_value* args = TUPLE_OF(1, items);
  manypy_status* s =
      EXPECT_CODE(manypy_batcher_call(b, args, NULL, NULL, &out), MANYPY_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(manypy_status_message(s), "at least one tensor");
  manypy_status_free(s);
  manypy_value_free(args);
  /* A 0-d tensor has no batch dimension. */
  float one = 1;
  manypy_value* scalar = NULL;
  ASSERT_OK(manypy_value_new_tensor_from_buffer(&one, sizeof one, (DLDataType){kDLFloat, 32, 1}, 0,
                                                NULL, NULL, 1, NULL, NULL, &scalar));
  args = args_of(scalar);
  s = EXPECT_CODE(manypy_batcher_call(b, args, NULL, NULL, &out), MANYPY_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(manypy_status_message(s), "batch dimension 0");
  manypy_status_free(s);
  manypy_value_free(args);
  /* Tensors with different rows. */
  manypy_value* two[2] = {rows_tensor(1, 2, 0), rows_tensor(2, 2, 0)};
  args = TUPLE_OF(2, two);
  s = EXPECT_CODE(manypy_batcher_call(b, args, NULL, NULL, &out), MANYPY_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(manypy_status_message(s), "same size along the batch dimension");
  manypy_status_free(s);
  /* NULLs and bad options. */
  capi_check_invalid_argument(manypy_batcher_call(NULL, args, NULL, NULL, &out), "null batcher",
                              "manypy_batcher_call", "batcher", __FILE__, __LINE__);
  capi_check_invalid_argument(manypy_batcher_call_async(b, args, NULL, NULL, NULL, NULL),
                              "null callback", "manypy_batcher_call_async", "done", __FILE__,
                              __LINE__);
  capi_check_invalid_argument(manypy_batcher_new(NULL, NULL, NULL, &b), "null object",
                              "manypy_batcher_new", "object", __FILE__, __LINE__);
  manypy_batcher_options* o = manypy_batcher_options_new();
  manypy_status_free(
      EXPECT_CODE(manypy_batcher_options_set_max_batch(o, 0), MANYPY_ERR_OUT_OF_RANGE));
  manypy_status_free(
      EXPECT_CODE(manypy_batcher_options_set_max_batch(o, 65537), MANYPY_ERR_OUT_OF_RANGE));
  manypy_status_free(
      EXPECT_CODE(manypy_batcher_options_set_max_wait_us(o, -1), MANYPY_ERR_OUT_OF_RANGE));
  manypy_status_free(
      EXPECT_CODE(manypy_batcher_options_set_batch_dim(o, -1), MANYPY_ERR_OUT_OF_RANGE));
  capi_check_invalid_argument(manypy_batcher_options_set_name(o, NULL), "null name",
                              "manypy_batcher_options_set_name", "name", __FILE__, __LINE__);
  manypy_batcher_options_free(o);
  manypy_batcher_free(NULL);
  manypy_batcher_options_free(NULL);
  assert_null(out);
  manypy_value_free(args);
  manypy_batcher_free(b);
}

static void test_stopped_requests_are_dropped_while_they_wait(void** state) {
  (void)state;
  /* Requests with a 20 ms timeout, or a token cancelled at once, in a
   * batcher that waits 5 s to fill: each is dropped as its stop comes,
   * long before its batch would form. */
  manypy_batcher* b = make_batcher(g.model, NULL, 8, 5 * 1000 * 1000);
  manypy_call_options* timeout = CALL_OPTIONS(MANYPY_ANY_INTERPRETER, 20);
  outcome out;
  slot slots[3];
  double t0 = capi_now();
  submit_rows(b, 3, timeout, &out, slots);
  double waited = capi_now() - t0;
  for (int k = 0; k < 3; ++k) {
    assert_int_equal(manypy_status_code(out.status[k]), MANYPY_ERR_DEADLINE_EXCEEDED);
    ASSERT_CONTAINS(manypy_status_message(out.status[k]), "while it waited for its batch");
  }
  outcome_free(&out, 3);
  print_message("20 ms timeouts in a 5 s batcher completed after %.0f ms\n", waited * 1e3);
  assert_true(waited < 2.5);

  manypy_cancel_token* token = manypy_cancel_token_new();
  manypy_call_options* cancellable = manypy_call_options_new();
  ASSERT_OK(manypy_call_options_set_cancel_token(cancellable, token));
  memset(&out, 0, sizeof out);
  pthread_mutex_init(&out.mu, NULL);
  pthread_cond_init(&out.cv, NULL);
  for (int k = 0; k < 2; ++k) {
    slots[k] = (slot){&out, k};
    manypy_value* args = one_row(k);
    ASSERT_OK(manypy_batcher_call_async(b, args, NULL, cancellable, outcome_done, &slots[k]));
    manypy_value_free(args);
  }
  t0 = capi_now();
  manypy_cancel_token_cancel(token);
  outcome_wait(&out, 2);
  assert_true(capi_now() - t0 < 2.5);
  for (int k = 0; k < 2; ++k) {
    assert_int_equal(manypy_status_code(out.status[k]), MANYPY_ERR_CANCELLED);
  }
  outcome_free(&out, 2);
  manypy_call_options_free(cancellable);
  manypy_cancel_token_free(token);
  manypy_call_options_free(timeout);
  manypy_batcher_free(b);
}

static void test_freeing_sends_waiting_requests_at_once(void** state) {
  (void)state;
  /* Requests that would wait 60 s for their batch to fill run when the
   * batcher is freed, and complete; the object may go first. */
  manypy_object* model = LOAD_MODEL(g.package);
  manypy_batcher* b = make_batcher(model, NULL, 64, 60 * 1000 * 1000);
  manypy_object_free(model);
  outcome o;
  memset(&o, 0, sizeof o);
  pthread_mutex_init(&o.mu, NULL);
  pthread_cond_init(&o.cv, NULL);
  slot slots[5];
  for (int k = 0; k < 5; ++k) {
    slots[k] = (slot){&o, k};
    manypy_value* args = one_row(k);
    ASSERT_OK(manypy_batcher_call_async(b, args, NULL, NULL, outcome_done, &slots[k]));
    manypy_value_free(args);
  }
  double t0 = capi_now();
  manypy_batcher_free(b);
  outcome_wait(&o, 5);
  assert_true(capi_now() - t0 < 30);
  for (int k = 0; k < 5; ++k) {
    float want[2] = {(float)k * 2 + 1, (float)k * 2 + 1};
    int64_t shape[2] = {1, 2};
    ASSERT_F32_TENSOR(o.result[k], 2, shape, want, 0, "forward after the batcher was freed");
  }
  outcome_free(&o, 5);
}

static void test_batch_sizes_reach_prometheus(void** state) {
  (void)state;
  manypy_profiler* profiler = NULL;
  ASSERT_OK(manypy_profiler_start(1.0, &profiler));
  manypy_batcher_options* options = manypy_batcher_options_new();
  /* Series are process-wide: one name per mode. */
  char name[64];
  snprintf(name, sizeof name, "prometheus_test_%s", g_mode);
  ASSERT_OK(manypy_batcher_options_set_name(options, name));
  ASSERT_OK(manypy_batcher_options_set_max_batch(options, 4));
  ASSERT_OK(manypy_batcher_options_set_max_wait_us(options, 10 * 1000 * 1000));
  manypy_batcher* b = NULL;
  ASSERT_OK(manypy_batcher_new(g.model, "rows", options, &b));
  manypy_batcher_options_free(options);
  outcome o;
  slot slots[4];
  submit_rows(b, 4, NULL, &o, slots);
  outcome_free(&o, 4);
  manypy_value* text = NULL;
  ASSERT_OK(manypy_profiler_prometheus(profiler, &text));
  const char* s = NULL;
  size_t length = 0;
  ASSERT_OK(manypy_value_get_string(text, &s, &length));
  ASSERT_CONTAINS(s, "# TYPE manypy_batch_size histogram");
  char line[160];
  snprintf(line, sizeof line, "manypy_batch_size_bucket{batcher=\"%s\",le=\"2\"} 0\n", name);
  ASSERT_CONTAINS(s, line);
  snprintf(line, sizeof line, "manypy_batch_size_bucket{batcher=\"%s\",le=\"4\"} 1\n", name);
  ASSERT_CONTAINS(s, line);
  snprintf(line, sizeof line, "manypy_batch_size_count{batcher=\"%s\"} 1\n", name);
  ASSERT_CONTAINS(s, line);
  snprintf(line, sizeof line, "manypy_batch_size_sum{batcher=\"%s\"} 4\n", name);
  ASSERT_CONTAINS(s, line);
  manypy_value_free(text);
  manypy_batcher_free(b);
  manypy_profiler_free(profiler);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_concurrent_requests_share_batches),
      cmocka_unit_test(test_each_request_gets_its_own_rows),
      cmocka_unit_test(test_different_shapes_are_not_stacked),
      cmocka_unit_test(test_an_error_fails_every_request_of_its_batch),
      cmocka_unit_test(test_fewer_rows_than_the_batch_fail_it),
      cmocka_unit_test(test_tuple_and_dict_results_are_split),
      cmocka_unit_test(test_other_arguments_must_match_to_share),
      cmocka_unit_test(test_dtypes_must_match_to_share),
      cmocka_unit_test(test_requests_the_batcher_cannot_split_are_refused),
      cmocka_unit_test(test_stopped_requests_are_dropped_while_they_wait),
      cmocka_unit_test(test_freeing_sends_waiting_requests_at_once),
      cmocka_unit_test(test_batch_sizes_reach_prometheus),
  };
  int failed = cmocka_run_group_tests_name("direct", tests, setup_direct, teardown);
  failed += cmocka_run_group_tests_name("handoff", tests, setup_handoff, teardown);
  return failed;
}
