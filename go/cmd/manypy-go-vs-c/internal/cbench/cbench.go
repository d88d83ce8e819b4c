// Package cbench is the C side of the Go-vs-C benchmark
// (cmd/manypy-go-vs-c, a module of its own): manypy called from C loops in
// this process, on the same objects as the Go side. The loops are the
// binding benchmarks' shared C side, bindings/bench/c_side.c (compiled here
// through c_side.c), the same that Java's and Rust's comparisons run.
package cbench

/*
#cgo pkg-config: manypy
#cgo LDFLAGS: -lpthread
#include <stdlib.h>
#include "../../../../../bindings/bench/c_side.h"
*/
import "C"

import (
	"errors"
	"unsafe"
)

// errorSize is the room for a failed call's message.
const errorSize = 512

// cFloats copies input into C memory: C keeps the pointer for the whole
// loop, which is long, so the buffer is C's own. The caller frees it.
func cFloats(input []float32) *C.float {
	in := (*C.float)(C.malloc(C.size_t(len(input)) * 4))
	copy(unsafe.Slice((*float32)(unsafe.Pointer(in)), len(input)), input)
	return in
}

// Identity calls identity.pt `calls` times from C with a [2, 3] float32
// input (a new zero-copy tensor per call) and returns each call's latency
// in ns. model is the manypy_object* of Object.WithHandle.
func Identity(model unsafe.Pointer, input []float32, calls int) ([]int64, error) {
	if len(input) != 6 {
		return nil, errors.New("cbench: identity's input is [2, 3]")
	}
	in := cFloats(input)
	defer C.free(unsafe.Pointer(in))
	shape := [2]C.int64_t{2, 3}
	req := C.c_side_request_tensor((*C.manypy_object)(model), in, C.size_t(len(input)*4), 2, &shape[0])
	if req == nil {
		return nil, errors.New("cbench: out of memory")
	}
	defer C.c_side_request_free(req)
	lat := (*C.int64_t)(C.malloc(C.size_t(calls) * 8))
	defer C.free(unsafe.Pointer(lat))
	var msg [errorSize]C.char
	if C.c_side_latencies(req, lat, C.size_t(calls), &msg[0], errorSize) != 0 {
		return nil, errors.New(C.GoString(&msg[0]))
	}
	return append([]int64(nil), unsafe.Slice((*int64)(unsafe.Pointer(lat)), calls)...), nil
}

// Heavy calls python_heavy.pt (steps=5, normalize=False) from `threads`
// pthreads, each for `seconds` from a common start, and returns the number
// of calls made.
func Heavy(model unsafe.Pointer, input []float32, threads int, seconds float64) (int64, error) {
	in := cFloats(input)
	defer C.free(unsafe.Pointer(in))
	req := C.c_side_request_python_heavy((*C.manypy_object)(model), in, C.size_t(len(input)*4))
	if req == nil {
		return 0, errors.New("cbench: out of memory")
	}
	defer C.c_side_request_free(req)
	var calls C.uint64_t
	var ns C.int64_t
	var msg [errorSize]C.char
	if C.c_side_throughput(req, C.int(threads), C.double(seconds), C.C_SIDE_EACH_UNTIL_DEADLINE,
		&calls, &ns, &msg[0], errorSize) != 0 {
		return int64(calls), errors.New(C.GoString(&msg[0]))
	}
	return int64(calls), nil
}
