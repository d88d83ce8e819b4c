package manypy

// The serving lifecycle of a pool (manypy.h, since 0.3): health (Stats),
// resizing, graceful drain, request metrics, and the callback told of
// interpreters that fail to start in the background.

/*
#include "glue.h"
*/
import "C"

import (
	"context"
	"fmt"
	"runtime/cgo"
	"sync/atomic"
	"time"
	"unsafe"
)

// setOnInterpreterFailed gives copts the callback, if there is one. Its
// cgo.Handle is the C callback's user data, owned by the library from the
// setter on: mpgoFreeInterpreterFailed deletes it when the last of the
// options and the pools created from them lets go of it (a C pool once its
// last handle, package, object, batcher and call are gone, which may be
// after the last Go handle is closed), or at once if the setter fails.
func setOnInterpreterFailed(copts *C.manypy_pool_options, onFailed func(int, error)) error {
	if onFailed == nil {
		return nil
	}
	h := cgo.NewHandle(onFailed)
	interpreterFailedHandles.Add(1)
	return statusError(C.mpgo_pool_options_set_on_interpreter_failed(copts, C.uintptr_t(h)))
}

// interpreterFailedHandles counts the OnInterpreterFailed handles not yet
// deleted (for the tests).
var interpreterFailedHandles atomic.Int64

//export mpgoFreeInterpreterFailed
func mpgoFreeInterpreterFailed(h C.uintptr_t) {
	defer recoverCallback("free_user_data")
	cgo.Handle(h).Delete() // panics, reported, if deleted before
	interpreterFailedHandles.Add(-1)
}

//export mpgoOnInterpreterFailed
func mpgoOnInterpreterFailed(h C.uintptr_t, index C.int32_t, why *C.manypy_status) {
	defer recoverCallback("interpreter failed callback")
	// Live as long as C may call: deleted only by the free hook.
	fn := cgo.Handle(h).Value().(func(int, error))
	err := borrowedStatus(why) // copied now: the status is the caller's
	// On a goroutine of its own, not on the library's thread: the callback
	// may then call the pool, even free it (which joins that thread), and
	// block without holding up the pool's other starts.
	go func() {
		defer recoverCallback("interpreter failed callback")
		fn(int(index), err)
	}()
}

// Name is PoolOptions.Name: the pool label of its metrics ("" for none).
func (p *Pool) Name() string { return p.name }

// PoolStats is a pool's health at one moment, for readiness probes,
// dashboards and autoscalers (Pool.Stats). The counts are read lock-free,
// a moment apart.
type PoolStats struct {
	// Draining is true once Drain was called: the pool refuses new calls.
	Draining bool
	// Interpreters is Size(): Starting, Ready, Busy, Broken and Lost add up
	// to it.
	Interpreters int
	Starting     int // not yet able to serve: starting, or being leased
	Ready        int // serving, with no call
	Busy         int // serving, with at least one call
	Broken       int // failed to start, or retired (CheckInterpreter says why)
	InFlight     int // as InFlight: calls admitted and not complete
	Queued       int // as Queued: calls waiting for an interpreter
	// Completed counts the calls completed since the pool was created, by
	// code (only codes with calls are present): Completed[CodeOK]
	// succeeded, Completed[CodePython] raised, and so on. Calls refused at
	// admission (CodeOverloaded, CodeDraining) count too.
	Completed map[Code]uint64
	// Lost counts the interpreters in which a stopped call still runs twice
	// its grace period (and at least 1 s) after its stop (model code swallowing the stop where
	// Python cannot raise it, or C code holding the GIL): they serve no
	// other call while it runs, and CheckInterpreter says why
	// (docs/serving.md, "Lost interpreters").
	Lost int
	// Replaced counts the retired interpreters replaced since the pool was
	// created; a replacement takes the retired one's index. Since 0.4.
	Replaced uint64
	// NoRoom is true while a retired interpreter waits for a replacement
	// the process has no room for (its interpreters all leased, retired or
	// distrusted); the pool tries again each second. Since 0.4.
	NoRoom bool
}

// Serving tells whether the pool can serve a call now: at least one
// interpreter is ready or busy, and it is not draining. What a readiness
// probe answers. ServingAtLeast(1).
func (s PoolStats) Serving() bool { return s.ServingAtLeast(1) }

// ServingAtLeast tells whether the pool serves with at least min
// interpreters (ready or busy; at least 1 whatever min), and is not
// draining: a readiness probe for a service that needs that capacity, whose
// pool has lost or retired interpreters below it (docs/serving.md,
// "Readiness, liveness and restarts").
func (s PoolStats) ServingAtLeast(min int) bool {
	if min < 1 {
		min = 1
	}
	return !s.Draining && s.Ready+s.Busy >= min
}

// Stats returns the pool's health (PoolStats); ErrClosed once closed.
func (p *Pool) Stats() (PoolStats, error) {
	var s C.manypy_pool_stats
	s.struct_size = C.uint32_t(unsafe.Sizeof(s))
	if err := p.h.use(p, func(ptr unsafe.Pointer, _ cStrings) error {
		return statusError(C.manypy_pool_get_stats((*C.manypy_pool)(ptr), &s))
	}); err != nil {
		return PoolStats{}, err
	}
	return PoolStats{
		Draining:     s.draining != 0,
		Interpreters: int(s.interpreters),
		Starting:     int(s.starting),
		Ready:        int(s.ready),
		Busy:         int(s.busy),
		Broken:       int(s.broken),
		InFlight:     int(s.in_flight),
		Queued:       int(s.queued),
		Completed:    codeCounts(s.completed[:]),
		Lost:         int(s.lost),
		Replaced:     uint64(s.replaced),
		NoRoom:       s.no_room != 0,
	}, nil
}

// codeCounts is a C per-code array (MANYPY_CODE_SLOTS) as a map of the
// codes with counts.
func codeCounts(counts []C.uint64_t) map[Code]uint64 {
	out := make(map[Code]uint64)
	for code, n := range counts {
		if n != 0 {
			out[Code(code)] = uint64(n)
		}
	}
	return out
}

// Resize resizes the pool to n interpreters, 1 to MaxInterpreters().
// Growing leases interpreters from the process (starting new ones) and
// returns once they serve; one that fails to start stays in the pool,
// broken, and the first failure is returned. Shrinking takes the highest
// indices out of the pool at once (calls pinned to them then fail with
// ErrOutOfRange; calls running there finish first) and gives them back to
// the process for other pools: their memory stays with the process
// (docs/memory.md). ErrOutOfRange for n outside [1, MaxInterpreters()],
// ErrResourceExhausted when the process has too few interpreters left,
// ErrDraining once the pool drains, ErrClosed once closed. Resizes of one
// pool are serialized.
func (p *Pool) Resize(n int) error {
	if n < 0 {
		return &Error{Code: CodeOutOfRange, Message: fmt.Sprintf(
			"a pool needs 1 to %d interpreters on this platform, not %d", MaxInterpreters(), n)}
	}
	old := 0
	err := p.h.use(p, func(ptr unsafe.Pointer, _ cStrings) error {
		pool := (*C.manypy_pool)(ptr)
		old = int(C.manypy_pool_size(pool))
		return statusError(C.manypy_pool_resize(pool, C.size_t(n)))
	})
	if err == nil && n > old {
		var opts PoolOptions // GOMAXPROCS as for a new pool of the added ones
		reserveIdlePs(&opts, n-old)
	}
	return err
}

// DrainResult is what Pool.Drain waited for: of the calls in flight when it
// began, how many finished by themselves and how many it cancelled.
type DrainResult struct {
	Finished  int
	Cancelled int
}

// Drain drains the pool gracefully, for a service that is stopping
// (SIGTERM) or moving traffic away: from now on the pool refuses new calls
// with ErrDraining (through its packages, objects and batchers too), while
// the calls already running or queued go on. Drain returns when none is
// left.
//
// ctx bounds the wait: at its deadline (the C drain's own deadline) or when
// it is cancelled, the calls left are cancelled, as by a cancel token (they
// end with ErrCancelled), and Drain returns once they have had their stop
// grace (PoolOptions.StopGrace) twice over to end. Without a deadline or
// cancellation it waits for them. A ctx already done cancels them at once.
// Neither case is an error: DrainResult says how many calls finished and
// how many were cancelled.
//
// A pool never stops draining. Calling Drain again, or from several
// goroutines, is allowed: each waits in the same way and counts the calls
// in flight when it began. It may race Close: the pool is freed after
// Drain returns. ErrClosed once closed.
func (p *Pool) Drain(ctx context.Context) (DrainResult, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	var result DrainResult
	err := p.h.use(p, func(ptr unsafe.Pointer, _ cStrings) error {
		pool := (*C.manypy_pool)(ptr)
		var deadline int64 // 0: none
		if d, ok := ctx.Deadline(); ok {
			deadline = monotonicDeadline(d)
		}
		if ctx.Err() != nil {
			deadline = 1 // passed: what is left is cancelled at once
		}
		// A cancellation before the deadline: a second drain, whose
		// deadline has passed, cancels what is left (the first one then
		// sees the pool idle). The deadline is the first drain's own.
		type counts struct {
			result DrainResult
			err    error
		}
		early := make(chan counts, 1)
		stop := context.AfterFunc(ctx, func() {
			if ctx.Err() != context.Canceled {
				early <- counts{}
				return
			}
			r, err := drain(pool, 1)
			early <- counts{r, err}
		})
		first, err := drain(pool, deadline)
		if !stop() { // the AfterFunc ran, or runs: wait for it
			second := <-early
			if err == nil {
				err = second.err
			}
			// Each counts the calls in flight when it began, and whichever
			// began first saw them all (no call is admitted once a pool
			// drains); the larger count of cancelled ones is the truth.
			total := max(first.Finished+first.Cancelled,
				second.result.Finished+second.result.Cancelled)
			first.Cancelled = max(first.Cancelled, second.result.Cancelled)
			first.Finished = total - first.Cancelled
		}
		result = first
		return err
	})
	return result, err
}

// drain is one manypy_pool_drain.
func drain(pool *C.manypy_pool, deadline int64) (DrainResult, error) {
	var finished, cancelled C.size_t
	err := statusError(C.manypy_pool_drain(pool, C.int64_t(deadline), &finished, &cancelled))
	return DrainResult{Finished: int(finished), Cancelled: int(cancelled)}, err
}

// monotonicDeadline is d as an absolute CLOCK_MONOTONIC deadline in
// nanoseconds (manypy_monotonic_ns), at least 1 (0 means none to C).
func monotonicDeadline(d time.Time) int64 {
	now := int64(C.manypy_monotonic_ns())
	return max(now+time.Until(d).Nanoseconds(), 1)
}

// RequestMetrics are one model's request metrics in a pool since it was
// created (Pool.RequestMetrics). A call's model is the ModelID of its
// CallOptions, "" for calls without one.
type RequestMetrics struct {
	Model string
	// Completed counts the calls by code, refusals (CodeOverloaded,
	// CodeDraining) included; only codes with calls are present.
	Completed map[Code]uint64
	// Request: from admission to completion. Queue: from admission until
	// the call began running in its interpreter (in Direct mode, until it
	// held the interpreter's GIL). Refused calls have neither.
	Request, Queue Histogram
}

// Histogram is a histogram of durations in seconds, as Prometheus's.
type Histogram struct {
	Count uint64  // observations (the +Inf bucket)
	Sum   float64 // their sum, in seconds
	// Buckets are cumulative, by ascending upper bound: Buckets[i].Count
	// observations were <= Buckets[i].UpperBound. The library's bounds,
	// the same for every histogram.
	Buckets []Bucket
}

// Bucket is one cumulative bucket of a Histogram.
type Bucket struct {
	UpperBound float64 // seconds
	Count      uint64
}

// RequestMetrics returns every model's request metrics, in the order the
// models were first called; ErrClosed once closed.
func (p *Pool) RequestMetrics() ([]RequestMetrics, error) {
	var out []RequestMetrics
	err := p.h.use(p, func(ptr unsafe.Pointer, _ cStrings) error {
		var metrics *C.manypy_request_metrics
		var count C.size_t
		if err := statusError(C.manypy_pool_request_metrics((*C.manypy_pool)(ptr), &metrics, &count)); err != nil {
			return err
		}
		defer C.manypy_request_metrics_free(metrics, count)
		out = make([]RequestMetrics, int(count))
		for i := range out {
			m := C.mpgo_request_metrics_at(metrics, C.size_t(i))
			n := int(m.num_buckets)
			bounds := unsafe.Slice((*float64)(unsafe.Pointer(m.bucket_bounds)), n)
			out[i] = RequestMetrics{
				Model:     C.GoString(m.model),
				Completed: codeCounts(m.completed[:]),
				Request: histogram(bounds, unsafe.Slice((*uint64)(unsafe.Pointer(m.request_buckets)), n),
					uint64(m.request_count), float64(m.request_seconds_sum)),
				Queue: histogram(bounds, unsafe.Slice((*uint64)(unsafe.Pointer(m.queue_buckets)), n),
					uint64(m.queue_count), float64(m.queue_seconds_sum)),
			}
		}
		return nil
	})
	return out, err
}

// histogram copies a C histogram out.
func histogram(bounds []float64, cumulative []uint64, count uint64, sum float64) Histogram {
	h := Histogram{Count: count, Sum: sum, Buckets: make([]Bucket, len(bounds))}
	for i := range bounds {
		h.Buckets[i] = Bucket{UpperBound: bounds[i], Count: cumulative[i]}
	}
	return h
}

// PrometheusText returns the pool's metrics in the Prometheus text
// exposition format, as the C library writes them
// (manypy_pool_prometheus): manypy_requests_total{model,code}, the
// histograms manypy_request_duration_seconds{model} and
// manypy_queue_duration_seconds{model}, the gauges
// manypy_inflight_requests, manypy_queued_requests and
// manypy_interpreters{state}, and manypy_draining, each with pool="<Name>"
// when the pool has a name. For a handler of its own; a client_golang
// registry takes manypyprom.ServingCollector, which exports the same
// series. ErrClosed once closed.
func (p *Pool) PrometheusText() (string, error) {
	return useValue(p.h, p, func(ptr unsafe.Pointer, _ cStrings, out **C.manypy_value) *C.manypy_status {
		return C.manypy_pool_prometheus((*C.manypy_pool)(ptr), out)
	}, takeString)
}
