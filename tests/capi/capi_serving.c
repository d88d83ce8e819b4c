/*
 * The serving lifecycle (manypy.h, since 0.3): a pool that serves from its
 * first ready interpreter, health (manypy_pool_get_stats), request metrics
 * and their Prometheus text, graceful drain and MANYPY_ERR_DRAINING,
 * resize, growth on long waits, and manypy_object_share.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capi_test_support.h"

static manypy_pool_stats stats_of(manypy_pool* pool) {
  manypy_pool_stats s;
  memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  ASSERT_OK(manypy_pool_get_stats(pool, &s));
  return s;
}

static manypy_pool* make_pool(size_t interpreters, int serve_early, size_t max,
                              manypy_thread_mode mode, const char* name) {
  manypy_pool_options* options = manypy_pool_options_new();
  assert_non_null(options);
  ASSERT_OK(manypy_pool_options_set_interpreters(options, interpreters));
  ASSERT_OK(manypy_pool_options_set_serve_early(options, serve_early));
  ASSERT_OK(manypy_pool_options_set_thread_mode(options, mode));
  if (max) ASSERT_OK(manypy_pool_options_set_max_interpreters(options, max));
  if (name) ASSERT_OK(manypy_pool_options_set_name(options, name));
  manypy_pool* pool = NULL;
  ASSERT_OK(manypy_pool_create(options, &pool));
  manypy_pool_options_free(options);
  return pool;
}

/* Runs `source` with a model id and an optional timeout (ms; 0: none). */
static manypy_status* exec_as(manypy_pool* pool, int32_t interpreter, const char* model,
                              int64_t timeout_ms, const char* source) {
  manypy_call_options* options = CALL_OPTIONS(interpreter, timeout_ms);
  ASSERT_OK(manypy_call_options_set_context(options, model, ""));
  manypy_status* s = manypy_pool_exec_with_options(pool, source, options);
  manypy_call_options_free(options);
  return s;
}

/* ---- serve early ------------------------------------------------------- */

/* First: interpreters started here are fresh, not reused from an earlier
 * test's pools. */
static void test_serve_early(void** state) {
  (void)state;
  double t0 = capi_now();
  manypy_pool* pool = make_pool(3, 1, 0, MANYPY_THREAD_MODE_DIRECT, NULL);
  double first = capi_now() - t0;
  manypy_pool_stats s = stats_of(pool);
  fprintf(stderr, "  serving after %.2f s: %zu ready, %zu starting\n", first, s.ready, s.starting);
  assert_int_equal(s.interpreters, 3);
  assert_int_equal(manypy_pool_size(pool), 3);
  assert_true(s.ready + s.busy >= 1);
  assert_int_equal(s.ready + s.busy + s.starting + s.broken + s.lost, 3);
  assert_int_equal(s.broken, 0);
  assert_int_equal(s.lost, 0);
  /* A package loaded now, before the others have started, is usable in
   * each once it has: a call pinned to the last waits for its start. */
  manypy_package* package = LOAD_PACKAGE(pool, "version_1.pt");
  manypy_object* model = LOAD_MODEL(package);
  manypy_call_options* pinned = CALL_OPTIONS(2, 60000);
  manypy_value* version = NULL;
  ASSERT_OK(manypy_object_call(model, "version", NULL, NULL, pinned, &version));
  int64_t number = 0;
  ASSERT_OK(manypy_value_get_int64(version, &number));
  assert_int_equal(number, 1);
  manypy_value_free(version);
  manypy_call_options_free(pinned);
  while (stats_of(pool).starting > 0) usleep(20000);
  fprintf(stderr, "  all serving after %.2f s\n", capi_now() - t0);
  s = stats_of(pool);
  assert_int_equal(s.ready + s.busy, 3);
  for (int32_t i = 0; i < 3; ++i) assert_null(manypy_pool_check_interpreter(pool, i));
  manypy_object_free(model);
  manypy_package_free(package);
  manypy_pool_destroy(pool);
}

/* Destroyed at once, while interpreters still start: waits for them and
 * gives them back. */
static void test_serve_early_destroyed_at_once(void** state) {
  (void)state;
  manypy_pool* pool = make_pool(2, 1, 0, MANYPY_THREAD_MODE_HANDOFF, NULL);
  manypy_pool_destroy(pool);
  pool = make_pool(2, 0, 0, MANYPY_THREAD_MODE_DIRECT, NULL);
  assert_int_equal(stats_of(pool).ready, 2);
  manypy_pool_destroy(pool);
}

/* ---- stats and metrics ------------------------------------------------- */

static void test_stats_and_metrics(void** state) {
  (void)state;
  manypy_pool* pool = make_pool(2, 0, 0, MANYPY_THREAD_MODE_DIRECT, "svc \"a\"");
  manypy_pool_stats s;
  memset(&s, 0, sizeof s);
  s.struct_size = 8;
  manypy_status* st = EXPECT_CODE(manypy_pool_get_stats(pool, &s), MANYPY_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(manypy_status_message(st), "struct_size");
  manypy_status_free(st);
  ASSERT_INVALID_ARG(manypy_pool_get_stats(NULL, &s), "manypy_pool_get_stats", "pool");
  ASSERT_INVALID_ARG(manypy_pool_get_stats(pool, NULL), "manypy_pool_get_stats", "out");
  /* 0.3's struct, which ends before `lost`: accepted, and `lost` (here past
   * its end) left alone. */
  memset(&s, 0, sizeof s);
  s.struct_size = offsetof(manypy_pool_stats, lost);
  s.lost = 77;
  ASSERT_OK(manypy_pool_get_stats(pool, &s));
  assert_int_equal(s.interpreters, 2);
  assert_int_equal(s.lost, 77);

  s = stats_of(pool);
  assert_int_equal(s.interpreters, 2);
  assert_int_equal(s.ready, 2);
  assert_int_equal(s.in_flight + s.queued + s.draining, 0);
  for (int i = 0; i < 3; ++i) ASSERT_OK(exec_as(pool, MANYPY_ANY_INTERPRETER, "m1", 0, "x = 1"));
  ASSERT_CODE(exec_as(pool, 0, "m1", 0, "raise ValueError('no')"), MANYPY_ERR_PYTHON);
  ASSERT_CODE(exec_as(pool, 7, "m1", 0, "x = 1"), MANYPY_ERR_OUT_OF_RANGE);
  ASSERT_OK(exec_as(pool, 1, "m2", 0, "y = 2"));
  s = stats_of(pool);
  assert_int_equal(s.completed[MANYPY_OK], 4);
  assert_int_equal(s.completed[MANYPY_ERR_PYTHON], 1);
  assert_int_equal(s.completed[MANYPY_ERR_OUT_OF_RANGE], 1);

  manypy_request_metrics* metrics = NULL;
  size_t count = 0;
  ASSERT_OK(manypy_pool_request_metrics(pool, &metrics, &count));
  assert_int_equal(count, 2);
  int seen = 0;
  for (size_t k = 0; k < count; ++k) {
    const manypy_request_metrics* m = manypy_request_metrics_at(metrics, k);
    assert_int_equal(m->struct_size, sizeof(manypy_request_metrics));
    assert_true(m->num_buckets > 4);
    for (size_t b = 1; b < m->num_buckets; ++b) {
      assert_true(m->bucket_bounds[b] > m->bucket_bounds[b - 1]);
      assert_true(m->request_buckets[b] >= m->request_buckets[b - 1]);
    }
    if (strcmp(m->model, "m1") == 0) {
      seen |= 1;
      assert_int_equal(m->completed[MANYPY_OK], 3);
      assert_int_equal(m->completed[MANYPY_ERR_PYTHON], 1);
      /* The refusal has no duration: 4 requests timed, 4 queue times. */
      assert_int_equal(m->request_count, 4);
      assert_int_equal(m->queue_count, 4);
      assert_true(m->request_seconds_sum > 0 && m->request_seconds_sum < 10);
      assert_true(m->request_buckets[m->num_buckets - 1] <= 4);
    } else {
      assert_string_equal(m->model, "m2");
      seen |= 2;
      assert_int_equal(m->completed[MANYPY_OK], 1);
    }
  }
  assert_int_equal(seen, 3);
  manypy_request_metrics_free(metrics, count);
  manypy_request_metrics_free(NULL, 0);

  manypy_value* text = NULL;
  ASSERT_OK(manypy_pool_prometheus(pool, &text));
  const char* body = NULL;
  size_t length = 0;
  ASSERT_OK(manypy_value_get_string(text, &body, &length));
  ASSERT_CONTAINS(body, "# TYPE manypy_requests_total counter\n");
  ASSERT_CONTAINS(body,
                  "manypy_requests_total{pool=\"svc \\\"a\\\"\",model=\"m1\",code=\"ok\"} 3\n");
  ASSERT_CONTAINS(body,
                  "manypy_requests_total{pool=\"svc \\\"a\\\"\",model=\"m1\",code=\"python\"} 1\n");
  ASSERT_CONTAINS(
      body, "manypy_requests_total{pool=\"svc \\\"a\\\"\",model=\"m1\",code=\"out_of_range\"} 1\n");
  ASSERT_CONTAINS(body, "# TYPE manypy_request_duration_seconds histogram\n");
  ASSERT_CONTAINS(body,
                  "manypy_request_duration_seconds_bucket{pool=\"svc "
                  "\\\"a\\\"\",model=\"m1\",le=\"+Inf\"} 4\n");
  ASSERT_CONTAINS(body,
                  "manypy_queue_duration_seconds_count{pool=\"svc \\\"a\\\"\",model=\"m2\"} 1\n");
  ASSERT_CONTAINS(body, "manypy_inflight_requests{pool=\"svc \\\"a\\\"\"} 0\n");
  ASSERT_CONTAINS(body, "manypy_queued_requests{pool=\"svc \\\"a\\\"\"} 0\n");
  ASSERT_CONTAINS(body, "manypy_interpreters{pool=\"svc \\\"a\\\"\",state=\"ready\"} 2\n");
  ASSERT_CONTAINS(body, "manypy_interpreters{pool=\"svc \\\"a\\\"\",state=\"broken\"} 0\n");
  ASSERT_CONTAINS(body, "manypy_interpreters{pool=\"svc \\\"a\\\"\",state=\"lost\"} 0\n");
  ASSERT_CONTAINS(body, "manypy_draining{pool=\"svc \\\"a\\\"\"} 0\n");
  /* prometheus_client's own parser takes it, with the types and values
   * above (run in interpreter 0; the text goes through a file). */
  char path[128], code[2048];
  snprintf(path, sizeof path, "/tmp/manypy-pool-prom-%d.txt", (int)getpid());
  FILE* f = fopen(path, "w");
  assert_non_null(f);
  fputs(body, f);
  fclose(f);
  manypy_value_free(text);
  snprintf(code, sizeof code,
           "from prometheus_client.parser import text_string_to_metric_families\n"
           "fams = {f.name: f for f in text_string_to_metric_families(open('%s').read())}\n"
           "def value(fam, suffix, **labels):\n"
           "    return [s.value for s in fams[fam].samples if s.name == fam + suffix\n"
           "            and all(s.labels.get(k) == v for k, v in labels.items())]\n"
           "prom_ok = (fams['manypy_requests'].type == 'counter'\n"
           "    and value('manypy_requests', '_total', model='m1', code='ok') == [3.0]\n"
           "    and fams['manypy_request_duration_seconds'].type == 'histogram'\n"
           "    and value('manypy_request_duration_seconds', '_count', model='m1') == [4.0]\n"
           "    and fams['manypy_queue_duration_seconds'].type == 'histogram'\n"
           "    and value('manypy_interpreters', '', state='ready') == [2.0]\n"
           "    and fams['manypy_inflight_requests'].type == 'gauge'\n"
           "    and value('manypy_draining', '', pool='svc \"a\"') == [0.0])\n",
           path);
  ASSERT_OK(manypy_pool_exec(pool, 0, code));
  assert_int_equal(EVAL_BOOL(pool, 0, "prom_ok"), 1);
  unlink(path);
  manypy_pool_destroy(pool);
}

/* ---- drain --------------------------------------------------------------- */

typedef struct {
  manypy_pool* pool;
  int32_t interpreter;
  const char* source;
  manypy_status* status;
} exec_job;

static void* run_exec(void* arg) {
  exec_job* job = arg;
  job->status = exec_as(job->pool, job->interpreter, "slow", 0, job->source);
  return NULL;
}

/* Waits until the pool has `n` calls in flight. */
static void wait_in_flight(manypy_pool* pool, size_t n) {
  while (manypy_pool_in_flight(pool) < n) usleep(2000);
}

static void test_drain_finishes_calls(manypy_thread_mode mode) {
  manypy_pool* pool = make_pool(2, 0, 0, mode, NULL);
  exec_job jobs[3];
  pthread_t threads[3];
  for (int i = 0; i < 3; ++i) {
    /* Two on interpreter 0 (one waits: queued), one on 1. */
    jobs[i] = (exec_job){pool, i == 2 ? 1 : 0, "import time\ntime.sleep(0.3)", NULL};
    assert_int_equal(pthread_create(&threads[i], NULL, run_exec, &jobs[i]), 0);
  }
  wait_in_flight(pool, 3);
  size_t finished = 99, cancelled = 99;
  ASSERT_OK(
      manypy_pool_drain(pool, manypy_monotonic_ns() + 20LL * 1000000000, &finished, &cancelled));
  assert_int_equal(finished, 3);
  assert_int_equal(cancelled, 0);
  for (int i = 0; i < 3; ++i) {
    pthread_join(threads[i], NULL);
    assert_null(jobs[i].status);
  }
  /* New calls are refused, and counted. */
  manypy_status* s = EXPECT_CODE(exec_as(pool, 0, "late", 0, "x = 1"), MANYPY_ERR_DRAINING);
  ASSERT_CONTAINS(manypy_status_message(s), "draining");
  manypy_status_free(s);
  manypy_value* v = NULL;
  ASSERT_CODE(manypy_pool_eval(pool, MANYPY_ANY_INTERPRETER, "1", &v), MANYPY_ERR_DRAINING);
  assert_null(v);
  manypy_pool_stats st = stats_of(pool);
  assert_int_equal(st.draining, 1);
  assert_int_equal(st.completed[MANYPY_ERR_DRAINING], 2);
  assert_int_equal(st.completed[MANYPY_OK], 3);
  /* Twice: nothing left, nothing counted. Resize is refused. */
  ASSERT_OK(manypy_pool_drain(pool, 0, &finished, &cancelled));
  assert_int_equal(finished + cancelled, 0);
  ASSERT_OK(manypy_pool_drain(pool, 0, NULL, NULL));
  ASSERT_CODE(manypy_pool_resize(pool, 1), MANYPY_ERR_DRAINING);
  ASSERT_INVALID_ARG(manypy_pool_drain(NULL, 0, NULL, NULL), "manypy_pool_drain", "pool");
  ASSERT_CODE(manypy_pool_drain(pool, -1, NULL, NULL), MANYPY_ERR_OUT_OF_RANGE);
  manypy_pool_destroy(pool);
}

static void test_drain_finishes_calls_direct(void** state) {
  (void)state;
  test_drain_finishes_calls(MANYPY_THREAD_MODE_DIRECT);
}

static void test_drain_finishes_calls_handoff(void** state) {
  (void)state;
  test_drain_finishes_calls(MANYPY_THREAD_MODE_HANDOFF);
}

typedef struct {
  manypy_pool* pool;
  int64_t deadline;
  size_t finished, cancelled;
  manypy_status* status;
} drain_job;

static void* run_drain(void* arg) {
  drain_job* job = arg;
  job->status = manypy_pool_drain(job->pool, job->deadline, &job->finished, &job->cancelled);
  return NULL;
}

/* At its deadline a drain cancels what is left, running or queued; two
 * drains at once both wait and both count. */
static void test_drain_deadline_cancels(void** state) {
  (void)state;
  manypy_pool* pool = make_pool(1, 0, 0, MANYPY_THREAD_MODE_HANDOFF, NULL);
  exec_job jobs[2];
  pthread_t threads[2];
  for (int i = 0; i < 2; ++i) {
    jobs[i] = (exec_job){pool, 0, "import time\nwhile True:\n    time.sleep(0.01)", NULL};
    assert_int_equal(pthread_create(&threads[i], NULL, run_exec, &jobs[i]), 0);
  }
  wait_in_flight(pool, 2);
  drain_job drains[2];
  pthread_t drainers[2];
  double t0 = capi_now();
  for (int i = 0; i < 2; ++i) {
    drains[i] = (drain_job){pool, manypy_monotonic_ns() + 300LL * 1000000, 0, 0, NULL};
    assert_int_equal(pthread_create(&drainers[i], NULL, run_drain, &drains[i]), 0);
  }
  for (int i = 0; i < 2; ++i) {
    pthread_join(drainers[i], NULL);
    assert_null(drains[i].status);
    assert_int_equal(drains[i].cancelled + drains[i].finished, 2);
    assert_int_equal(drains[i].cancelled, 2);
  }
  double took = capi_now() - t0;
  fprintf(stderr, "  drained in %.2f s\n", took);
  assert_true(took < 5.0);
  for (int i = 0; i < 2; ++i) {
    pthread_join(threads[i], NULL);
    manypy_status* s = EXPECT_CODE(jobs[i].status, MANYPY_ERR_CANCELLED);
    ASSERT_CONTAINS(manypy_status_message(s), "manypy_pool_drain");
    manypy_status_free(s);
  }
  assert_int_equal(manypy_pool_in_flight(pool), 0);
  manypy_pool_destroy(pool);
}

/* A drain racing with the freeing of every handle but the pool's: the
 * objects' calls in flight still finish, and nothing is freed twice. */
static void test_drain_races_frees(void** state) {
  (void)state;
  for (int round = 0; round < 3; ++round) {
    manypy_pool* pool = make_pool(2, 0, 0, MANYPY_THREAD_MODE_DIRECT, NULL);
    manypy_package* package = LOAD_PACKAGE(pool, "version_2.pt");
    manypy_object* model = LOAD_MODEL(package);
    exec_job job = {pool, 0, "import time\ntime.sleep(0.2)", NULL};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, run_exec, &job), 0);
    wait_in_flight(pool, 1);
    drain_job drain = {pool, 0, 0, 0, NULL};
    pthread_t drainer;
    assert_int_equal(pthread_create(&drainer, NULL, run_drain, &drain), 0);
    if (round == 1) usleep(50000);
    manypy_object_free(model);
    manypy_package_free(package);
    pthread_join(drainer, NULL);
    pthread_join(thread, NULL);
    assert_null(drain.status);
    assert_null(job.status);
    assert_int_equal(drain.finished + drain.cancelled, 1);
    manypy_pool_destroy(pool);
  }
}

/* ---- resize and growth -------------------------------------------------- */

static void test_resize(void** state) {
  (void)state;
  manypy_pool* pool = make_pool(1, 0, 0, MANYPY_THREAD_MODE_DIRECT, NULL);
  manypy_package* package = LOAD_PACKAGE(pool, "version_1.pt");
  manypy_object* model = LOAD_MODEL(package);
  manypy_status* s = EXPECT_CODE(manypy_pool_resize(pool, 0), MANYPY_ERR_OUT_OF_RANGE);
  ASSERT_CONTAINS(manypy_status_message(s), "1 to ");
  manypy_status_free(s);
  char limit[32];
  snprintf(limit, sizeof limit, "1 to %zu ", manypy_max_interpreters());
  s = EXPECT_CODE(manypy_pool_resize(pool, manypy_max_interpreters() + 1), MANYPY_ERR_OUT_OF_RANGE);
  ASSERT_CONTAINS(manypy_status_message(s), limit);
  manypy_status_free(s);
  ASSERT_INVALID_ARG(manypy_pool_resize(NULL, 1), "manypy_pool_resize", "pool");
  assert_int_equal(manypy_pool_size(pool), 1);

  for (int round = 0; round < 2; ++round) {
    ASSERT_OK(manypy_pool_resize(pool, 2));
    assert_int_equal(manypy_pool_size(pool), 2);
    assert_int_equal(stats_of(pool).ready, 2);
    /* The object, loaded before the pool grew, serves on the new member
     * (and, the second time, on a member that left and came back). */
    manypy_call_options* on_1 = CALL_OPTIONS(1, 0);
    manypy_value* version = NULL;
    ASSERT_OK(manypy_object_call(model, "version", NULL, NULL, on_1, &version));
    manypy_value_free(version);
    ASSERT_OK(exec_as(pool, 1, "", 0, "x = 1"));
    ASSERT_OK(manypy_pool_resize(pool, 1));
    assert_int_equal(manypy_pool_size(pool), 1);
    s = EXPECT_CODE(manypy_object_call(model, "version", NULL, NULL, on_1, &version),
                    MANYPY_ERR_OUT_OF_RANGE);
    ASSERT_CONTAINS(manypy_status_message(s), "the pool has 1");
    manypy_status_free(s);
    manypy_call_options_free(on_1);
    ASSERT_OK(manypy_pool_resize(pool, 1));
  }
  manypy_object_free(model);
  manypy_package_free(package);
  manypy_pool_destroy(pool);
}

static void test_grows_on_long_waits(void** state) {
  (void)state;
  manypy_pool_options* options = manypy_pool_options_new();
  ASSERT_OK(manypy_pool_options_set_interpreters(options, 1));
  ASSERT_OK(manypy_pool_options_set_max_interpreters(options, 2));
  ASSERT_OK(manypy_pool_options_set_grow_after(options, 5 * 1000000));
  ASSERT_OK(manypy_pool_options_set_thread_mode(options, MANYPY_THREAD_MODE_HANDOFF));
  ASSERT_CODE(manypy_pool_options_set_grow_after(options, 0), MANYPY_ERR_OUT_OF_RANGE);
  manypy_pool* pool = NULL;
  ASSERT_OK(manypy_pool_create(options, &pool));
  exec_job jobs[4];
  pthread_t threads[4];
  for (int i = 0; i < 4; ++i) {
    jobs[i] = (exec_job){pool, MANYPY_ANY_INTERPRETER, "import time\ntime.sleep(0.1)", NULL};
    assert_int_equal(pthread_create(&threads[i], NULL, run_exec, &jobs[i]), 0);
  }
  for (int i = 0; i < 4; ++i) {
    pthread_join(threads[i], NULL);
    assert_null(jobs[i].status);
  }
  double t0 = capi_now();
  while (stats_of(pool).ready < 2 && capi_now() - t0 < 60) usleep(20000);
  assert_int_equal(manypy_pool_size(pool), 2);
  assert_int_equal(stats_of(pool).ready, 2);
  manypy_pool_destroy(pool);

  /* A maximum below the start, or past the process's limit, is refused. */
  ASSERT_OK(manypy_pool_options_set_interpreters(options, 2));
  ASSERT_OK(manypy_pool_options_set_max_interpreters(options, 1));
  pool = NULL;
  manypy_status* s = EXPECT_CODE(manypy_pool_create(options, &pool), MANYPY_ERR_OUT_OF_RANGE);
  ASSERT_CONTAINS(manypy_status_message(s), "most interpreters");
  manypy_status_free(s);
  assert_null(pool);
  ASSERT_OK(manypy_pool_options_set_max_interpreters(options, manypy_max_interpreters() + 1));
  ASSERT_CODE(manypy_pool_create(options, &pool), MANYPY_ERR_OUT_OF_RANGE);
  manypy_pool_options_free(options);
}

/* ---- object share ------------------------------------------------------- */

static void test_object_share(void** state) {
  (void)state;
  manypy_pool* pool = make_pool(1, 0, 0, MANYPY_THREAD_MODE_DIRECT, NULL);
  manypy_package* package = LOAD_PACKAGE(pool, "version_2.pt");
  manypy_object* model = LOAD_MODEL(package);
  manypy_object* shared = NULL;
  ASSERT_OK(manypy_object_share(model, &shared));
  assert_non_null(shared);
  ASSERT_INVALID_ARG(manypy_object_share(NULL, &shared), "manypy_object_share", "object");
  ASSERT_INVALID_ARG(manypy_object_share(model, NULL), "manypy_object_share", "out_object");
  manypy_object_free(model);
  manypy_package_free(package);
  manypy_pool_destroy(pool);
  manypy_value* version = NULL;
  ASSERT_OK(manypy_object_call(shared, "version", NULL, NULL, NULL, &version));
  int64_t number = 0;
  ASSERT_OK(manypy_value_get_int64(version, &number));
  assert_int_equal(number, 2);
  manypy_value_free(version);
  manypy_object_free(shared);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_serve_early),
      cmocka_unit_test(test_serve_early_destroyed_at_once),
      cmocka_unit_test(test_stats_and_metrics),
      cmocka_unit_test(test_drain_finishes_calls_direct),
      cmocka_unit_test(test_drain_finishes_calls_handoff),
      cmocka_unit_test(test_drain_deadline_cancels),
      cmocka_unit_test(test_drain_races_frees),
      cmocka_unit_test(test_resize),
      cmocka_unit_test(test_grows_on_long_waits),
      cmocka_unit_test(test_object_share),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
