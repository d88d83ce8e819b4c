package manypy

// Completions of asynchronous C calls (manypy_call_done_fn): the library
// runs the completion on one of its own threads, glue.c's call_done takes
// the outcome, and mpgoCallDone hands it to the goroutine waiting for it
// on a channel. The goroutine parks as any goroutine waiting on a channel:
// it holds no OS thread and no P while the call waits and runs, which
// matters for a Batcher, whose requests wait for batches to fill by the
// dozen.

/*
#include "glue.h"
*/
import "C"

import (
	"context"
	"runtime/cgo"
	"sync/atomic"
)

// completion is the outcome of an asynchronous call, as mpgo_object_call
// returns a synchronous one: a status, or the result (a tensor taken as a
// manypy_tensor, any other value as it is).
type completion = C.mpgo_call_result

// pendingCall is one submitted asynchronous call: its handle is the
// user_data given to C, and done receives the outcome, exactly once.
type pendingCall struct {
	handle cgo.Handle
	done   chan completion
}

func newPendingCall() *pendingCall {
	// Buffered: the completion never waits for the goroutine, so the
	// library's thread goes back to its queue at once.
	done := make(chan completion, 1)
	pendingCalls.Add(1)
	return &pendingCall{handle: cgo.NewHandle(done), done: done}
}

// pendingCalls counts the calls whose outcome nobody has taken yet:
// submitted, or refused and not yet told so. The tests check that it
// comes back to where it was: no outcome is lost or leaked.
var pendingCalls atomic.Int64

// refused is the end of a call that C refused at submission: its
// completion will never run, so the handle is deleted here.
func (p *pendingCall) refused() {
	p.handle.Delete()
	pendingCalls.Add(-1)
}

// wait returns the outcome once the completion has run, or the context's
// error if ctx is done first. The call's C options carry the same deadline
// and cancel token, but C may complete a stopped call only later (a Batcher
// request stopped while its batch runs completes when the batch has run):
// the goroutine does not wait for that, and the late outcome is freed when
// it comes (discard).
func (p *pendingCall) wait(ctx context.Context) (completion, error) {
	var done <-chan struct{}
	if ctx != nil {
		done = ctx.Done()
	}
	select {
	case r := <-p.done:
		pendingCalls.Add(-1)
		return r, nil
	case <-done:
		select {
		case r := <-p.done: // it completed too: keep its outcome
			pendingCalls.Add(-1)
			return r, nil
		default:
		}
		go discard(p.done)
		return completion{}, stoppedWhen(ctx.Err(), "before the call completed")
	}
}

// discard frees the outcome of a call nobody waits for any more.
func discard(done chan completion) {
	r := <-done
	C.manypy_status_free(r.status)
	C.manypy_value_free(r.value)
	if r.tensor != nil {
		C.manypy_tensor_release(r.tensor)
	}
	pendingCalls.Add(-1)
}

// mpgoCallDone is the completion of every asynchronous call (glue.c's
// call_done): it runs once per accepted call, on a thread of the library's,
// and must return quickly and never unwind into C. The handle is the
// call's own, deleted here, after the one send.
//
//export mpgoCallDone
func mpgoCallDone(h C.uintptr_t, status *C.manypy_status, value *C.manypy_value,
	tensor *C.manypy_tensor, dl *C.DLTensor) {
	defer recoverCallback("call completion")
	handle := cgo.Handle(h)
	done := handle.Value().(chan completion)
	handle.Delete()
	done <- completion{status: status, value: value, tensor: tensor, dl: dl}
}
