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
	out := &Profiler{}
	out.h, out.cleanup = adopt(out, unsafe.Pointer(prof), func(ptr unsafe.Pointer) {
		C.manypy_profiler_free((*C.manypy_profiler)(ptr))
	}, "profiler")
	return out, nil
}

// Close stops profiling and frees the profiler. Idempotent.
func (p *Profiler) Close() { closeOwned(p.h, p.cleanup) }

// Snapshot returns the aggregates so far.
func (p *Profiler) Snapshot() ([]ProfileEntry, error) {
	var entries *C.manypy_profile_entry
	var count C.size_t
	if err := p.h.use(p, func(ptr unsafe.Pointer, _ cStrings) error {
		return statusError(C.manypy_profiler_snapshot((*C.manypy_profiler)(ptr), &entries, &count))
	}); err != nil {
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
	return useValue(p.h, p, func(ptr unsafe.Pointer, _ cStrings, out **C.manypy_value) *C.manypy_status {
		return C.manypy_profiler_prometheus((*C.manypy_profiler)(ptr), out)
	}, takeString)
}

// ChromeTrace returns the latest (up to 100,000) sampled events as Chrome
// trace-event JSON (opens in Perfetto or chrome://tracing).
func (p *Profiler) ChromeTrace() (string, error) {
	return useValue(p.h, p, func(ptr unsafe.Pointer, _ cStrings, out **C.manypy_value) *C.manypy_status {
		return C.manypy_profiler_chrome_trace((*C.manypy_profiler)(ptr), out)
	}, takeString)
}
