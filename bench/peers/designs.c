#include "designs.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plain.h"
#include "worker_pool.h"

const char* const design_names[DESIGN_COUNT] = {"manypy",      "worker pool", "shared GIL",
                                                "N processes", "TorchScript", "AOTInductor"};

int design_applies(design d, const model_case* m) {
  if (d != D_AOTI) return 1;
#ifdef MANYPY_BENCH_AOTI
  return m->aoti[0] != '\0';
#else
  (void)m;
  return 0;
#endif
}

/* ---- N caller threads ----------------------------------------------- */

/* One call of a design; returns 0, or -1 with a message in err. */
typedef struct caller {
  int (*call)(void* ctx, char* err, size_t len);
  void* ctx;
} caller;

typedef struct thread_worker {
  bench_control* ctl; /* first: bench_threads_init sets it */
  const caller* c;
  samples lat;
  long calls;
  double t_end;
  char err[2048];
} thread_worker;

/* One call; its latency recorded when measured. */
static int worker_call(void* arg, int measured) {
  thread_worker* w = arg;
  const int64_t t0 = now_ns();
  const int ok = w->c->call(w->c->ctx, w->err, sizeof w->err) == 0;
  if (measured) samples_push(&w->lat, now_ns() - t0);
  return ok;
}

static void* thread_main(void* arg) {
  thread_worker* w = arg;
  const int ok = worker_call(w, 0);
  if (!bench_worker_warm_up(w->ctl, ok, worker_call, w)) return NULL;
  const long calls = bench_worker_measure(w->ctl, worker_call, w);
  if (calls < 0) return NULL; /* w->err says why; the main thread dies with it */
  w->calls = calls;
  w->t_end = now_s();
  return NULL;
}

/* `threads` threads call c for `warmup` s, then for `seconds` s measured;
 * our CPU counts this process and `pids`; Pss is taken before returning. */
static void run_threads(const caller* c, int threads, const run_config* cfg, const pid_t* pids,
                        int npids, run_result* r) {
  bench_threads t;
  thread_worker* ws = bench_threads_init(&t, threads, sizeof *ws);
  for (int k = 0; k < threads; ++k) ws[k].c = c;
  bench_threads_start(&t, thread_main);
  bench_threads_warm_up(&t, cfg->warmup);
  const cpu_sample c0 = cpu_now(pids, npids);
  bench_threads_finish(&t, cfg->seconds);
  const cpu_sample c1 = cpu_now(pids, npids);
  double t_end = c0.t;
  for (int k = 0; k < threads; ++k) {
    if (ws[k].err[0]) die("%s, %s: %s", design_names[cfg->d], cfg->m->label, ws[k].err);
    r->calls += ws[k].calls;
    if (ws[k].t_end > t_end) t_end = ws[k].t_end;
    samples_append(&r->lat, &ws[k].lat);
    free(ws[k].lat.v);
  }
  r->elapsed = t_end - c0.t;
  r->rate = r->elapsed > 0 ? (double)r->calls / r->elapsed : 0;
  cpu_add(&r->cpu, c0, c1);
  r->pss_kb = pss_kb(0);
  for (int k = 0; k < npids; ++k) r->pss_kb += pss_kb(pids[k]);
  free(ws);
}

/* ---- manypy and the shared GIL -------------------------------------- */

typedef struct object_call {
  manypy_object* object;
  manypy_script_module* script;
  manypy_aoti_module* aoti;
  manypy_value *args, *kwargs;
} object_call;

static int call_object(void* ctx, char* err, size_t len) {
  object_call* o = ctx;
  manypy_value* out = NULL;
  manypy_status* st = o->aoti ? manypy_aoti_call(o->aoti, o->args, NULL, NULL, &out)
                      : o->script
                          ? manypy_script_call(o->script, NULL, o->args, o->kwargs, NULL, &out)
                          : manypy_object_call(o->object, NULL, o->args, o->kwargs, NULL, &out);
  manypy_value_free(out);
  if (!st) return 0;
  snprintf(err, len, "%s: %s\n%s", manypy_code_name(manypy_status_code(st)),
           manypy_status_message(st), manypy_status_traceback(st));
  manypy_status_free(st);
  return -1;
}

/* A pool of `interpreters` called from cfg->n threads. */
static void run_pool(const run_config* cfg, size_t interpreters, run_result* r) {
  const model_case* m = cfg->m;
  object_call o = {NULL, NULL, NULL, model_args(m), model_kwargs(m)};
  char path[4096], what[160];
  snprintf(path, sizeof path, "%s/%s.pt", cfg->archives, m->name);
  const double t0 = now_s();
  manypy_pool_options* opts = manypy_pool_options_new();
  if (!opts) die("out of memory");
  CHECK(manypy_pool_options_set_interpreters(opts, interpreters), "set_interpreters");
  /* As a service behind a readiness probe would: serve from the first
   * interpreter that has started, as the worker pool serves from its first
   * ready worker (docs/serving.md). */
  CHECK(manypy_pool_options_set_serve_early(opts, 1), "set_serve_early");
  manypy_pool* pool = NULL;
  manypy_package* pkg = NULL;
  CHECK(manypy_pool_create(opts, &pool), "manypy_pool_create");
  manypy_pool_options_free(opts);
  CHECK(manypy_package_load_file(pool, path, &pkg), "manypy_package_load_file");
  CHECK(manypy_package_load_pickle(pkg, "model", "model.pkl", &o.object), "load_pickle");
  manypy_value* out = NULL;
  CHECK(manypy_object_call(o.object, NULL, o.args, o.kwargs, NULL, &out), "manypy_object_call");
  r->first_s = now_s() - t0;
  snprintf(what, sizeof what, "%s, %s, first call", design_names[cfg->d], m->label);
  model_check_value(what, m, out);
  manypy_value_free(out);
  for (size_t i = 0; i < interpreters; ++i) { /* every replica, checked */
    manypy_call_options* pin = manypy_call_options_new();
    if (!pin) die("out of memory");
    CHECK(manypy_call_options_set_interpreter(pin, (int32_t)i), "set_interpreter");
    CHECK(manypy_object_call(o.object, NULL, o.args, o.kwargs, pin, &out), "manypy_object_call");
    snprintf(what, sizeof what, "%s, %s, interpreter %zu", design_names[cfg->d], m->label, i);
    model_check_value(what, m, out);
    manypy_value_free(out);
    manypy_call_options_free(pin);
  }
  r->all_s = now_s() - t0;
  const caller c = {call_object, &o};
  run_threads(&c, cfg->n, cfg, NULL, 0, r);
  manypy_object_free(o.object);
  manypy_package_free(pkg);
  manypy_pool_destroy(pool);
  manypy_value_free(o.args);
  manypy_value_free(o.kwargs);
}

/* ---- TorchScript on the host ---------------------------------------- */

static void run_script(const run_config* cfg, run_result* r) {
  const model_case* m = cfg->m;
  object_call o = {NULL, NULL, NULL, model_args(m), model_kwargs(m)};
  char path[4096], what[160];
  snprintf(path, sizeof path, "%s/%s", cfg->archives, m->script);
  CHECK(manypy_script_set_intra_op_threads(1), "manypy_script_set_intra_op_threads");
  const double t0 = now_s();
  CHECK(manypy_script_load_file(path, &o.script), "manypy_script_load_file");
  manypy_value* out = NULL;
  CHECK(manypy_script_call(o.script, NULL, o.args, o.kwargs, NULL, &out), "manypy_script_call");
  r->first_s = r->all_s = now_s() - t0;
  snprintf(what, sizeof what, "%s, %s", design_names[cfg->d], m->label);
  model_check_value(what, m, out);
  manypy_value_free(out);
  const caller c = {call_object, &o};
  run_threads(&c, cfg->n, cfg, NULL, 0, r);
  manypy_script_free(o.script);
  manypy_value_free(o.args);
  manypy_value_free(o.kwargs);
}

/* ---- AOTInductor on the host ---------------------------------------- */

/* The .pt2 package: python_heavy's is exported with the case's keyword
 * arguments fixed (samples/models/make_pt2.py), so it takes x alone and
 * returns the same tensors, without "steps". One intra-op thread, as
 * TorchScript's: N calls at once are the parallelism. */
static void run_aoti(const run_config* cfg, run_result* r) {
  const model_case* m = cfg->m;
  object_call o = {NULL, NULL, NULL, model_args(m), NULL};
  char path[4096], what[160];
  snprintf(path, sizeof path, "%s/%s", cfg->archives, m->aoti);
  CHECK(manypy_script_set_intra_op_threads(1), "manypy_script_set_intra_op_threads");
  const double t0 = now_s();
  CHECK(manypy_aoti_load_file(path, NULL, &o.aoti), "manypy_aoti_load_file");
  manypy_value* out = NULL;
  CHECK(manypy_aoti_call(o.aoti, o.args, NULL, NULL, &out), "manypy_aoti_call");
  r->first_s = r->all_s = now_s() - t0;
  snprintf(what, sizeof what, "%s, %s", design_names[cfg->d], m->label);
  check_model_output(what, out, m->outs, m->nouts, -1, NULL);
  manypy_value_free(out);
  const caller c = {call_object, &o};
  run_threads(&c, cfg->n, cfg, NULL, 0, r);
  manypy_aoti_free(o.aoti);
  manypy_value_free(o.args);
}

/* ---- the worker pool ------------------------------------------------ */

typedef struct pool_call {
  worker_pool* pool;
  const model_case* m;
} pool_call;

static int call_pool(void* ctx, char* err, size_t len) {
  pool_call* pc = ctx;
  pool_reply reply;
  return worker_pool_call(pc->pool, pc->m->input, pc->m->input_bytes, pc->m->in_ndim,
                          pc->m->in_shape, &reply, err, len);
}

static void check_reply(const char* what, const model_case* m, const pool_reply* reply) {
  for (int k = 0; k < m->nouts; ++k) {
    const pool_output* o = NULL;
    for (int j = 0; j < reply->count; ++j) {
      if (strcmp(reply->out[j].key, m->outs[k].key) == 0) o = &reply->out[j];
    }
    if (!o || o->kind != 0) die("%s: the reply has no tensor '%s'", what, m->outs[k].key);
    check_floats(what, &m->outs[k], o->data, o->ndim, o->shape);
  }
  if (m->steps < 0) return;
  for (int j = 0; j < reply->count; ++j) {
    if (strcmp(reply->out[j].key, "steps") == 0 && reply->out[j].kind == 1) {
      if (reply->out[j].value != m->steps) die("%s: output 'steps' is wrong", what);
      return;
    }
  }
  die("%s: the reply has no int 'steps'", what);
}

static void run_worker_pool(const run_config* cfg, run_result* r) {
  const model_case* m = cfg->m;
  char archive[4096], worker_py[4096], what[160], err[4096];
  snprintf(archive, sizeof archive, "%s/%s.pt", cfg->archives, m->name);
  snprintf(worker_py, sizeof worker_py, "%s/worker.py", cfg->peers_dir);
  const double t0 = now_s();
  worker_pool* pool = worker_pool_start(cfg->n, cfg->python, worker_py, archive, m->input_bytes,
                                        model_output_bytes(m));
  /* The first worker to be ready serves the first request at once. */
  for (int k, served = 0; (k = worker_pool_next_ready(pool)) >= 0; served = 1) {
    pool_reply reply;
    if (worker_pool_call_on(pool, k, m->input, m->input_bytes, m->in_ndim, m->in_shape, &reply, err,
                            sizeof err) != 0) {
      die("worker pool, %s, worker %d: %s", m->label, k, err);
    }
    if (!served) r->first_s = now_s() - t0;
    snprintf(what, sizeof what, "worker pool, %s, worker %d", m->label, k);
    check_reply(what, m, &reply);
  }
  r->all_s = now_s() - t0;
  pool_call pc = {pool, m};
  const caller c = {call_pool, &pc};
  run_threads(&c, cfg->n, cfg, worker_pool_pids(pool), worker_pool_size(pool), r);
  worker_pool_stop(pool);
}

/* ---- N plain processes ---------------------------------------------- */

static void run_plain(const run_config* cfg, run_result* r) {
  char archive[4096], plain_py[4096];
  snprintf(archive, sizeof archive, "%s/%s.pt", cfg->archives, cfg->m->name);
  snprintf(plain_py, sizeof plain_py, "%s/plain_loop.py", cfg->peers_dir);
  plain_run(cfg->n, cfg->python, plain_py, archive, cfg->warmup, cfg->seconds, r);
}

void design_run(const run_config* c, run_result* r) {
  memset(r, 0, sizeof *r);
  switch (c->d) {
    case D_MANYPY:
      run_pool(c, (size_t)c->n, r);
      break;
    case D_SHARED:
      run_pool(c, 1, r);
      break;
    case D_SCRIPT:
      run_script(c, r);
      break;
    case D_AOTI:
      run_aoti(c, r);
      break;
    case D_POOL:
      run_worker_pool(c, r);
      break;
    case D_PLAIN:
      run_plain(c, r);
      break;
    default:
      die("unknown design %d", (int)c->d);
  }
}
