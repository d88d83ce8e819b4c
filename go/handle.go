package manypy

/*
#include "glue.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"
)

// handle owns one native pointer and frees it exactly once: after Close (or
// the garbage collector's cleanup) and after every call in flight on it has
// returned. Calls hold it with acquire/release, so a Close racing a call on
// another goroutine frees the native object after that call, never under
// it, and calls that start after Close fail with ErrClosed. (The Java
// binding's NativeResource, with the same counting.)
//
// A handle must not refer to the Go object that owns it: it is the argument
// of that object's runtime.AddCleanup.
type handle struct {
	ptr  unsafe.Pointer
	free func(unsafe.Pointer)
	kind string
	// 1 for the owner until Close, plus one per call in flight; the native
	// object is freed when it drops to 0.
	holders atomic.Int64
	closed  atomic.Bool
}

func newHandle(ptr unsafe.Pointer, free func(unsafe.Pointer), kind string) *handle {
	h := &handle{}
	h.init(ptr, free, kind)
	return h
}

// init sets up a new handle in place (a Tensor's is part of the Tensor).
func (h *handle) init(ptr unsafe.Pointer, free func(unsafe.Pointer), kind string) {
	h.ptr, h.free, h.kind = ptr, free, kind
	h.holders.Store(1)
}

// acquire returns the pointer, held until release; ErrClosed once closed.
func (h *handle) acquire() (unsafe.Pointer, error) {
	for {
		n := h.holders.Load()
		if n == 0 || h.closed.Load() {
			return nil, fmt.Errorf("%w (%s)", ErrClosed, h.kind)
		}
		if h.holders.CompareAndSwap(n, n+1) {
			return h.ptr, nil
		}
	}
}

func (h *handle) release() {
	if h.holders.Add(-1) == 0 {
		h.free(h.ptr)
	}
}

// adopt makes owner the Go owner of the native object ptr, which free
// frees: it returns owner's handle, and the cleanup that closes the handle
// if owner becomes unreachable unclosed (closeOwned stops it).
func adopt[T any](owner *T, ptr unsafe.Pointer, free func(unsafe.Pointer), kind string) (*handle, runtime.Cleanup) {
	h := newHandle(ptr, free, kind)
	return h, runtime.AddCleanup(owner, cleanupHandle, h)
}

// use is the prelude of every method that calls C on a handle (but the
// calls of Object, ScriptModule and AotiModule: invoke): it runs fn with
// the pointer and strs (at most two) as C strings, freed when fn returns.
// The handle is held while fn runs, so a Close waits for it, and owner, the
// handle's Go owner, is kept reachable, so its cleanup does not close the
// handle under fn. A closed handle fails with ErrClosed and a string with a
// NUL with ErrInvalidArgument, without running fn.
func (h *handle) use(owner any, fn func(ptr unsafe.Pointer, c cStrings) error, strs ...string) error {
	ptr, err := h.acquire()
	if err != nil {
		return err
	}
	defer h.release()
	defer runtime.KeepAlive(owner)
	return withCStrings(func(c cStrings) error { return fn(ptr, c) }, strs...)
}

// useValue is use for a C function that makes a value (produce sets
// *out), which take converts to Go and frees.
func useValue[T any](h *handle, owner any,
	produce func(ptr unsafe.Pointer, c cStrings, out **C.manypy_value) *C.manypy_status,
	take func(*C.manypy_value) (T, error), strs ...string) (T, error) {
	return produced(func(out **C.manypy_value) error {
		return h.use(owner, func(ptr unsafe.Pointer, c cStrings) error {
			return statusError(produce(ptr, c, out))
		}, strs...)
	}, take)
}

// close drops the owner's hold, once; the last holder frees. It reports
// whether this call was the one that closed.
func (h *handle) close() bool {
	if h.closed.CompareAndSwap(false, true) {
		h.release()
		return true
	}
	return false
}

// closeOwned is Close of a Go owner: after an explicit close its cleanup
// has nothing left to do, and stopping it is cheaper than letting the
// runtime queue and run it. (A Tensor's Close is its own: backstop.go.)
func closeOwned(h *handle, cleanup runtime.Cleanup) {
	if h.close() {
		cleanup.Stop()
	}
}

// cleanupHandle is the backstop given to runtime.AddCleanup: it frees what
// was never closed.
func cleanupHandle(h *handle) {
	collecting.Add(1)
	defer collecting.Add(-1)
	if h.close() {
		lastCollected.Store(time.Now().UnixNano())
	}
}

// collected is a backstop's that frees with free(ptr) directly, without a
// handle (a Tensor's, backstop.go).
func collected(free func(unsafe.Pointer), ptr unsafe.Pointer) {
	collecting.Add(1)
	defer collecting.Add(-1)
	free(ptr)
	lastCollected.Store(time.Now().UnixNano())
}

// What NewPool watches to know whether the collector is still freeing
// pools: cleanups running now, and when one last freed a handle.
var (
	collecting    atomic.Int64
	lastCollected atomic.Int64
)
