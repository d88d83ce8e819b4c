package manypy

/*
#include "glue.h"
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// Profiler aggregates sampled operator events by model id and operator, in
// every interpreter and the host. Safe for concurrent use.
type Profiler struct {
	h       *handle
	cleanup runtime.Cleanup // the backstop, stopped by Close
}

// ProfileEntry is one (model, operator) aggregate.
type ProfileEntry struct {
	ModelID  string // "" for operators run without a ModelID
	Operator string
	Count    uint64 // sampled calls
	TotalNS  int64
	P50NS    int64 // over the latest 4096 samples of the pair
	P99NS    int64
}

// StartProfiler starts profiling with sampling probability p in (0, 1]. It
// uses one of the 16 operator callback registrations until Close.
func StartProfiler(p float64) (*Profiler, error) {
	if err := ready(); err != nil {
		return nil, err
	}
	var prof *C.manypy_profiler
	if err := statusError(C.manypy_profiler_start(C.double(p), &prof)); err != nil {
		return nil, err
	}
	out := &Profiler{h: newHandle(unsafe.Pointer(prof), func(ptr unsafe.Pointer) {
		C.manypy_profiler_free((*C.manypy_profiler)(ptr))
	}, "profiler")}
	out.cleanup = runtime.AddCleanup(out, cleanupHandle, out.h)
	return out, nil
}

// Close stops profiling and frees the profiler. Idempotent.
func (p *Profiler) Close() { closeOwned(p.h, p.cleanup) }

// Snapshot returns the aggregates so far.
func (p *Profiler) Snapshot() ([]ProfileEntry, error) {
	ptr, err := p.h.acquire()
	if err != nil {
		return nil, err
	}
	defer p.h.release()
	var entries *C.manypy_profile_entry
	var count C.size_t
	err = statusError(C.manypy_profiler_snapshot((*C.manypy_profiler)(ptr), &entries, &count))
	runtime.KeepAlive(p)
	if err != nil {
		return nil, err
	}
	defer C.manypy_profile_entries_free(entries, count)
	out := make([]ProfileEntry, int(count))
	for i := range out {
		e := C.mpgo_profile_entry_at(entries, C.size_t(i))
		out[i] = ProfileEntry{
			ModelID: C.GoString(e.model_id), Operator: C.GoString(e.op_name),
			Count: uint64(e.count), TotalNS: int64(e.total_ns),
			P50NS: int64(e.p50_ns), P99NS: int64(e.p99_ns),
		}
	}
	return out, nil
}

// Prometheus returns the aggregates in the Prometheus text exposition
// format (a summary, manypy_operator_duration_seconds). For a
// client_golang registry, use package manypyprom instead.
func (p *Profiler) Prometheus() (string, error) {
	ptr, err := p.h.acquire()
	if err != nil {
		return "", err
	}
	defer p.h.release()
	var out *C.manypy_value
	err = statusError(C.manypy_profiler_prometheus((*C.manypy_profiler)(ptr), &out))
	runtime.KeepAlive(p)
	if err != nil {
		return "", err
	}
	return takeString(out)
}

// ChromeTrace returns the latest (up to 100,000) sampled events as Chrome
// trace-event JSON (opens in Perfetto or chrome://tracing).
func (p *Profiler) ChromeTrace() (string, error) {
	ptr, err := p.h.acquire()
	if err != nil {
		return "", err
	}
	defer p.h.release()
	var out *C.manypy_value
	err = statusError(C.manypy_profiler_chrome_trace((*C.manypy_profiler)(ptr), &out))
	runtime.KeepAlive(p)
	if err != nil {
		return "", err
	}
	return takeString(out)
}
