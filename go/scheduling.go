package manypy

import (
	"runtime"
	"time"
)

// longCall is how long a call into Python must have run for the calling
// goroutine to yield to the Go scheduler afterwards (yieldAfterLongCall).
const longCall = 50 * time.Microsecond

// yieldAfterLongCall lets the Go scheduler see the calling goroutine
// rescheduled after a long call into Python.
//
// Why: a goroutine that makes back-to-back cgo calls is never rescheduled,
// so after 10 ms the runtime's sysmon thread takes it for a goroutine that
// hogs its P and, the goroutine being in C, retakes the P. Each retake puts
// sysmon back to waking every 20 us, and while it wakes that often it
// catches the next long calls in C too and retakes their Ps: a loop in
// which sysmon and handed-off Ps wake thousands of times a second and
// preempt the very threads that run Python. Measured with python_heavy.pt
// (calls of about 0.45 ms) from 2 goroutines on 2 cores: 5-7k context
// switches a second against about 100 for the same loop from C threads,
// and 0.6-0.8x C's throughput. runtime.Gosched after each long call costs
// well under 1 us, a fraction of a percent of a call of 50 us or more, and
// removes the cause (docs/go.md, "Performance").
func yieldAfterLongCall(start time.Time) {
	if time.Since(start) >= longCall {
		runtime.Gosched()
	}
}
