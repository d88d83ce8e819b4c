package manypy

/*
#include "glue.h"
*/
import "C"

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"time"
	"unsafe"
)

// NoBatchWait, as BatcherOptions.MaxWait, makes a batch of only the
// requests already waiting when its first one comes: no request waits for
// others to arrive. Any negative MaxWait means the same (0 is the default).
const NoBatchWait time.Duration = -1

// BatcherOptions configure Object.NewBatcher. The zero value is the
// library's defaults: batches of up to 8 rows, a wait of 2 ms for a batch
// to fill, batch dimension 0, the method's name in metrics.
type BatcherOptions struct {
	// MaxBatch is the most rows in a batch, 1 to 65536; 0 means 8. A
	// request with more rows than MaxBatch runs alone.
	MaxBatch int
	// MaxWait is the longest a batch waits to fill after its first request
	// came, at most a minute (microseconds are the unit: a positive value
	// below one rounds up to one). 0 means 2 ms; NoBatchWait (or any
	// negative value) waits for nothing.
	MaxWait time.Duration
	// BatchDim is the batch dimension, >= 0: every tensor argument of a
	// request must have it.
	BatchDim int
	// Name is the batcher's name in metrics (the label batcher of the
	// profiler's histogram manypy_batch_size); "" means the method's name.
	Name string
}

// Batcher combines concurrent calls of one method of an Object into one
// call, as TorchServe's and Triton's dynamic batching do. Each request
// brings tensors that carry the batch dimension (a batch-1 request's image
// is [1, 3, H, W]); requests whose other arguments are equal and whose
// tensors match in dtype and in every dimension but the batch one are
// concatenated along it, the method runs once on the batch, and each
// result tensor (also inside a Tuple, []any or *Dict) is split back: each
// request gets its own rows. Requests that cannot share a batch wait for
// batches of their own.
//
// An error fails every request of its batch with that error: a Python
// exception (ErrPython), and a result tensor whose size along the batch
// dimension is not the batch's rows (ErrBadTensor). Arguments the batcher
// cannot split (no tensor, tensors without the batch dimension or with
// different rows) fail at once with ErrInvalidArgument, and a request the
// pool's QueueLimit refuses with ErrOverloaded.
//
// Safe for concurrent use by any number of goroutines: that is its point.
// It keeps its object (and so the package and pool) alive, so they may be
// closed in any order.
type Batcher struct {
	h       *handle
	cleanup runtime.Cleanup // the backstop, stopped by Close
}

// NewBatcher returns a batcher over the named method ("" for the object
// itself, an nn.Module's forward).
func (o *Object) NewBatcher(method string, opts BatcherOptions) (*Batcher, error) {
	copts, err := opts.toC()
	if err != nil {
		return nil, err
	}
	defer C.manypy_batcher_options_free(copts)
	var out *C.manypy_batcher
	if err := o.h.use(o, func(ptr unsafe.Pointer, c cStrings) error {
		var cmethod *C.char // NULL: the object itself
		if method != "" {
			cmethod = c[0]
		}
		return statusError(C.manypy_batcher_new((*C.manypy_object)(ptr), cmethod, copts, &out))
	}, method); err != nil {
		return nil, err
	}
	b := &Batcher{}
	b.h, b.cleanup = adopt(b, unsafe.Pointer(out), func(ptr unsafe.Pointer) {
		C.manypy_batcher_free((*C.manypy_batcher)(ptr))
	}, "batcher")
	return b, nil
}

func (o *BatcherOptions) toC() (*C.manypy_batcher_options, error) {
	copts := C.manypy_batcher_options_new()
	if copts == nil {
		return nil, outOfMemory()
	}
	if err := o.fill(copts); err != nil {
		C.manypy_batcher_options_free(copts)
		return nil, err
	}
	return copts, nil
}

func (o *BatcherOptions) fill(copts *C.manypy_batcher_options) error {
	if o.MaxBatch < 0 {
		return &Error{Code: CodeOutOfRange, Message: fmt.Sprintf("max batch %d: 1 to 65536 (0: 8)", o.MaxBatch)}
	}
	if o.MaxBatch > 0 {
		if err := statusError(C.manypy_batcher_options_set_max_batch(copts, C.size_t(o.MaxBatch))); err != nil {
			return err
		}
	}
	if o.MaxWait != 0 {
		if err := statusError(C.manypy_batcher_options_set_max_wait_us(copts, C.int64_t(maxWaitMicros(o.MaxWait)))); err != nil {
			return err
		}
	}
	if o.BatchDim < 0 || o.BatchDim > math.MaxInt32 {
		return &Error{Code: CodeOutOfRange, Message: fmt.Sprintf("batch dimension %d: must be >= 0", o.BatchDim)}
	}
	if err := statusError(C.manypy_batcher_options_set_batch_dim(copts, C.int32_t(o.BatchDim))); err != nil {
		return err
	}
	if o.Name == "" {
		return nil // the method's name
	}
	return withCStrings(func(c cStrings) error {
		return statusError(C.manypy_batcher_options_set_name(copts, c[0]))
	}, o.Name)
}

// maxWaitMicros is a MaxWait that is not 0 as the C API takes it:
// microseconds, rounded up (a positive wait never becomes "no wait"), 0
// for a negative one.
func maxWaitMicros(wait time.Duration) int64 {
	if wait < 0 {
		return 0
	}
	return int64((wait + time.Microsecond - 1) / time.Microsecond)
}

// Close frees the batcher. Idempotent. Requests still waiting for their
// batch to fill are sent at once, and every request already submitted
// completes as usual; calls after Close fail with ErrClosed. It may race
// calls on other goroutines.
func (b *Batcher) Close() { closeOwned(b.h, b.cleanup) }

// Call makes one request through the batcher and returns its share of the
// batch's result, with the arguments and the context of Object.Call: the
// context's deadline and cancellation bound the request, its wait for a
// batch included, and Call returns when the context is done, with an error
// matching context.DeadlineExceeded or context.Canceled. A request stopped
// while it waits for its batch is dropped from it at once; one stopped
// while its batch runs returns at once too, and the batch runs on for the
// others. A tensor of NewTensorNoCopy stays lent until the request is
// dropped or its batch has run. The
// CallOptions' model and request ids reach operator callbacks (the first
// request's model id, the batch's request ids joined by ','); a pinned
// interpreter is ignored.
func (b *Batcher) Call(ctx context.Context, args ...any) (any, error) {
	return b.CallKw(ctx, args, nil)
}

// CallKw is Call with keyword arguments (a *Dict, Dict, map[string]any or
// nil), which must be equal for requests to share a batch.
//
// Requests are asynchronous calls of the C API (manypy_batcher_call_async)
// rather than its blocking manypy_batcher_call: the goroutine waits on a
// channel, not in C, so the dozens of requests waiting for a batch to fill
// hold no OS threads and no Ps. Blocked in C, each would hold its thread,
// and its P until the scheduler retook it (docs/go.md, "Long calls and the
// Go scheduler"). The context also cancels the request through its C
// cancel token (and bounds it by its deadline), so C drops it from its
// batch, and the goroutine returns when the context is done without
// waiting for C (pendingCall.wait), which completes a request stopped
// while its batch runs only when the batch has run.
func (b *Batcher) CallKw(ctx context.Context, args []any, kwargs any) (any, error) {
	scope, err := beginCall(ctx)
	if err != nil {
		return nil, err
	}
	// The token and the AfterFunc that cancels it live until the completion.
	defer scope.end()
	call, err := b.submit(args, kwargs, scope.opts)
	if err != nil {
		return nil, finish(ctx, err)
	}
	r, err := call.wait(ctx)
	if err != nil {
		return nil, err
	}
	if err := statusError(r.status); err != nil {
		return nil, finish(ctx, err)
	}
	return takeResult(r)
}

// submit hands one request to C, holding the handle only while it does:
// an accepted request holds the C batcher itself (manypy_batcher_free lets
// it complete), so a Close during the wait frees at once and sends the
// waiting batches.
func (b *Batcher) submit(args []any, kwargs any, opts *C.manypy_call_options) (*pendingCall, error) {
	ptr, err := b.h.acquire()
	if err != nil {
		return nil, err
	}
	defer b.h.release()
	defer runtime.KeepAlive(b)
	a, err := newCallArgs(args, kwargs)
	if err != nil {
		return nil, err
	}
	call := newPendingCall()
	status := C.mpgo_batcher_call_async((*C.manypy_batcher)(ptr), a.value, a.tensors[0], a.tensors[1],
		a.tensors[2], a.tensors[3], C.int(a.count), a.kwargs, opts, C.uintptr_t(call.handle))
	// The request holds its tensors' memory itself from here on.
	a.release()
	if status != nil {
		call.refused()
		return nil, statusError(status)
	}
	return call, nil
}
