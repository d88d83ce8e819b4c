/*
 * manypy_bench_async: asynchronous calls, admission control and dynamic
 * batching, each measured side by side with what it replaces, in one run.
 *
 *   A. python_heavy.pt on 2 interpreters: one host thread keeping 64
 *      asynchronous calls in flight against 4 host threads making
 *      synchronous calls (target: >= 0.95x the throughput).
 *   B. identity.pt, x [1, 16], one call at a time on 2 interpreters: the
 *      round trip of an asynchronous call (submit, then its callback seen)
 *      against a synchronous call, in each thread mode (target: <= +1 us at
 *      p50 against the synchronous call on the same path, HANDOFF's).
 *   C. ResNet-18 batch-1 requests from 16 client threads on 2 interpreters:
 *      a batcher (largest batch 8, wait 2 ms) against unbatched calls
 *      (target: >= 1.3x), and the worker pool of bench/peers, unbatched
 *      (async_batching.c).
 *   D. python_heavy.pt under 4x overload with a queue limit of 1: an
 *      open-loop generator submits a burst every 100 us, 4 times what
 *      1 interpreter serves (one interpreter, so that the generator has the
 *      other core of a 2-core machine instead of starving the interpreters);
 *      every refused call's MANYPY_ERR_OVERLOADED latency (target: <= 100 us
 *      at p99) and the accepted calls' p99 against the unloaded p99
 *      (target: <= 2x).
 *
 * A benchmark, not a test: it prints tables and ratios and never fails on
 * timing; it exits non-zero when a call fails or a model's output is wrong.
 *
 * Usage: manypy_bench_async [--quick] [--seconds S] [--sections ABCD] [--archives DIR]
 *   --quick         S = 0.5 in one round (smoke test)
 *   --sections X    only the sections named (default ABCD)
 *   --seconds S     measured seconds per configuration and round, 2 rounds
 *                   (default 3, or MANYPY_BENCH_SECONDS)
 *   --archives DIR  the sample archives (default: the build's)
 */
#define _GNU_SOURCE
#include "async.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "cli.h"
#include "outputs.h"

#ifndef MANYPY_BENCH_ARCHIVES
#define MANYPY_BENCH_ARCHIVES "archives"
#endif
#ifndef MANYPY_BENCH_PEERS_DIR
#define MANYPY_BENCH_PEERS_DIR "bench/peers"
#endif
#ifndef PYTHON
#define PYTHON "python3"
#endif

const char* bench_program = "manypy_bench_async";

static const char kUsage[] =
    "usage: manypy_bench_async [--quick] [--seconds S] [--sections ABCD] [--archives DIR]\n";

#define HEAVY_STEPS 5
static expected heavy_out[] = {{"logits", 2, {4, 10}, NULL, 0}, {"norm", 1, {4}, NULL, 0}};

/* ---- the asynchronous driver's bookkeeping -------------------------------- */

void async_tally_init(async_tally* t, int in_flight) {
  memset(t, 0, sizeof *t);
  sem_init(&t->slots, 0, (unsigned)in_flight);
  pthread_mutex_init(&t->mu, NULL);
}

void async_tally_destroy(async_tally* t) {
  sem_destroy(&t->slots);
  pthread_mutex_destroy(&t->mu);
  free(t->lat.v);
}

void async_done(void* user_data, manypy_value* result, manypy_status* status) {
  async_call* c = user_data;
  const int64_t now = now_ns();
  async_tally* t = c->tally;
  if (status != NULL) die_status("an asynchronous call", status);
  manypy_value_free(result);
  if (atomic_load(&t->record)) {
    pthread_mutex_lock(&t->mu);
    samples_push(&t->lat, now - c->submitted_ns);
    pthread_mutex_unlock(&t->mu);
  }
  atomic_fetch_add(&t->completed, 1);
  free(c);
  sem_post(&t->slots);
}

static void submit(async_tally* t, manypy_object* object, const manypy_value* args,
                   const manypy_value* kwargs) {
  async_call* c = xmalloc(sizeof *c);
  c->tally = t;
  c->submitted_ns = now_ns();
  CHECK(manypy_object_call_async(object, NULL, args, kwargs, NULL, async_done, c),
        "manypy_object_call_async");
}

/* ---- set-up ---------------------------------------------------------------- */

static manypy_object* load_object(manypy_pool* pool, const char* dir, const char* name,
                                  manypy_package** out_package) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  CHECK(manypy_package_load_file(pool, path, out_package), path);
  manypy_object* object = NULL;
  CHECK(manypy_package_load_pickle(*out_package, "model", "model.pkl", &object), path);
  return object;
}

static manypy_value* tensor_args(float* data, size_t bytes, int32_t ndim, const int64_t* shape) {
  manypy_value* x = NULL;
  CHECK(manypy_value_new_tensor_from_buffer(data, bytes, (DLDataType){kDLFloat, 32, 1}, ndim, shape,
                                            NULL, 0, NULL, NULL, &x),
        "manypy_value_new_tensor_from_buffer");
  manypy_value* args = manypy_value_new_tuple();
  CHECK(manypy_value_append(args, x), "manypy_value_append");
  return args;
}

typedef struct heavy_model {
  manypy_package* package;
  manypy_object* object;
  manypy_value *args, *kwargs;
} heavy_model;

static float* g_heavy_in;

static heavy_model load_heavy(manypy_pool* pool, const char* dir) {
  heavy_model m;
  m.object = load_object(pool, dir, "python_heavy.pt", &m.package);
  const int64_t shape[] = {4, 64};
  m.args = tensor_args(g_heavy_in, 4 * 64 * sizeof(float), 2, shape);
  m.kwargs = manypy_value_new_dict();
  CHECK(manypy_value_dict_set(m.kwargs, "steps", manypy_value_new_int64(HEAVY_STEPS)), "steps");
  CHECK(manypy_value_dict_set(m.kwargs, "normalize", manypy_value_new_bool(0)), "normalize");
  /* Never time a wrong model: check it on each interpreter first. */
  for (int32_t i = 0; i < (int32_t)manypy_pool_size(pool); ++i) {
    manypy_call_options* o = manypy_call_options_new();
    CHECK(manypy_call_options_set_interpreter(o, i), "set_interpreter");
    manypy_value* out = NULL;
    CHECK(manypy_object_call(m.object, NULL, m.args, m.kwargs, o, &out), "python_heavy");
    check_model_output("python_heavy", out, heavy_out, 2, HEAVY_STEPS, NULL);
    manypy_value_free(out);
    manypy_call_options_free(o);
  }
  return m;
}

static void free_heavy(heavy_model* m) {
  manypy_value_free(m->args);
  manypy_value_free(m->kwargs);
  manypy_object_free(m->object);
  manypy_package_free(m->package);
}

/* ---- A: async against sync throughput ----------------------------------- */

typedef struct sync_caller {
  const heavy_model* m;
  atomic_int* stop;
  atomic_long* calls;
} sync_caller;

static void* sync_loop(void* arg) {
  sync_caller* c = arg;
  while (!atomic_load(c->stop)) {
    manypy_value* out = NULL;
    CHECK(manypy_object_call(c->m->object, NULL, c->m->args, c->m->kwargs, NULL, &out),
          "python_heavy (sync)");
    manypy_value_free(out);
    atomic_fetch_add(c->calls, 1);
  }
  return NULL;
}

/* Calls per second of 4 synchronous threads over `seconds`, after a warm-up. */
static double sync_rate(const heavy_model* m, const async_run* run) {
  atomic_int stop = 0;
  atomic_long calls = 0;
  sync_caller c = {m, &stop, &calls};
  pthread_t threads[4];
  for (int k = 0; k < 4; ++k) pthread_create(&threads[k], NULL, sync_loop, &c);
  sleep_s(run->warmup);
  const long before = atomic_load(&calls);
  const double t0 = now_s();
  sleep_s(run->seconds);
  const long counted = atomic_load(&calls) - before;
  const double elapsed = now_s() - t0;
  atomic_store(&stop, 1);
  for (int k = 0; k < 4; ++k) pthread_join(threads[k], NULL);
  return (double)counted / elapsed;
}

/* Calls per second of one thread keeping `in_flight` asynchronous calls going. */
static double async_rate(const heavy_model* m, const async_run* run, int in_flight) {
  async_tally t;
  async_tally_init(&t, in_flight);
  const double warm_end = now_s() + run->warmup;
  long before = -1;
  double t0 = 0;
  for (;;) {
    sem_wait(&t.slots);
    const double now = now_s();
    if (before < 0 && now >= warm_end) {
      before = atomic_load(&t.completed);
      t0 = now;
    }
    if (before >= 0 && now - t0 >= run->seconds) {
      sem_post(&t.slots);
      break;
    }
    submit(&t, m->object, m->args, m->kwargs);
  }
  const long counted = atomic_load(&t.completed) - before;
  const double elapsed = now_s() - t0;
  /* Let the calls still in flight finish before the tally goes. */
  for (int k = 0; k < in_flight; ++k) sem_wait(&t.slots);
  async_tally_destroy(&t);
  return (double)counted / elapsed;
}

static double section_async_throughput(const async_run* run, const heavy_model* m) {
  printf(
      "\n== A. python_heavy.pt, x [4, 64], steps=5 on 2 interpreters (DIRECT): 1 thread "
      "with 64 asynchronous calls in flight vs 4 threads making synchronous calls ==\n");
  double sync_sum = 0, async_sum = 0;
  for (int r = 0; r < run->rounds; ++r) {
    /* Alternate which goes first, so drift favours neither. */
    double s, a;
    if (r % 2 == 0) {
      s = sync_rate(m, run);
      a = async_rate(m, run, 64);
    } else {
      a = async_rate(m, run, 64);
      s = sync_rate(m, run);
    }
    printf("  round %d: sync %.0f calls/s, async %.0f calls/s\n", r + 1, s, a);
    sync_sum += s;
    async_sum += a;
  }
  const double sync = sync_sum / run->rounds, async = async_sum / run->rounds;
  printf("  %-44s %10.0f calls/s\n", "4 threads, synchronous calls", sync);
  printf("  %-44s %10.0f calls/s\n", "1 thread, 64 asynchronous calls in flight", async);
  return async / sync;
}

/* ---- B: the round trip of one call -------------------------------------- */

typedef struct round_trip {
  atomic_int done;
} round_trip;

static void round_trip_done(void* user_data, manypy_value* result, manypy_status* status) {
  if (status != NULL) die_status("identity (async)", status);
  manypy_value_free(result);
  atomic_store_explicit(&((round_trip*)user_data)->done, 1, memory_order_release);
}

/* p50 (ns) of `n` calls, one at a time: synchronous, or asynchronous with
 * the submitting thread polling for its callback (as a synchronous caller
 * polls for its hand-over). *submit_p50 gets the submission alone. */
static double call_p50(manypy_object* object, const manypy_value* args, int async, int n,
                       double* submit_p50) {
  samples lat = {0}, sub = {0};
  for (int k = 0; k < n + n / 10; ++k) {
    const int record = k >= n / 10; /* the first tenth warms up */
    const int64_t t0 = now_ns();
    if (async) {
      round_trip rt = {0};
      CHECK(manypy_object_call_async(object, NULL, args, NULL, NULL, round_trip_done, &rt),
            "identity (async)");
      const int64_t t1 = now_ns();
      while (!atomic_load_explicit(&rt.done, memory_order_acquire)) {
      }
      if (record) samples_push(&sub, t1 - t0);
    } else {
      manypy_value* out = NULL;
      CHECK(manypy_object_call(object, NULL, args, NULL, NULL, &out), "identity (sync)");
      manypy_value_free(out);
    }
    if (record) samples_push(&lat, now_ns() - t0);
  }
  const double p50 = samples_quantile(&lat, 0.5);
  if (submit_p50) *submit_p50 = async ? samples_quantile(&sub, 0.5) : NAN;
  free(lat.v);
  free(sub.v);
  return p50;
}

static double section_round_trip(const async_run* run, int quick) {
  printf(
      "\n== B. identity.pt, x [1, 16], one call at a time on 2 interpreters: p50 round trip "
      "==\n");
  const int n = quick ? 2000 : 20000;
  static float x[16];
  const int64_t shape[] = {1, 16};
  manypy_value* args = tensor_args(x, sizeof x, 2, shape);
  double delta_handoff = 0;
  const manypy_thread_mode modes[] = {MANYPY_THREAD_MODE_DIRECT, MANYPY_THREAD_MODE_HANDOFF};
  for (int mi = 0; mi < 2; ++mi) {
    manypy_pool* pool = bench_make_pool(2, modes[mi]);
    manypy_package* package = NULL;
    manypy_object* identity = load_object(pool, run->archives, "identity.pt", &package);
    double sync_sum = 0, async_sum = 0, submit_sum = 0;
    for (int r = 0; r < run->rounds; ++r) {
      double submit_p50 = 0;
      sync_sum += call_p50(identity, args, 0, n, NULL);
      async_sum += call_p50(identity, args, 1, n, &submit_p50);
      submit_sum += submit_p50;
    }
    const double sync = sync_sum / run->rounds, async = async_sum / run->rounds;
    const char* mode = mi == 0 ? "DIRECT" : "HANDOFF";
    printf(
        "  %-8s synchronous %6.2f us, asynchronous %6.2f us (of which submitting %5.2f us): "
        "%+.2f us\n",
        mode, sync / 1e3, async / 1e3, submit_sum / run->rounds / 1e3, (async - sync) / 1e3);
    if (mi == 1) delta_handoff = (async - sync) / 1e3;
    manypy_object_free(identity);
    manypy_package_free(package);
    manypy_pool_destroy(pool);
  }
  printf(
      "  (an asynchronous call always runs on its interpreter's home thread, as a HANDOFF\n"
      "   call does; against DIRECT it adds that hand-over)\n");
  manypy_value_free(args);
  return delta_handoff;
}

/* ---- D: overload with a queue limit ------------------------------------- */

typedef struct overload_result {
  double unloaded_p99_ns, accepted_p99_ns, refused_p99_ns, refused_max_ns;
  long accepted, refused;
  double offered_rate;
} overload_result;

static overload_result section_overload(const async_run* run) {
  printf(
      "\n== D. python_heavy.pt on 1 interpreter, queue limit 1: unloaded, then an open-loop "
      "generator at 4x capacity (a burst every 100 us) ==\n");
  manypy_pool_options* options = manypy_pool_options_new();
  CHECK(manypy_pool_options_set_queue_limit(options, 1), "set_queue_limit");
  manypy_pool* pool = NULL;
  CHECK(manypy_pool_create(options, &pool), "manypy_pool_create");
  manypy_pool_options_free(options);
  heavy_model m = load_heavy(pool, run->archives);
  overload_result r = {0};
  const double capacity = async_rate(&m, run, 2);

  /* Unloaded: one asynchronous call at a time. */
  async_tally quiet;
  async_tally_init(&quiet, 1);
  atomic_store(&quiet.record, 1);
  const double quiet_end = now_s() + run->seconds;
  while (now_s() < quiet_end) {
    sem_wait(&quiet.slots);
    submit(&quiet, m.object, m.args, m.kwargs);
  }
  sem_wait(&quiet.slots);
  r.unloaded_p99_ns = samples_quantile(&quiet.lat, 0.99);
  async_tally_destroy(&quiet);

  /* 4x overload: every 100 us (well under one call), the calls 4 x
   * capacity asks for, whatever completes. */
  const int64_t kTickNs = 100 * 1000;
  r.offered_rate = 4 * capacity;
  async_tally busy;
  async_tally_init(&busy, 1 << 30);
  atomic_store(&busy.record, 1);
  samples refused = {0};
  const int64_t start = now_ns();
  const int64_t end = start + (int64_t)(run->seconds * run->rounds * 1e9);
  long offered = 0;
  for (int64_t tick = start; tick < end; tick += kTickNs) {
    struct timespec at = {tick / 1000000000, tick % 1000000000};
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL);
    const long due = (long)(r.offered_rate * (double)(tick - start + kTickNs) / 1e9);
    for (; offered < due; ++offered) {
      async_call* c = xmalloc(sizeof *c);
      c->tally = &busy;
      c->submitted_ns = now_ns();
      manypy_status* st =
          manypy_object_call_async(m.object, NULL, m.args, m.kwargs, NULL, async_done, c);
      const int64_t t1 = now_ns();
      if (st == NULL) {
        ++r.accepted;
      } else {
        if (manypy_status_code(st) != MANYPY_ERR_OVERLOADED) die_status("overload", st);
        manypy_status_free(st);
        samples_push(&refused, t1 - c->submitted_ns);
        free(c);
        ++r.refused;
      }
    }
  }
  while (atomic_load(&busy.completed) < r.accepted) sleep_s(0.01);
  r.accepted_p99_ns = samples_quantile(&busy.lat, 0.99);
  r.refused_p99_ns = samples_quantile(&refused, 0.99);
  r.refused_max_ns = refused.n ? (double)refused.v[refused.n - 1] : NAN;
  free(refused.v);
  async_tally_destroy(&busy);
  printf("  unloaded: p99 %.2f ms (one call at a time)\n", r.unloaded_p99_ns / 1e6);
  printf(
      "  offered %.0f calls/s (4 x %.0f): %ld accepted (p99 %.2f ms), %ld refused with "
      "MANYPY_ERR_OVERLOADED (p99 %.1f us, max %.1f us)\n",
      r.offered_rate, capacity, r.accepted, r.accepted_p99_ns / 1e6, r.refused,
      r.refused_p99_ns / 1e3, r.refused_max_ns / 1e3);
  free_heavy(&m);
  manypy_pool_destroy(pool);
  return r;
}

int main(int argc, char** argv) {
  int quick = 0;
  double seconds = 3;
  const char* archives = MANYPY_BENCH_ARCHIVES;
  const char* sections = "ABCD";
  cli_option opts[] = {
      CLI_OPT_FLAG("--quick", &quick),
      CLI_OPT_NUMBER("--seconds", &seconds, 0.01, 3600),
      CLI_OPT_STRING("--sections", &sections),
      CLI_OPT_STRING("--archives", &archives),
  };
  const size_t nopts = sizeof opts / sizeof opts[0];
  cli_env_number("MANYPY_BENCH_SECONDS", 0.01, 3600, &seconds);
  cli_parse(argc, argv, opts, nopts, kUsage);
  if (quick && !cli_given(opts, nopts, "--seconds")) seconds = 0.5;
  async_run run = {archives,          PYTHON,       MANYPY_BENCH_PEERS_DIR, seconds,
                   quick ? 0.1 : 0.5, quick ? 1 : 2};

  size_t n;
  g_heavy_in = read_archive_file(archives, "python_heavy.input.bin", &n);
  if (n != 4 * 64 * sizeof(float)) die("python_heavy.input.bin: %zu bytes, expected 1024", n);
  expected_load(archives, "python_heavy", &heavy_out[0]);
  expected_load(archives, "python_heavy", &heavy_out[1]);
  printf(
      "manypy asynchronous-call benchmark (library %s, %ld online cores; %.2f s per "
      "configuration, %d round%s)\n",
      manypy_version_string(), sysconf(_SC_NPROCESSORS_ONLN), seconds, run.rounds,
      run.rounds > 1 ? "s" : "");

  double a_ratio = NAN, b_delta = NAN;
  overload_result d = {NAN, NAN, NAN, NAN, 0, 0, NAN};
  if (strchr(sections, 'A')) {
    progress("A: a pool of 2 interpreters, python_heavy.pt");
    manypy_pool* pool = bench_make_pool(2, MANYPY_THREAD_MODE_DIRECT);
    heavy_model heavy = load_heavy(pool, archives);
    a_ratio = section_async_throughput(&run, &heavy);
    free_heavy(&heavy);
    manypy_pool_destroy(pool);
  }
  if (strchr(sections, 'B')) {
    progress("B: identity.pt round trips");
    b_delta = section_round_trip(&run, quick);
  }
  if (strchr(sections, 'C')) {
    progress("C: ResNet-18, 16 clients");
    section_batching(&run);
  }
  if (strchr(sections, 'D')) {
    progress("D: overload");
    d = section_overload(&run);
  }

  ratio_header("targets");
  if (!isnan(a_ratio)) {
    ratio_row("A. async (1 thread, 64 in flight) / sync (4 threads) throughput", a_ratio, 1, 0.95);
  }
  if (!isnan(b_delta))
    ratio_row("B. async - sync round trip at p50, us (HANDOFF)", b_delta, 0, 1.0);
  if (!isnan(d.unloaded_p99_ns)) {
    ratio_row("D. MANYPY_ERR_OVERLOADED latency at p99, us", d.refused_p99_ns / 1e3, 0, 100);
    ratio_row("D. accepted p99 / unloaded p99 under 4x overload",
              d.accepted_p99_ns / d.unloaded_p99_ns, 0, 2.0);
  }
  printf("(C's target row is in section C's table above)\n");
  return 0;
}
