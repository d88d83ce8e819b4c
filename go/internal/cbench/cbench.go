// Package cbench is the C side of the Go-vs-C benchmark
// (cmd/manypy-go-vs-c): manypy called from C loops in this process, on the
// same objects as the Go side.
package cbench

/*
#cgo pkg-config: manypy
#cgo LDFLAGS: -lpthread
#include <stdlib.h>
#include "cbench.h"
*/
import "C"

import (
	"errors"
	"unsafe"
)

// Identity calls identity.pt `calls` times from C with a [2, 3] float32
// input (borrowed, zero copy) and returns each call's latency in ns.
// model is the manypy_object* of Object.WithHandle.
func Identity(model unsafe.Pointer, input []float32, calls int) ([]int64, error) {
	if len(input) != 6 {
		return nil, errors.New("cbench: identity's input is [2, 3]")
	}
	// C memory: C keeps neither pointer past the call, but the loop is
	// long, so the buffers are C's own.
	in := (*C.float)(C.malloc(C.size_t(len(input)) * 4))
	defer C.free(unsafe.Pointer(in))
	copy(unsafe.Slice((*float32)(unsafe.Pointer(in)), len(input)), input)
	lat := (*C.int64_t)(C.malloc(C.size_t(calls) * 8))
	defer C.free(unsafe.Pointer(lat))
	var msg [256]C.char
	if C.cbench_identity((*C.manypy_object)(model), in, C.int64_t(calls), lat, &msg[0], 256) != 0 {
		return nil, errors.New(C.GoString(&msg[0]))
	}
	return append([]int64(nil), unsafe.Slice((*int64)(unsafe.Pointer(lat)), calls)...), nil
}

// Heavy calls python_heavy.pt (steps=5, normalize=False) from `threads`
// pthreads for `seconds` and returns the number of calls made.
func Heavy(model unsafe.Pointer, input []float32, threads int, seconds float64) (int64, error) {
	in := (*C.float)(C.malloc(C.size_t(len(input)) * 4))
	defer C.free(unsafe.Pointer(in))
	copy(unsafe.Slice((*float32)(unsafe.Pointer(in)), len(input)), input)
	var calls C.int64_t
	var msg [256]C.char
	if C.cbench_heavy((*C.manypy_object)(model), in, C.size_t(len(input)*4), C.int(threads),
		C.double(seconds), &calls, &msg[0], 256) != 0 {
		return int64(calls), errors.New(C.GoString(&msg[0]))
	}
	return int64(calls), nil
}
