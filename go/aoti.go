package manypy

/*
#include "glue.h"
*/
import "C"

import (
	"context"
	"fmt"
	"runtime"
	"unsafe"
)

// AotiModule is a model that torch.export captured and AOTInductor compiled
// to native code: a .pt2 package (torch._inductor.aoti_compile_and_package),
// run by libtorch's own package loader in the host process. No Python, no
// interpreter: PyTorch's successor to TorchScript for models that need no
// Python. It has no methods; it takes the tensors its example inputs had,
// in their structure, and returns the structure the model returned (a
// *Tensor, or Tuple, []any and *Dict of them). It needs manypy built against
// torch 2.6 or newer: on another build every load fails with
// ErrUnsupportedVersion, whose message names the torch needed.
//
// Safe for concurrent use: any number of goroutines may call it at once. Up
// to one call per core runs at a time; more wait for a free copy of the
// model's buffers.
type AotiModule struct {
	h       *handle
	cleanup runtime.Cleanup // the backstop, stopped by Close
}

func newAotiModule(m *C.manypy_aoti_module) *AotiModule {
	a := &AotiModule{}
	a.h, a.cleanup = adopt(a, unsafe.Pointer(m), func(ptr unsafe.Pointer) {
		C.manypy_aoti_free((*C.manypy_aoti_module)(ptr))
	}, "aoti module")
	return a
}

// LoadAoti loads a .pt2 package. A package holds a compiled library, and
// loading it runs that library's code: LoadAoti checks only the host trust
// (SetHostArchiveTrust), if one is set. Load only packages you trust, or
// use LoadAotiTrusted.
//
// Besides ErrNotFound and ErrUntrustedArchive, a load fails with
// ErrUnsupportedVersion for a manypy built without AOTInductor or a
// package compiled for what this host is not (another device, CPU
// architecture, instruction set or OS), ErrLoader when its compiled library
// does not load (compiled against another torch, or a library it needs is
// missing), ErrNotAPackage for a PyTorch archive that is no AOTInductor
// package (TorchScript, a torch.package, an exported program without a
// compiled model), and ErrBadArchive for a truncated or inconsistent one.
func LoadAoti(path string) (*AotiModule, error) {
	if err := ready(); err != nil {
		return nil, err
	}
	return loadAotiFile(path, nil)
}

// LoadAotiBytes loads a .pt2 package from memory (copied: data may be
// reused at once). It checks only the host trust, as LoadAoti.
func LoadAotiBytes(data []byte) (*AotiModule, error) {
	if err := ready(); err != nil {
		return nil, err
	}
	return loadAotiBytes(data, nil)
}

// LoadAotiTrusted loads a .pt2 package that trust trusts: its SHA-256 is
// listed or its Verifier accepts it (origin: the path). Any other fails with
// ErrUntrustedArchive, whose message gives the digest, before libtorch reads
// any of it. The host trust (SetHostArchiveTrust), if one is set, must
// accept it too.
func LoadAotiTrusted(path string, trust ArchiveTrust) (*AotiModule, error) {
	if err := ready(); err != nil {
		return nil, err
	}
	return withTrust(trust, func(ctrust *C.manypy_archive_trust) (*AotiModule, error) {
		return loadAotiFile(path, ctrust)
	})
}

// LoadAotiBytesTrusted is LoadAotiTrusted from memory (the verifier's
// origin is "<bytes>").
func LoadAotiBytesTrusted(data []byte, trust ArchiveTrust) (*AotiModule, error) {
	if err := ready(); err != nil {
		return nil, err
	}
	return withTrust(trust, func(ctrust *C.manypy_archive_trust) (*AotiModule, error) {
		return loadAotiBytes(data, ctrust)
	})
}

// loadAotiFile loads path, checked by trust (nil: none) and the host trust,
// if one is set.
func loadAotiFile(path string, trust *C.manypy_archive_trust) (*AotiModule, error) {
	var m *C.manypy_aoti_module
	if err := withCStrings(func(c cStrings) error {
		return statusError(C.manypy_aoti_load_file(c[0], trust, &m))
	}, path); err != nil {
		return nil, err
	}
	return newAotiModule(m), nil
}

func loadAotiBytes(data []byte, trust *C.manypy_archive_trust) (*AotiModule, error) {
	var m *C.manypy_aoti_module
	err := statusError(C.manypy_aoti_load_bytes(unsafe.Pointer(unsafe.SliceData(data)),
		C.size_t(len(data)), trust, &m))
	runtime.KeepAlive(data)
	if err != nil {
		return nil, err
	}
	return newAotiModule(m), nil
}

// Close frees the module. Idempotent; waits for calls in flight, which
// finish first, and calls after it fail with ErrClosed.
func (a *AotiModule) Close() { closeOwned(a.h, a.cleanup) }

// Call runs the model in inference mode with positional arguments, whose
// structure must be that of its example inputs, tensors at the leaves.
// Contiguous tensors are passed without copies; results are new tensors,
// Go's alone.
//
// Arguments that do not fit fail without running: ErrInvalidArgument for
// the wrong number of arguments or a missing or extra keyword (the message
// names the structure expected), ErrWrongKind for a value that is not a
// tensor where a tensor belongs, and ErrBadTensor for a dtype, shape or
// device the model was not compiled for. A failure of the compiled model is
// ErrPython, with its message.
//
// ctx's deadline and cancellation are checked before the compiled model
// starts and when it returns: compiled kernels cannot be stopped while they
// run, so a call that ends after its deadline (or its cancellation) drops
// its result and fails with an error matching context.DeadlineExceeded (or
// context.Canceled). Its CallOptions' ids reach operator callbacks, which
// see one operator per call, "manypy::aoti_run" (the pinned interpreter is
// ignored: there is none).
func (a *AotiModule) Call(ctx context.Context, args ...any) (any, error) {
	return a.CallKw(ctx, args, nil)
}

// CallKw is Call with keyword arguments (*Dict, Dict, map[string]any or
// nil), for a model exported with keyword example inputs.
func (a *AotiModule) CallKw(ctx context.Context, args []any, kwargs any) (any, error) {
	out, err := invoke(ctx, a.h, nil, args, kwargs, aotiCall)
	runtime.KeepAlive(a)
	return out, err
}

func aotiCall(ptr unsafe.Pointer, _ *C.char, a callArgs,
	opts *C.manypy_call_options) C.mpgo_call_result {
	return C.mpgo_aoti_call((*C.manypy_aoti_module)(ptr), a.value, a.tensors[0], a.tensors[1],
		a.tensors[2], a.tensors[3], C.int(a.count), a.kwargs, opts)
}

// Metadata is what AOTInductor recorded when it compiled the model
// (AOTI_DEVICE_KEY, AOTI_CPU_ISA, AOTI_MACHINE, ...). A package's extra
// files are records of the archive: ArchiveReadFile reads them, and
// ArchiveSaveCopy writes a copy with more.
func (a *AotiModule) Metadata() (map[string]string, error) {
	return useValue(a.h, a, func(ptr unsafe.Pointer, _ cStrings, out **C.manypy_value) *C.manypy_status {
		return C.manypy_aoti_metadata((*C.manypy_aoti_module)(ptr), out)
	}, takeStringMap)
}

// takeStringMap converts a C dict of strings to Go and frees it.
func takeStringMap(v *C.manypy_value) (map[string]string, error) {
	out, err := takeValue(v)
	if err != nil {
		return nil, err
	}
	d, ok := out.(*Dict)
	if !ok {
		return nil, &Error{Code: CodeWrongKind, Message: fmt.Sprintf("expected a dict of strings, got a %T", out)}
	}
	m := make(map[string]string, d.Len())
	for i := range d.Len() {
		key, value := d.At(i)
		s, ok := value.(string)
		if !ok {
			return nil, &Error{Code: CodeWrongKind, Message: fmt.Sprintf("expected a dict of strings, got a %T at %q", value, key)}
		}
		m[key] = s
	}
	return m, nil
}
