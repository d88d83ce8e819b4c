package manypy

// Calls into Python and the Go scheduler (docs/go.md, "Long calls and the
// Go scheduler", has the measurements).
//
// Calls into Python are long cgo calls. Go's sysmon thread retakes the P of
// a goroutine that has been in C for two of its ticks when no P is idle,
// and of any goroutine it has not seen rescheduled for 10 ms; each retake
// sets sysmon back to a 20 us tick, at which it catches the next calls too.
// In that loop sysmon and the handed-off Ps wake thousands of times a
// second and preempt the threads that run Python: python_heavy from 2
// goroutines ran at 0.56-0.80x the throughput of 2 pthreads. Two measures:
//
//   - NewPool raises GOMAXPROCS so that Ps stay idle while every
//     interpreter is busy (reserveIdlePs);
//   - a goroutine yields (runtime.Gosched) after a call when its thread
//     has not yielded for 5 ms: glue.c's time_to_yield decides, per
//     thread, and call.go's invoke yields. Per thread, not after every
//     call: a goroutine locked to its thread (runtime.LockOSThread) hands
//     its P away and back on each yield, and yielding after every call
//     cost one a third of its throughput. Of every call, every 2 ms and
//     every 5 ms, 5 ms gave the best throughput, and it keeps every
//     goroutine rescheduled well inside sysmon's 10 ms.

import (
	"os"
	"runtime"
	"sync"
)

var gomaxprocs struct {
	sync.Mutex
	base         int // GOMAXPROCS before the first raise
	interpreters int // of every pool NewPool made
}

// reserveIdlePs raises GOMAXPROCS, if it is lower, to its value before the
// first pool plus the interpreters of every pool made so far (at most
// MaxInterpreters), so that Ps stay idle while every interpreter is busy.
// It never lowers it, and leaves it alone when the GOMAXPROCS environment
// variable is set or PoolOptions.KeepGOMAXPROCS asks.
func reserveIdlePs(opts *PoolOptions, interpreters int) {
	if opts.KeepGOMAXPROCS || os.Getenv("GOMAXPROCS") != "" {
		return
	}
	gomaxprocs.Lock()
	defer gomaxprocs.Unlock()
	if gomaxprocs.base == 0 {
		gomaxprocs.base = runtime.GOMAXPROCS(0)
	}
	gomaxprocs.interpreters = min(gomaxprocs.interpreters+interpreters, MaxInterpreters())
	if want := gomaxprocs.base + gomaxprocs.interpreters; runtime.GOMAXPROCS(0) < want {
		runtime.GOMAXPROCS(want)
	}
}
