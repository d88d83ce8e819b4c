/* manypy_bench_serving's call-overhead paths (sections B and E): calls
 * from C timed one by one, the same model called in a Python loop inside
 * the interpreter, and a round trip of the tensor's bytes through pipes to
 * a worker process. */
#ifndef MANYPY_BENCH_SERVING_OVERHEAD_H
#define MANYPY_BENCH_SERVING_OVERHEAD_H

#include <sys/types.h>

#include "harness.h"
#include "manypy.h"

typedef struct lat_result {
  double p50_ns, p99_ns;
  long calls;
  cpu_use cpu;
} lat_result;

/* (iii): a worker process that echoes N bytes: reads exactly N bytes from
 * one pipe, writes them back on another. */
typedef struct echo_child {
  pid_t pid;
  int to_child, from_child;
  size_t bytes;
  int pipe_capacity;
} echo_child;

void time_calls(manypy_object* object, const manypy_value* args, const manypy_call_options* options,
                long calls, long warm, samples* s);
lat_result time_c_api(manypy_object* object, const manypy_value* args, long calls, long warm);
void setup_python_loop(manypy_pool* pool, const char* identity_path);
lat_result time_python(manypy_pool* pool, int ndim, const int64_t* shape, long calls, long warm);
echo_child start_echo_child(size_t bytes);
void stop_echo_child(echo_child* c);
lat_result time_pipe(echo_child* c, const void* data, long calls, long warm);

#endif
