package manypy

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

// Tensors' backstop, armed late. Every other owner gets its cleanup when it
// is made (adopt), but tensors are made per call, and most are closed
// within it: runtime.AddCleanup and Cleanup.Stop took about 250 ns of the
// binding's 1 us per identity call (each takes the span's and the heap's
// special locks, and AddCleanup allocates twice). So a new tensor only
// joins a table of the latest tensors (backstops), and gets its cleanup
// when it leaves: when a newer tensor takes its slot, or after the next
// garbage collection, whichever comes first. A tensor closed by then
// needs none (nothing left to free). The table holds its tensors, so none
// can become unreachable before it has its cleanup: a tensor never closed
// is still freed, one collection later than with a cleanup from the start.
//
// A Tensor's handle is part of the Tensor (one allocation per result, not
// two), so the cleanup cannot take the handle, which would keep the Tensor
// reachable: it takes the C pointer, and frees it unconditionally. That is
// right whenever it runs:
//   - the Tensor was never closed: a Close stops the cleanup (Close, or the
//     sweep that arms it after a Close that found none: the two order their
//     atomics so that one of them sees the other), while the Tensor is
//     reachable, when Stop is sure to stop it;
//   - no call holds it: every holder reaches the handle through the Tensor
//     until it releases, which keeps the Tensor reachable, so the owner's
//     is the only hold left.

// backstopSlots is how many tensors wait: a tensor gets its cleanup when a
// newer one takes its slot (after backstopSlots more on average), if still
// open then. It keeps at most that many closed tensors' Go memory alive
// (their C memory is freed by Close).
const (
	backstopSlotBits = 8
	backstopSlots    = 1 << backstopSlotBits
)

// backstops holds the tensors waiting: a new one takes a slot chosen by a
// hash of its address, and the tensor it evicts is armed if still open;
// sweepBackstops empties every slot after every collection. Swap hands
// each tensor out exactly once, without a lock. A hash rather than a
// shared counter: goroutines making tensors on many cores then write
// different cache lines, and a call makes one atomic write less.
var backstops [backstopSlots]atomic.Pointer[Tensor]

func init() { sweepEachGC() }

// deferBackstop registers t, made just now, for a backstop (armBackstop)
// unless it is closed in time.
func deferBackstop(t *Tensor) {
	// Fibonacci hashing: the top bits of the address times 2^64/phi. A
	// tensor in a slot is reachable, so no new one can have its address.
	h := uint64(uintptr(unsafe.Pointer(t))) * 0x9e3779b97f4a7c15
	slot := &backstops[h>>(64-backstopSlotBits)]
	if old := slot.Swap(t); old != nil && !old.h.closed.Load() {
		old.armBackstop()
	}
}

// sweepBackstops arms the cleanup of every waiting tensor still open.
func sweepBackstops() {
	for i := range backstops {
		if t := backstops[i].Swap(nil); t != nil && !t.h.closed.Load() {
			t.armBackstop()
		}
	}
}

// armBackstop gives t the cleanup that frees its C tensor once t is
// unreachable; a Close that ran meanwhile and found none is made up for
// here (Stop is idempotent).
func (t *Tensor) armBackstop() {
	cleanup := runtime.AddCleanup(t, releaseCollectedTensor, t.h.ptr)
	t.backstop.Store(&cleanup)
	if t.h.closed.Load() {
		cleanup.Stop()
	}
	runtime.KeepAlive(t) // across Stop
}

// stopBackstop is Close's: t is closed, and its cleanup, if armed, must not
// run.
func (t *Tensor) stopBackstop() {
	if cleanup := t.backstop.Load(); cleanup != nil {
		cleanup.Stop()
	}
}

func releaseCollectedTensor(ptr unsafe.Pointer) {
	collectedTensors.Add(1)
	collected(releaseTensor, ptr)
}

// collectedTensors counts the tensors the backstop freed (for the tests).
var collectedTensors atomic.Int64

// sweepEachGC sweeps the pending tensors after every garbage collection
// (a sentinel's cleanup runs after the collection that finds it
// unreachable, and makes the next sentinel), so that a tensor dropped
// unclosed is freed even if no more tensors are made.
func sweepEachGC() {
	sentinel := &gcSentinel{}
	runtime.AddCleanup(sentinel, func(struct{}) {
		sweepBackstops()
		gcSweeps.Add(1)
		sweepEachGC()
	}, struct{}{})
}

// gcSentinel holds a pointer so that it is not a tiny allocation, which
// can share its memory, and its reachability, with other objects.
type gcSentinel struct{ _ *int }

// gcSweeps counts sweepEachGC's sweeps (for the tests).
var gcSweeps atomic.Int64
