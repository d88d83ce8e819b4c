/*
 * 100,000 asynchronous calls from 8 threads, with random deadlines and
 * cancellations: every accepted call's callback runs exactly once, with
 * the call's own result or a stop's status; every refused call's never
 * runs. In DIRECT mode, then HANDOFF (a pool of 2 interpreters each).
 *
 * MANYPY_ASYNC_STRESS_CALLS (default 100000) and MANYPY_ASYNC_STRESS_SEED
 * (default: the time) change the run; the seed is printed.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capi_test_support.h"

#define THREADS 8

enum bound { UNBOUNDED, TIMEOUT, CANCEL_SOON, CANCEL_AT_ONCE };

typedef struct call {
  atomic_int callbacks;
  int accepted;
  enum bound bound;
  float value;
  /* Set by the callback; read after all completed. */
  manypy_code code;
  int result_ok;
} call;

static call* g_calls;
static size_t g_count;
static unsigned g_seed;
static capi_fixture g;
static atomic_long g_pending;

static void on_done(void* user_data, manypy_value* result, manypy_status* status) {
  call* c = user_data;
  atomic_fetch_add(&c->callbacks, 1);
  c->code = manypy_status_code(status);
  if (result != NULL) {
    DLManagedTensor* t = NULL;
    manypy_status* s = manypy_value_get_tensor(result, &t);
    if (s == NULL) {
      const float* x = (const float*)((const char*)t->dl_tensor.data + t->dl_tensor.byte_offset);
      c->result_ok = t->dl_tensor.ndim == 2 && t->dl_tensor.shape[0] == 1 &&
                     t->dl_tensor.shape[1] == 2 && x[0] == c->value * 2 + 1 &&
                     x[1] == (c->value + 1) * 2 + 1;
      t->deleter(t);
    }
    manypy_status_free(s);
  }
  manypy_value_free(result);
  manypy_status_free(status);
  atomic_fetch_sub(&g_pending, 1);
}

typedef struct worker {
  size_t first, end;
  unsigned seed;
  char error[256];
} worker;

static void* submit_all(void* arg) {
  worker* w = arg;
  unsigned rng = w->seed;
  manypy_cancel_token* soon[4] = {0}; /* cancelled a few calls later */
  size_t soon_at[4] = {0};
  for (size_t k = w->first; k < w->end; ++k) {
    call* c = &g_calls[k];
    c->value = (float)(k % 100000);
    int r = rand_r(&rng) % 100;
    c->bound = r < 55 ? UNBOUNDED : r < 75 ? TIMEOUT : r < 90 ? CANCEL_SOON : CANCEL_AT_ONCE;
    manypy_call_options* o = manypy_call_options_new();
    manypy_cancel_token* token = NULL;
    if (c->bound == TIMEOUT) {
      /* 1 us to 50 ms: some pass in the queue, some while running, some
       * not at all. */
      manypy_status_free(manypy_call_options_set_timeout(o, 1000 + rand_r(&rng) % 50000000));
    } else if (c->bound != UNBOUNDED) {
      token = manypy_cancel_token_new();
      manypy_status_free(manypy_call_options_set_cancel_token(o, token));
    }
    float x[2] = {c->value, c->value + 1};
    int64_t shape[2] = {1, 2};
    manypy_value* t = NULL;
    manypy_value* args = manypy_value_new_tuple();
    manypy_status* s = manypy_value_new_tensor_from_buffer(
        x, sizeof x, (DLDataType){kDLFloat, 32, 1}, 2, shape, NULL, 1, NULL, NULL, &t);
    if (s == NULL) s = manypy_value_append(args, t);
    if (s != NULL) {
      snprintf(w->error, sizeof w->error, "building args: %s", manypy_status_message(s));
      manypy_status_free(s);
      manypy_value_free(args);
      manypy_call_options_free(o);
      manypy_cancel_token_free(token);
      return NULL;
    }
    atomic_fetch_add(&g_pending, 1);
    s = manypy_object_call_async(g.model, NULL, args, NULL, o, on_done, c);
    if (s == NULL) {
      c->accepted = 1;
    } else {
      atomic_fetch_sub(&g_pending, 1);
      /* Only a stop already due may refuse a call here. */
      manypy_code code = manypy_status_code(s);
      if (!((code == MANYPY_ERR_DEADLINE_EXCEEDED && c->bound == TIMEOUT))) {
        snprintf(w->error, sizeof w->error, "call %zu refused: %s: %s", k, manypy_code_name(code),
                 manypy_status_message(s));
      }
      manypy_status_free(s);
    }
    manypy_value_free(args);
    manypy_call_options_free(o);
    if (c->bound == CANCEL_AT_ONCE) {
      manypy_cancel_token_cancel(token);
      manypy_cancel_token_free(token);
    } else if (c->bound == CANCEL_SOON) {
      /* Cancelled 1 to 40 calls later (the calls hold the token). */
      size_t slot = k % 4;
      if (soon[slot] != NULL) {
        manypy_cancel_token_cancel(soon[slot]);
        manypy_cancel_token_free(soon[slot]);
      }
      soon[slot] = token;
      soon_at[slot] = k + 1 + (size_t)(rand_r(&rng) % 40);
    }
    for (size_t slot = 0; slot < 4; ++slot) {
      if (soon[slot] != NULL && k >= soon_at[slot]) {
        manypy_cancel_token_cancel(soon[slot]);
        manypy_cancel_token_free(soon[slot]);
        soon[slot] = NULL;
      }
    }
    if (w->error[0] != '\0') break;
  }
  for (size_t slot = 0; slot < 4; ++slot) {
    manypy_cancel_token_cancel(soon[slot]);
    manypy_cancel_token_free(soon[slot]);
  }
  return NULL;
}

static void run(manypy_thread_mode mode) {
  assert_int_equal(capi_fixture_setup(&g, 2, mode, "batching.pt"), 0);
  g_calls = calloc(g_count, sizeof *g_calls);
  assert_non_null(g_calls);
  worker workers[THREADS];
  pthread_t threads[THREADS];
  double t0 = capi_now();
  for (int k = 0; k < THREADS; ++k) {
    memset(&workers[k], 0, sizeof workers[k]);
    workers[k].first = g_count * (size_t)k / THREADS;
    workers[k].end = g_count * (size_t)(k + 1) / THREADS;
    workers[k].seed = g_seed + (unsigned)k * 7919u + (unsigned)mode;
    pthread_create(&threads[k], NULL, submit_all, &workers[k]);
  }
  for (int k = 0; k < THREADS; ++k) pthread_join(threads[k], NULL);
  for (int k = 0; k < THREADS; ++k) {
    if (workers[k].error[0] != '\0') fail_msg("thread %d: %s", k, workers[k].error);
  }
  /* Every accepted call completes (a lost callback fails here, not hangs). */
  for (int waited = 0; atomic_load(&g_pending) > 0 && waited < 120000; waited += 10) {
    struct timespec pause = {0, 10 * 1000 * 1000};
    nanosleep(&pause, NULL);
  }
  double seconds = capi_now() - t0;
  assert_int_equal(atomic_load(&g_pending), 0);
  size_t accepted = 0, ok = 0, deadline = 0, cancelled = 0;
  for (size_t k = 0; k < g_count; ++k) {
    call* c = &g_calls[k];
    int n = atomic_load(&c->callbacks);
    if (!c->accepted) {
      if (n != 0) fail_msg("refused call %zu called back %d time(s)", k, n);
      continue;
    }
    ++accepted;
    if (n != 1) fail_msg("call %zu called back %d time(s)", k, n);
    switch (c->code) {
      case MANYPY_OK:
        if (!c->result_ok)
          fail_msg("call %zu (x = %g) got another call's or a wrong result", k, c->value);
        ++ok;
        break;
      case MANYPY_ERR_DEADLINE_EXCEEDED:
        if (c->bound != TIMEOUT) fail_msg("call %zu without a deadline exceeded one", k);
        ++deadline;
        break;
      case MANYPY_ERR_CANCELLED:
        if (c->bound != CANCEL_SOON && c->bound != CANCEL_AT_ONCE) {
          fail_msg("call %zu without a token was cancelled", k);
        }
        ++cancelled;
        break;
      default:
        fail_msg("call %zu failed with %s", k, manypy_code_name(c->code));
    }
  }
  print_message(
      "%s: %zu calls in %.1f s: %zu accepted (%zu ok, %zu deadline exceeded, %zu "
      "cancelled), %zu refused at submission\n",
      mode == MANYPY_THREAD_MODE_DIRECT ? "DIRECT" : "HANDOFF", g_count, seconds, accepted, ok,
      deadline, cancelled, g_count - accepted);
  /* Each kind of outcome happened: the test exercised what it claims. */
  assert_true(ok > g_count / 2);
  assert_true(cancelled > 0);
  assert_true(deadline > 0);
  assert_int_equal(manypy_pool_in_flight(g.pool), 0);
  assert_int_equal(manypy_pool_queued(g.pool), 0);
  free(g_calls);
  g_calls = NULL;
  capi_fixture_teardown(&g);
}

static void test_direct(void** state) {
  (void)state;
  run(MANYPY_THREAD_MODE_DIRECT);
}

static void test_handoff(void** state) {
  (void)state;
  run(MANYPY_THREAD_MODE_HANDOFF);
}

int main(void) {
  const char* count = getenv("MANYPY_ASYNC_STRESS_CALLS");
  g_count = count ? (size_t)strtoull(count, NULL, 10) : 100000;
  const char* seed = getenv("MANYPY_ASYNC_STRESS_SEED");
  g_seed = seed ? (unsigned)strtoul(seed, NULL, 10) : (unsigned)time(NULL);
  printf("MANYPY_ASYNC_STRESS_SEED=%u MANYPY_ASYNC_STRESS_CALLS=%zu\n", g_seed, g_count);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_direct),
      cmocka_unit_test(test_handoff),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
