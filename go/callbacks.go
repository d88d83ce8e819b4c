package manypy

// The //export trampolines: the C library calls them, on threads Go may not
// have created (HANDOFF threads, torch's threads inside interpreters), and
// cgo runs them as Go. Each recovers any panic: a panic must never unwind
// into C frames. user_data is always a cgo.Handle, deleted in free_user_data
// (mpgoFreeHandle; mpgoFreeInterpreterFailed in serving.go), never
// earlier.

/*
#include "glue.h"
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"runtime/cgo"
	"runtime/debug"
	"sync/atomic"
	"unsafe"
)

// CallbackPanic describes a panic recovered in a callback.
type CallbackPanic struct {
	Callback string // "op callback", "api usage handler", "export hook", "archive verifier", "interpreter failed callback"
	Value    any    // what was passed to panic
	Stack    []byte
}

var panicHandler atomic.Pointer[func(CallbackPanic)]

// SetCallbackPanicHandler sets what happens to a panic recovered in a
// callback (nil restores the default, which prints it with its stack to
// standard error). The handler runs on the callback's thread and must not
// panic itself (a panic there is dropped).
func SetCallbackPanicHandler(handler func(CallbackPanic)) {
	if handler == nil {
		panicHandler.Store(nil)
		return
	}
	panicHandler.Store(&handler)
}

// recoverCallback is deferred by every trampoline.
func recoverCallback(callback string) {
	value := recover()
	if value == nil {
		return
	}
	report := CallbackPanic{Callback: callback, Value: value, Stack: debug.Stack()}
	defer func() { _ = recover() }() // a panicking handler must not reach C either
	if h := panicHandler.Load(); h != nil {
		(*h)(report)
		return
	}
	fmt.Fprintf(os.Stderr, "manypy: panic in %s (recovered): %v\n%s", callback, value, report.Stack)
}

//export mpgoFreeHandle
func mpgoFreeHandle(h C.uintptr_t) {
	defer recoverCallback("free_user_data")
	cgo.Handle(h).Delete()
}

//export mpgoReleaseBuffer
func mpgoReleaseBuffer(h C.uintptr_t) {
	defer recoverCallback("tensor release")
	handle := cgo.Handle(h)
	handle.Value().(*runtime.Pinner).Unpin()
	handle.Delete()
	releasedBuffers.Add(1)
}

// releasedBuffers counts zero-copy buffers manypy released (for the tests).
var releasedBuffers atomic.Int64

// OpInput is one input of an operator (when inputs were asked for).
type OpInput struct {
	// Kind: "tensor", "int64", "double", "bool", "none" or "other".
	Kind  string
	DType DType // tensors
	Shape []int64
}

// OpEvent is one sampled torch operator. It is the callback's own copy.
type OpEvent struct {
	Name           string // e.g. "aten::add"
	SequenceNumber int64
	ThreadID       uint64 // the OS thread (gettid) running the operator
	Interpreter    int    // index in the process's interpreters; -1: the host
	StartNS, EndNS int64  // CLOCK_MONOTONIC; EndNS is 0 in the enter callback
	ModelID        string // the call's CallOptions, "" if none
	RequestID      string
	Inputs         []OpInput // nil unless inputs were asked for
}

type opCallbacks struct {
	enter, exit func(*OpEvent)
}

//export mpgoOnOpEvent
func mpgoOnOpEvent(event *C.manypy_op_event, h C.uintptr_t, exit C.int) {
	defer recoverCallback("op callback")
	callbacks := cgo.Handle(h).Value().(*opCallbacks)
	fn := callbacks.enter
	if exit != 0 {
		fn = callbacks.exit
	}
	fn(convertEvent(event))
}

var inputKinds = map[C.int32_t]string{
	C.MANYPY_VALUE_TENSOR: "tensor", C.MANYPY_VALUE_INT64: "int64",
	C.MANYPY_VALUE_DOUBLE: "double", C.MANYPY_VALUE_BOOL: "bool", C.MANYPY_VALUE_NONE: "none",
}

func convertEvent(e *C.manypy_op_event) *OpEvent {
	out := &OpEvent{
		Name:           C.GoString(e.name),
		SequenceNumber: int64(e.sequence_number),
		ThreadID:       uint64(e.thread_id),
		Interpreter:    int(e.interpreter),
		StartNS:        int64(e.start_ns),
		EndNS:          int64(e.end_ns),
		ModelID:        C.GoString(e.model_id),
		RequestID:      C.GoString(e.request_id),
	}
	if n := int(e.num_inputs); n > 0 {
		out.Inputs = make([]OpInput, n)
		for i := range out.Inputs {
			in := C.mpgo_op_event_input(e, C.size_t(i))
			kind, ok := inputKinds[in.kind]
			if !ok {
				kind = "other"
			}
			input := OpInput{Kind: kind}
			if in.kind == C.MANYPY_VALUE_TENSOR {
				input.DType, _ = dtypeOfDL(uint8(in.dtype.code), uint8(in.dtype.bits), uint8(in.dtype.lanes))
				if in.ndim > 0 {
					input.Shape = append([]int64(nil), unsafe.Slice((*int64)(unsafe.Pointer(in.shape)), int(in.ndim))...)
				}
			}
			out.Inputs[i] = input
		}
	}
	return out
}

//export mpgoOnAPIUsage
func mpgoOnAPIUsage(key *C.char, h C.uintptr_t) {
	defer recoverCallback("api usage handler")
	cgo.Handle(h).Value().(func(string))(C.GoString(key))
}

//export mpgoExportHook
func mpgoExportHook(h C.uintptr_t) (files unsafe.Pointer) {
	defer recoverCallback("export hook") // a panicking hook adds no files
	hook := cgo.Handle(h).Value().(func() map[string]any)
	value, err := extraFilesValue(hook())
	if err != nil {
		panic(fmt.Errorf("the export hook's files: %w", err))
	}
	return unsafe.Pointer(value)
}

//export mpgoVerifyArchive
func mpgoVerifyArchive(sha *C.uint8_t, origin *C.char, h C.uintptr_t) (trusted C.int) {
	defer recoverCallback("archive verifier") // a panicking verifier refuses
	var digest [32]byte
	copy(digest[:], unsafe.Slice((*byte)(unsafe.Pointer(sha)), 32))
	if cgo.Handle(h).Value().(func([32]byte, string) bool)(digest, C.GoString(origin)) {
		return 1
	}
	return 0
}
