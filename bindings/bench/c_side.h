/* The C side of the binding benchmarks: the calls a C service makes against
 * manypy.h, in the loops each binding's own side mirrors, so that Java
 * (bench/java/JavaVsC.java), Go (go/cmd/manypy-go-vs-c) and Rust
 * (rust/bench) are each measured against one and the same pure-C reference
 * on the same pool and objects, in the same process.
 *
 * Built by each comparison's own tool: CMake (bench/CMakeLists.txt, the JNI
 * library of JavaVsC), cgo (go/cmd/manypy-go-vs-c/internal/cbench/c_side.c #includes
 * c_side.c) and cargo (rust/bench/build.rs, the cc crate). Plain C11 and
 * POSIX threads; nothing of it is exported from libmanypy.
 *
 * Every function returns 0, or -1 with the first failure's message in
 * `error` (up to `error_size` bytes, NUL-terminated). */
#ifndef MANYPY_BINDINGS_BENCH_C_SIDE_H
#define MANYPY_BINDINGS_BENCH_C_SIDE_H

#include <manypy.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What one call sends and how its result is read. Opaque; made by one of
 * the c_side_request_* functions (NULL only when memory is exhausted), read
 * by any number of threads at once, freed by c_side_request_free. It
 * borrows everything it is given: the object, the input buffer and the
 * prepared values must outlive it. */
typedef struct c_side_request c_side_request;

/* Calls `object` with `args` and `kwargs` (kwargs may be NULL) built once by
 * the caller and shared read-only by every call and thread (Rust's prepared
 * Args). A tensor result is taken out as DLPack and released; any other
 * result is only freed. */
c_side_request* c_side_request_prepared(manypy_object* object, const manypy_value* args,
                                        const manypy_value* kwargs);

/* Calls `object` with one positional argument made anew at each call, as a
 * service wraps each request's buffer: a float32 tensor over `input`
 * (`input_bytes` bytes, `ndim` <= 4 dimensions of `shape`, copied), borrowed
 * without a copy, in a new args tuple. Results as for
 * c_side_request_prepared. */
c_side_request* c_side_request_tensor(manypy_object* object, float* input, size_t input_bytes,
                                      int32_t ndim, const int64_t* shape);

/* python_heavy.pt (samples/models) as the Java and Go services call it: x
 * [4, 64] over `input` made anew at each call as in c_side_request_tensor,
 * kwargs {"steps": 5, "normalize": False} made anew at each call, and both
 * result tensors ("logits", "norm") taken out as DLPack and released. */
c_side_request* c_side_request_python_heavy(manypy_object* object, float* input,
                                            size_t input_bytes);

void c_side_request_free(c_side_request* request);

/* `n` calls from this thread, one at a time; latencies_ns[i] is call i's
 * wall time, from before its arguments are made to after its result is
 * freed. */
int c_side_latencies(const c_side_request* request, int64_t* latencies_ns, size_t n, char* error,
                     size_t error_size);

/* How a throughput run's measured window is bounded: each comparison's own
 * side bounds its window the same way. */
typedef enum c_side_window {
  /* The threads start together (the last one to arrive releases them), and
   * each calls until its own start + `seconds`; rate = calls / seconds.
   * Java's and Go's comparisons. */
  C_SIDE_EACH_UNTIL_DEADLINE = 0,
  /* The threads start as they are made; this thread sleeps `seconds`, then
   * raises a stop flag each thread reads before each call; *out_ns is the
   * wall time from making the first thread to joining the last. Rust's
   * comparison. */
  C_SIDE_UNTIL_STOPPED = 1,
} c_side_window;

enum { C_SIDE_MAX_THREADS = 64 };

/* `threads` (1 to C_SIDE_MAX_THREADS) threads calling for `seconds` (> 0)
 * bounded as `window` says. *out_calls: calls completed by every thread;
 * *out_ns: the run's wall time (see c_side_window). On a failed call the
 * other threads finish their window, and the counts are still written. */
int c_side_throughput(const c_side_request* request, int threads, double seconds,
                      c_side_window window, uint64_t* out_calls, int64_t* out_ns, char* error,
                      size_t error_size);

#ifdef __cplusplus
}
#endif

#endif
