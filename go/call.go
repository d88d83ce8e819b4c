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

// callArgs are a call's arguments on their way to C (glue.h's
// mpgo_object_call): the positional arguments as a value or, for the common
// call whose arguments are 1 to 4 tensors, the tensors themselves, held
// until the call returns and made into a tuple inside the call's one cgo
// transition.
type callArgs struct {
	value   *C.manypy_value // nil when the tensors are the arguments
	tensors [4]C.uintptr_t  // *C.manypy_tensor (glue.h says why uintptr_t)
	held    [4]*Tensor      // acquired until release
	count   int             // how many of tensors and held are set
	kwargs  *C.manypy_value
}

// newCallArgs converts args, and kwargs (a *Dict, Dict, map[string]any or
// nil). The C call frees value and kwargs; release lets go of the tensors.
func newCallArgs(args []any, kwargs any) (callArgs, error) {
	var a callArgs
	err := a.init(args, kwargs)
	return a, err
}

// init is newCallArgs in place, on a zero callArgs (the synchronous calls'
// path: it spares them copies of the struct). On failure a holds nothing.
func (a *callArgs) init(args []any, kwargs any) error {
	tensors, err := a.holdTensors(args)
	if err != nil {
		return err
	}
	if !tensors && len(args) > 0 {
		if a.value, err = sequenceValue(C.manypy_value_new_tuple(), args, 1); err != nil {
			a.value = nil
			return err
		}
	}
	if a.kwargs, err = kwargsValue(kwargs); err != nil {
		a.release()
		C.manypy_value_free(a.value)
		*a = callArgs{}
		return err
	}
	return nil
}

// holdTensors acquires args if they are 1 to 4 tensors, and reports
// whether they were; otherwise it holds nothing.
func (a *callArgs) holdTensors(args []any) (bool, error) {
	if len(args) == 0 || len(args) > len(a.tensors) {
		return false, nil
	}
	for _, arg := range args {
		if t, ok := arg.(*Tensor); !ok || t == nil {
			return false, nil
		}
	}
	for i, arg := range args {
		t := arg.(*Tensor)
		ptr, err := t.h.acquire()
		if err != nil {
			a.release()
			return false, err
		}
		a.held[i], a.tensors[i] = t, C.uintptr_t(uintptr(ptr))
		a.count = i + 1
	}
	return true, nil
}

// release lets go of the held tensors: once the call has returned, its
// arguments hold their own references on the tensors' memory.
func (a *callArgs) release() {
	for _, t := range a.held[:a.count] {
		t.h.release()
	}
	a.count = 0
}

// callFunc makes one call through glue.h on a handle's pointer: the one cgo
// transition of a call, freeing a.value and a.kwargs.
type callFunc func(ptr unsafe.Pointer, method *C.char, a callArgs,
	opts *C.manypy_call_options) C.mpgo_call_result

// invoke is the body of every call of Object, ScriptModule and AotiModule:
// it holds the handle, maps ctx onto the C call options, converts the
// arguments, makes the call and converts its result. method nil calls the
// object itself (an AotiModule has no methods).
func invoke(ctx context.Context, h *handle, method *string, args []any, kwargs any,
	call callFunc) (any, error) {
	ptr, err := h.acquire()
	if err != nil {
		return nil, err
	}
	defer h.release()
	r, err := callHeld(ctx, ptr, method, args, kwargs, call)
	if err != nil {
		return nil, err
	}
	return takeResult(r)
}

// callHeld is invoke's call on the held pointer. It is a function of its
// own for its defers: Go runs a function's defers inline (open-coded) only
// when its returns times its defers are at most 15, and the defer records
// of invoke as one function cost a call 5%.
func callHeld(ctx context.Context, ptr unsafe.Pointer, method *string, args []any, kwargs any,
	call callFunc) (C.mpgo_call_result, error) {
	var r C.mpgo_call_result
	var cmethod *C.char
	if method != nil {
		var err error
		if cmethod, err = cString(*method); err != nil {
			return r, err
		}
		defer C.free(unsafe.Pointer(cmethod))
	}
	var scope callScope // the fast path's (background): no options
	if ctx != background {
		var err error
		if scope, err = beginCall(ctx); err != nil {
			return r, err
		}
		defer scope.end()
	}
	var a callArgs
	if err := a.init(args, kwargs); err != nil {
		return r, err
	}
	r = call(ptr, cmethod, a, scope.opts)
	a.release()
	if r.yield != 0 {
		runtime.Gosched() // scheduling.go
	}
	return r, finish(ctx, statusError(r.status))
}

// takeResult converts a call's result to Go.
func takeResult(r C.mpgo_call_result) (any, error) {
	if r.tensor != nil {
		return wrapTensor(r.tensor, r.dl)
	}
	return takeValue(r.value)
}
