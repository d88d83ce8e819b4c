/* manypy_bench_async, section C: ResNet-18 batch-1 requests from 16 client
 * threads on 2 interpreters (or 2 worker processes): unbatched calls, a
 * batcher (largest batch 8, wait 2 ms), and bench/peers' worker pool. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async.h"
#include "bench_util.h"
#include "outputs.h"
#include "peers/worker_pool.h"

#define CLIENTS 16
#define IN_BYTES (3 * 224 * 224 * sizeof(float))
#define OUT_BYTES (1000 * sizeof(float))

static float* g_input;
static expected g_out[] = {{"out", 2, {1, 1000}, NULL, 0}};
static const int64_t kShape[] = {1, 3, 224, 224};

typedef enum way { UNBATCHED, BATCHED, WORKERS } way;

typedef struct client {
  way w;
  manypy_object* object;
  manypy_batcher* batcher;
  worker_pool* workers;
  const manypy_value* args;
  atomic_int* stop;
  atomic_int* record;
  long calls;
  samples lat;
} client;

static void* client_loop(void* arg) {
  client* c = arg;
  while (!atomic_load(c->stop)) {
    const int64_t t0 = now_ns();
    if (c->w == WORKERS) {
      pool_reply reply;
      char err[1024];
      if (worker_pool_call(c->workers, g_input, IN_BYTES, 4, kShape, &reply, err, sizeof err) !=
          0) {
        die("worker pool: %s", err);
      }
    } else {
      manypy_value* out = NULL;
      CHECK(c->w == BATCHED ? manypy_batcher_call(c->batcher, c->args, NULL, NULL, &out)
                            : manypy_object_call(c->object, NULL, c->args, NULL, NULL, &out),
            "resnet18");
      manypy_value_free(out);
    }
    if (atomic_load(c->record)) {
      ++c->calls;
      samples_push(&c->lat, now_ns() - t0);
    }
  }
  return NULL;
}

typedef struct way_result {
  double rate, p50_ms, p99_ms;
} way_result;

static way_result run_way(const async_run* run, way w, manypy_object* object,
                          manypy_batcher* batcher, worker_pool* workers, const manypy_value* args) {
  atomic_int stop = 0, record = 0;
  client clients[CLIENTS];
  pthread_t threads[CLIENTS];
  for (int k = 0; k < CLIENTS; ++k) {
    clients[k] = (client){w, object, batcher, workers, args, &stop, &record, 0, {0}};
    pthread_create(&threads[k], NULL, client_loop, &clients[k]);
  }
  sleep_s(run->warmup * 2 + 0.5);
  atomic_store(&record, 1);
  const double t0 = now_s();
  sleep_s(run->seconds * 4);
  atomic_store(&record, 0);
  const double elapsed = now_s() - t0;
  atomic_store(&stop, 1);
  samples all = {0};
  long calls = 0;
  for (int k = 0; k < CLIENTS; ++k) {
    pthread_join(threads[k], NULL);
    calls += clients[k].calls;
    samples_append(&all, &clients[k].lat);
    free(clients[k].lat.v);
  }
  way_result r = {(double)calls / elapsed, samples_quantile(&all, 0.5) / 1e6,
                  samples_quantile(&all, 0.99) / 1e6};
  free(all.v);
  return r;
}

void section_batching(const async_run* run) {
  printf(
      "\n== C. resnet18.pt, batch-1 requests x [1, 3, 224, 224] from %d client threads, 2 "
      "interpreters (1 intra-op thread each) ==\n",
      CLIENTS);
  size_t n;
  g_input = read_archive_file(run->archives, "resnet18.input.bin", &n);
  if (n != IN_BYTES) die("resnet18.input.bin: %zu bytes, expected %zu", n, (size_t)IN_BYTES);
  expected_load(run->archives, "resnet18", &g_out[0]);

  manypy_pool* pool = bench_make_pool(2, MANYPY_THREAD_MODE_DIRECT);
  char path[4096];
  snprintf(path, sizeof path, "%s/resnet18.pt", run->archives);
  manypy_package* package = NULL;
  CHECK(manypy_package_load_file(pool, path, &package), path);
  manypy_object* resnet = NULL;
  CHECK(manypy_package_load_pickle(package, "model", "model.pkl", &resnet), "resnet18");
  manypy_value* x = NULL;
  CHECK(manypy_value_new_tensor_from_buffer(g_input, IN_BYTES, (DLDataType){kDLFloat, 32, 1}, 4,
                                            kShape, NULL, 0, NULL, NULL, &x),
        "resnet18 input");
  manypy_value* args = manypy_value_new_tuple();
  CHECK(manypy_value_append(args, x), "append");
  manypy_batcher_options* bo = manypy_batcher_options_new();
  CHECK(manypy_batcher_options_set_max_batch(bo, 8), "max_batch");
  CHECK(manypy_batcher_options_set_max_wait_us(bo, 2000), "max_wait_us");
  CHECK(manypy_batcher_options_set_name(bo, "bench_resnet18"), "name");
  manypy_batcher* batcher = NULL;
  CHECK(manypy_batcher_new(resnet, NULL, bo, &batcher), "manypy_batcher_new");
  manypy_batcher_options_free(bo);

  /* Never time a wrong model: the same output unbatched and batched. */
  for (int batched = 0; batched < 2; ++batched) {
    manypy_value* out = NULL;
    CHECK(batched ? manypy_batcher_call(batcher, args, NULL, NULL, &out)
                  : manypy_object_call(resnet, NULL, args, NULL, NULL, &out),
          "resnet18 check");
    check_tensor_value(batched ? "resnet18 (batcher)" : "resnet18", out, &g_out[0]);
    manypy_value_free(out);
  }

  char worker_py[4096];
  snprintf(worker_py, sizeof worker_py, "%s/worker.py", run->peers_dir);
  worker_pool* workers = worker_pool_start(2, run->python, worker_py, path, IN_BYTES, OUT_BYTES);
  while (worker_pool_next_ready(workers) >= 0) {
  }
  {
    pool_reply reply;
    char err[1024];
    if (worker_pool_call(workers, g_input, IN_BYTES, 4, kShape, &reply, err, sizeof err) != 0) {
      die("worker pool: %s", err);
    }
    check_floats("resnet18 (worker pool)", &g_out[0], reply.out[0].data, reply.out[0].ndim,
                 reply.out[0].shape);
  }

  way_result sum[3] = {{0}};
  for (int r = 0; r < run->rounds; ++r) {
    for (int k = 0; k < 3; ++k) {
      const way w = (way)((k + r) % 3); /* rotate the order between rounds */
      way_result one = run_way(run, w, resnet, batcher, workers, args);
      sum[w].rate += one.rate / run->rounds;
      sum[w].p50_ms += one.p50_ms / run->rounds;
      sum[w].p99_ms += one.p99_ms / run->rounds;
    }
  }
  const char* names[3] = {"manypy, unbatched", "manypy, batcher (8 rows, 2 ms)",
                          "worker pool (2 processes), unbatched"};
  printf("  %-40s %10s %10s %10s\n", "", "calls/s", "p50 ms", "p99 ms");
  for (int w = 0; w < 3; ++w) {
    printf("  %-40s %10.1f %10.1f %10.1f\n", names[w], sum[w].rate, sum[w].p50_ms, sum[w].p99_ms);
  }
  ratio_row("C. batcher / unbatched throughput (ResNet-18, 16 clients)",
            sum[BATCHED].rate / sum[UNBATCHED].rate, 1, 1.3);
  ratio_info("C. worker pool / manypy unbatched throughput",
             sum[WORKERS].rate / sum[UNBATCHED].rate);

  worker_pool_stop(workers);
  manypy_batcher_free(batcher);
  manypy_value_free(args);
  manypy_object_free(resnet);
  manypy_package_free(package);
  manypy_pool_destroy(pool);
  free(g_input);
}
