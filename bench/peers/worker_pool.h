/* The worker-pool baseline: N Python worker processes (worker.py), each
 * with its own copy of the model, serving requests from this host the way
 * multi-process model servers do. A request is a small header on a Unix
 * socket (SOCK_SEQPACKET); the tensor bytes go through shared memory (one
 * memfd per worker, mapped by both sides), and so do the results. Any
 * number of host threads may call worker_pool_call at once: each request
 * goes to a free worker. */
#ifndef MANYPY_BENCH_PEERS_WORKER_POOL_H
#define MANYPY_BENCH_PEERS_WORKER_POOL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct worker_pool worker_pool;

/* One output of a reply. A tensor's data points into the worker's shared
 * memory: valid until that worker serves its next request. */
typedef struct pool_output {
  char key[17];
  int kind; /* 0: float32 tensor, 1: int */
  int32_t ndim;
  int64_t shape[4];
  int64_t value; /* kind 1 */
  const float* data;
} pool_output;

enum { POOL_MAX_OUTPUTS = 8 };

typedef struct pool_reply {
  int count;
  pool_output out[POOL_MAX_OUTPUTS];
} pool_reply;

/* Starts n workers of `python` running `worker_py` on `archive`, with
 * shared memory for inputs of in_bytes and outputs of out_bytes. Returns at
 * once: the workers load the model in parallel. Dies if a process cannot be
 * started. */
worker_pool* worker_pool_start(int n, const char* python, const char* worker_py,
                               const char* archive, size_t in_bytes, size_t out_bytes);

/* Waits until another worker has loaded its model and returns its index
 * (the worker is then free for requests), or -1 once every worker is
 * ready. Dies if a worker exits or reports an error instead. */
int worker_pool_next_ready(worker_pool* p);

/* One request to worker `index`, on the calling thread (not thread safe with
 * other requests to the same worker): the input is copied into the worker's
 * shared memory, the header sent, the reply parsed into *reply. Returns 0,
 * or -1 with a message in err (a worker's Python traceback, or why the
 * socket failed). */
int worker_pool_call_on(worker_pool* p, int index, const void* input, size_t nbytes, int32_t ndim,
                        const int64_t* shape, pool_reply* reply, char* err, size_t errlen);

/* The same on a free worker, waiting for one if all are busy. The reply's
 * data may be overwritten as soon as this returns. */
int worker_pool_call(worker_pool* p, const void* input, size_t nbytes, int32_t ndim,
                     const int64_t* shape, pool_reply* reply, char* err, size_t errlen);

int worker_pool_size(const worker_pool* p);
/* The workers' process ids (for CPU and memory accounting). */
const pid_t* worker_pool_pids(const worker_pool* p);

/* Closes every socket (the workers exit when they see it), waits for them,
 * unmaps the shared memory and frees the pool. */
void worker_pool_stop(worker_pool* p);

#endif
