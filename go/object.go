package manypy

/*
#include "glue.h"
*/
import "C"

import (
	"context"
	"runtime"
	"unsafe"
)

// Object is a Python object (a model) unpickled from a package, replicated
// lazily into each interpreter that serves a call on it. Safe for concurrent
// use by any number of goroutines. It keeps its package and pool alive.
type Object struct {
	h       *handle
	cleanup runtime.Cleanup // the backstop, stopped by Close
}

func newObject(obj *C.manypy_object) *Object {
	o := &Object{}
	o.h, o.cleanup = adopt(o, unsafe.Pointer(obj), func(ptr unsafe.Pointer) {
		C.manypy_object_free((*C.manypy_object)(ptr))
	}, "object")
	return o
}

// Share returns a second Object for the same loaded object: it stays
// loaded until every Object for it is closed and its last call has
// completed, and closing one does not affect the others. Cheap (no Python
// runs; one allocation and a cgo call), so a caller may take one per
// request. It is what a model hot swap needs (docs/deploy.md, "Model hot
// swap"): a service keeps the current version under a lock; each request
// shares it under the lock, calls outside it and closes its share; the swap
// replaces it under the lock and closes the old one, which unloads once the
// requests holding it end. ErrClosed once o is closed.
func (o *Object) Share() (*Object, error) {
	var out *C.manypy_object
	if err := o.h.use(o, func(ptr unsafe.Pointer, _ cStrings) error {
		return statusError(C.manypy_object_share((*C.manypy_object)(ptr), &out))
	}); err != nil {
		return nil, err
	}
	return newObject(out), nil
}

// Close frees the object and drops its replicas. Idempotent. Calls in
// flight on other goroutines finish first; calls after it fail with
// ErrClosed.
func (o *Object) Close() { closeOwned(o.h, o.cleanup) }

// Call calls the object itself (an nn.Module's forward, with its hooks)
// under torch.no_grad(). ctx's deadline and cancellation stop the call's
// Python code; its CallOptions (WithCallOptions) pin an interpreter and set
// the model and request ids.
func (o *Object) Call(ctx context.Context, args ...any) (any, error) {
	return o.call(ctx, nil, args, nil)
}

// CallMethod calls the named method.
func (o *Object) CallMethod(ctx context.Context, method string, args ...any) (any, error) {
	return o.call(ctx, &method, args, nil)
}

// CallKw calls the named method ("" for the object itself) with positional
// and keyword arguments; kwargs is a *Dict, Dict, map[string]any or nil.
func (o *Object) CallKw(ctx context.Context, method string, args []any, kwargs any) (any, error) {
	if method == "" {
		return o.call(ctx, nil, args, kwargs)
	}
	return o.call(ctx, &method, args, kwargs)
}

func (o *Object) call(ctx context.Context, method *string, args []any, kwargs any) (any, error) {
	out, err := invoke(ctx, o.h, method, args, kwargs, objectCall)
	runtime.KeepAlive(o)
	return out, err
}

func objectCall(ptr unsafe.Pointer, method *C.char, a callArgs,
	opts *C.manypy_call_options) C.mpgo_call_result {
	return C.mpgo_object_call((*C.manypy_object)(ptr), method, a.value, a.tensors[0], a.tensors[1],
		a.tensors[2], a.tensors[3], C.int(a.count), a.kwargs, opts)
}

// Attr reads an attribute (a property runs Python code, so ctx applies).
func (o *Object) Attr(ctx context.Context, name string) (any, error) {
	return produced(func(out **C.manypy_value) error {
		return o.h.use(o, func(ptr unsafe.Pointer, c cStrings) error {
			return bounded(ctx, func(opts *C.manypy_call_options) error {
				return statusError(C.manypy_object_getattr((*C.manypy_object)(ptr), c[0], opts, out))
			})
		}, name)
	}, takeValue)
}

// HasAttr tells whether the object has the attribute.
func (o *Object) HasAttr(name string) (bool, error) {
	var has C.int
	err := o.h.use(o, func(ptr unsafe.Pointer, c cStrings) error {
		return statusError(C.manypy_object_hasattr((*C.manypy_object)(ptr), c[0], &has))
	}, name)
	return has != 0, err
}

// WithHandle runs fn with the object's manypy_object* (for C code of the
// caller's own, through cgo), holding the handle so that a concurrent Close
// waits. fn must not keep the pointer or free it.
func (o *Object) WithHandle(fn func(ptr unsafe.Pointer)) error {
	return o.h.use(o, func(ptr unsafe.Pointer, _ cStrings) error {
		fn(ptr)
		return nil
	})
}
