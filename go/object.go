package manypy

/*
#include <stdlib.h>
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
	o := &Object{h: newHandle(unsafe.Pointer(obj), func(ptr unsafe.Pointer) {
		C.manypy_object_free((*C.manypy_object)(ptr))
	}, "object")}
	o.cleanup = runtime.AddCleanup(o, cleanupHandle, o.h)
	return o
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
	ptr, err := o.h.acquire()
	if err != nil {
		return nil, err
	}
	defer o.h.release()
	cname, err := cString(name)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(cname))
	scope, err := beginCall(ctx)
	if err != nil {
		return nil, err
	}
	var out *C.manypy_value
	err = statusError(C.manypy_object_getattr((*C.manypy_object)(ptr), cname, scope.opts, &out))
	scope.end()
	runtime.KeepAlive(o)
	if err != nil {
		return nil, finish(ctx, err)
	}
	return takeValue(out)
}

// HasAttr tells whether the object has the attribute.
func (o *Object) HasAttr(name string) (bool, error) {
	ptr, err := o.h.acquire()
	if err != nil {
		return false, err
	}
	defer o.h.release()
	cname, err := cString(name)
	if err != nil {
		return false, err
	}
	defer C.free(unsafe.Pointer(cname))
	var has C.int
	err = statusError(C.manypy_object_hasattr((*C.manypy_object)(ptr), cname, &has))
	runtime.KeepAlive(o)
	return has != 0, err
}

// WithHandle runs fn with the object's manypy_object* (for C code of the
// caller's own, through cgo), holding the handle so that a concurrent Close
// waits. fn must not keep the pointer or free it.
func (o *Object) WithHandle(fn func(ptr unsafe.Pointer)) error {
	ptr, err := o.h.acquire()
	if err != nil {
		return err
	}
	defer o.h.release()
	fn(ptr)
	runtime.KeepAlive(o)
	return nil
}
