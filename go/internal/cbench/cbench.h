/* The C side of the Go-vs-C benchmark (cmd/manypy-go-vs-c): the same calls
 * as the Go side, written as a C service would write them against
 * manypy.h, run in the same process, on the same pool and models. */
#ifndef MANYPY_GO_CBENCH_H
#define MANYPY_GO_CBENCH_H

#include <manypy.h>
#include <stdint.h>

/* identity.pt, `calls` times from this thread: wrap `input` ([2, 3] float32)
 * as a borrowed tensor, build the args tuple, call, take the result tensor
 * out as DLPack and release it, free everything. latencies_ns[i] is call
 * i's time. Returns 0, or -1 with `error` filled. */
int cbench_identity(manypy_object* model, float* input, int64_t calls, int64_t* latencies_ns,
                    char* error, size_t error_size);

/* python_heavy.pt (kwargs steps=5, normalize=False) from `threads`
 * pthreads for `seconds`, as bench/java/c_runner.c does; *out_calls is the
 * total. Returns 0, or -1 with `error` filled. */
int cbench_heavy(manypy_object* model, float* input, size_t input_bytes, int threads,
                 double seconds, int64_t* out_calls, char* error, size_t error_size);

#endif
