/*
 * Model hot swap under load (docs/deploy.md, "Model hot swap"): the server
 * keeps the current version's object under a lock; each request shares it
 * (manypy_object_share) under the lock and calls outside it; every 200 ms a
 * swap loads the other version beside it, warms it on every interpreter,
 * switches to it under the lock and frees the old handle, which unloads
 * once the requests still holding it end. 8 callers, 10 s: about 50 swaps,
 * each with calls in flight on both versions (the 30 s it ran before, 150
 * swaps, met no case the first 50 did not). Checked:
 * - no call fails;
 * - every result comes from the version the call was sent to (the Versioned
 *   model fills its output with its version number);
 * - a swap to an archive that fails to load leaves the old version serving;
 * - memory returns to the one-version level after the last swap: the
 *   process's private memory (Private_Clean + Private_Dirty) ends within
 *   half a version's weights (32 MiB each) of what it was with one version
 *   loaded, and a second version loaded beside the first shows as at least
 *   that much, so the measure can see one version left behind.
 * MANYPY_HOT_SWAP_SECONDS overrides the 10 s for a longer run by hand.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capi_test_support.h"

#define CALLERS 8
#define INTERPRETERS 2
#define SWAP_EVERY_MS 200
#define VERSION_BYTES (32LL * 1024 * 1024)
#define ELEMENTS 4

static double mib(long long bytes) { return (double)bytes / (1024.0 * 1024.0); }

static void sleep_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

/* What the server serves now. */
typedef struct {
  pthread_mutex_t mu;
  manypy_object* current; /* under mu */
  int64_t version;        /* under mu */
  atomic_int stop;
  /* Outcomes, over every caller. */
  atomic_long calls, failed, wrong_version;
  char first_failure[512]; /* under mu */
} server;

typedef struct {
  server* s;
  manypy_value* args; /* this caller's (x,), zeros */
} caller;

static void note_failure(server* s, const char* what, manypy_status* status) {
  atomic_fetch_add(&s->failed, 1);
  pthread_mutex_lock(&s->mu);
  if (s->first_failure[0] == '\0') {
    snprintf(s->first_failure, sizeof s->first_failure, "%s: %s: %s", what,
             manypy_code_name(manypy_status_code(status)), manypy_status_message(status));
  }
  pthread_mutex_unlock(&s->mu);
  manypy_status_free(status);
}

/* The version a result says it came from, or -1 if it is not a float32
 * tensor of ELEMENTS equal values. */
static int64_t version_of(const manypy_value* result) {
  DLManagedTensor* t = NULL;
  if (manypy_value_get_tensor(result, &t) != NULL) return -1;
  int64_t v = -1;
  const DLTensor* d = &t->dl_tensor;
  if (d->dtype.code == kDLFloat && d->dtype.bits == 32 && d->ndim == 1 && d->shape[0] == ELEMENTS) {
    const float* x = (const float*)((const char*)d->data + d->byte_offset);
    v = (int64_t)x[0];
    for (int k = 1; k < ELEMENTS; ++k) {
      if (x[k] != x[0]) v = -1;
    }
  }
  t->deleter(t);
  return v;
}

static void* serve(void* arg) {
  caller* c = arg;
  server* s = c->s;
  manypy_call_options* options = manypy_call_options_new();
  manypy_status* st = manypy_call_options_set_context(options, "versioned", "");
  if (st != NULL) {
    note_failure(s, "set_context", st);
    return NULL;
  }
  while (!atomic_load(&s->stop)) {
    pthread_mutex_lock(&s->mu);
    manypy_object* mine = NULL;
    st = manypy_object_share(s->current, &mine);
    const int64_t sent_to = s->version;
    pthread_mutex_unlock(&s->mu);
    if (st != NULL) {
      note_failure(s, "manypy_object_share", st);
      continue;
    }
    manypy_value* result = NULL;
    st = manypy_object_call(mine, NULL, c->args, NULL, options, &result);
    manypy_object_free(mine);
    atomic_fetch_add(&s->calls, 1);
    if (st != NULL) {
      note_failure(s, "forward", st);
      continue;
    }
    if (version_of(result) != sent_to) atomic_fetch_add(&s->wrong_version, 1);
    manypy_value_free(result);
  }
  manypy_call_options_free(options);
  return NULL;
}

/* Loads version `number` and calls version() on every interpreter, so that
 * its replicas are loaded before any request reaches it. */
static manypy_object* load_version(manypy_pool* pool, int64_t number) {
  char name[32];
  snprintf(name, sizeof name, "version_%lld.pt", (long long)number);
  manypy_package* package = LOAD_PACKAGE(pool, name);
  manypy_object* model = LOAD_MODEL(package);
  manypy_package_free(package); /* the object keeps it */
  for (int32_t i = 0; i < (int32_t)manypy_pool_size(pool); ++i) {
    manypy_call_options* on_i = CALL_OPTIONS(i, 0);
    manypy_value* v = NULL;
    ASSERT_OK(manypy_object_call(model, "version", NULL, NULL, on_i, &v));
    int64_t got = 0;
    ASSERT_OK(manypy_value_get_int64(v, &got));
    assert_int_equal(got, number);
    manypy_value_free(v);
    manypy_call_options_free(on_i);
  }
  return model;
}

static void start_callers(server* s, caller* callers, pthread_t* threads) {
  atomic_store(&s->stop, 0);
  for (int i = 0; i < CALLERS; ++i) {
    assert_int_equal(pthread_create(&threads[i], NULL, serve, &callers[i]), 0);
  }
}

static void stop_callers(server* s, pthread_t* threads) {
  atomic_store(&s->stop, 1);
  for (int i = 0; i < CALLERS; ++i) pthread_join(threads[i], NULL);
}

static void test_hot_swap_under_load(void** state) {
  (void)state;
  const char* env = getenv("MANYPY_HOT_SWAP_SECONDS");
  const double seconds = env ? atof(env) : 10.0;
  manypy_pool* pool = MAKE_POOL(INTERPRETERS, MANYPY_THREAD_MODE_DIRECT);
  server s;
  memset(&s, 0, sizeof s);
  pthread_mutex_init(&s.mu, NULL);
  s.current = load_version(pool, 1);
  s.version = 1;

  caller callers[CALLERS];
  static const float zeros[ELEMENTS] = {0};
  const int64_t shape[1] = {ELEMENTS};
  for (int i = 0; i < CALLERS; ++i) {
    manypy_value* items[1] = {F32_TENSOR(zeros, 1, shape)};
    callers[i] = (caller){&s, LIST_OF(1, items)};
  }
  pthread_t threads[CALLERS];

  /* The one-version level: after a warm-up under load, quiescent. */
  start_callers(&s, callers, threads);
  sleep_ms(1000);
  stop_callers(&s, threads);
  const long long one = capi_private_bytes();
  /* A second version beside it is visible to the measure. */
  manypy_object* beside = load_version(pool, 2);
  const long long two = capi_private_bytes();
  manypy_object_free(beside);
  const long long back = capi_private_bytes();
  fprintf(stderr, "  private memory: one version %.1f MiB, two %.1f MiB (+%.1f), back %+.1f\n",
          mib(one), mib(two), mib(two - one), mib(back - one));
  assert_true(two - one >= VERSION_BYTES / 2);
  assert_true(back - one < VERSION_BYTES / 2);

  /* A broken copy of version 2 (cut short), for the failed swaps. */
  size_t size = 0;
  void* bytes = capi_read_whole_file(capi_archive("version_2.pt"), &size, __FILE__, __LINE__);
  char broken[512];
  snprintf(broken, sizeof broken, "%s/version_2_truncated.pt",
           capi_temp_dir("hot_swap", __FILE__, __LINE__));
  capi_write_file(broken, bytes, size / 2, 1, __FILE__, __LINE__);
  free(bytes);

  start_callers(&s, callers, threads);
  const double t0 = capi_now();
  int swaps = 0, refused = 0;
  double longest = 0;
  /* A swap starts every 200 ms (at once when the last one took longer). */
  double next = t0;
  while (capi_now() - t0 < seconds) {
    next += SWAP_EVERY_MS / 1000.0;
    const double wait = next - capi_now();
    if (wait > 0) sleep_ms((long)(wait * 1000));
    const double began = capi_now();
    if (swaps % 10 == 9) {
      /* A swap to an archive that does not load: refused, the old version
       * goes on serving. */
      manypy_package* p = NULL;
      manypy_status* st = manypy_package_load_file(pool, broken, &p);
      assert_null(p);
      st = EXPECT_CODE(st, MANYPY_ERR_BAD_ARCHIVE);
      manypy_status_free(st);
      ++refused;
    }
    const int64_t next = 3 - s.version;
    manypy_object* fresh = load_version(pool, next);
    pthread_mutex_lock(&s.mu);
    manypy_object* old = s.current;
    s.current = fresh;
    s.version = next;
    pthread_mutex_unlock(&s.mu);
    manypy_object_free(old); /* unloads when the calls holding it end */
    ++swaps;
    if (capi_now() - began > longest) longest = capi_now() - began;
  }
  stop_callers(&s, threads);
  const long long end = capi_private_bytes();
  const long calls = atomic_load(&s.calls);
  fprintf(stderr,
          "  %.1f s: %d swaps (longest %.0f ms), %d refused, %ld calls, %ld failed, "
          "%ld from the wrong version; private memory after the last swap %+.1f MiB\n",
          capi_now() - t0, swaps, longest * 1000, refused, calls, atomic_load(&s.failed),
          atomic_load(&s.wrong_version), mib(end - one));
  if (s.first_failure[0] != '\0') fprintf(stderr, "  first failure: %s\n", s.first_failure);
  assert_int_equal(atomic_load(&s.failed), 0);
  assert_int_equal(atomic_load(&s.wrong_version), 0);
  assert_true(swaps >= (int)(seconds * 1000 / SWAP_EVERY_MS / 2));
  /* Swaps are not what the calls wait for: each caller made many calls
   * per swap. */
  assert_true(calls >= 100 * swaps);
  assert_true(end - one < VERSION_BYTES / 2);

  /* Every call was counted as a request of its model. */
  manypy_pool_stats stats;
  memset(&stats, 0, sizeof stats);
  stats.struct_size = sizeof stats;
  ASSERT_OK(manypy_pool_get_stats(pool, &stats));
  assert_int_equal(stats.completed[MANYPY_OK] >= (uint64_t)calls, 1);
  assert_int_equal(stats.in_flight, 0);

  for (int i = 0; i < CALLERS; ++i) manypy_value_free(callers[i].args);
  manypy_object_free(s.current);
  manypy_pool_destroy(pool);
  pthread_mutex_destroy(&s.mu);
  capi_remove_temp_dirs();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hot_swap_under_load),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
