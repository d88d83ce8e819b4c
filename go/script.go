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

// ScriptModule is a TorchScript module run by libtorch in the host process:
// no Python, no interpreter. Safe for concurrent use.
type ScriptModule struct {
	h       *handle
	cleanup runtime.Cleanup // the backstop, stopped by Close
}

func newScriptModule(m *C.manypy_script_module) *ScriptModule {
	s := &ScriptModule{}
	s.h, s.cleanup = adopt(s, unsafe.Pointer(m), func(ptr unsafe.Pointer) {
		C.manypy_script_free((*C.manypy_script_module)(ptr))
	}, "script module")
	return s
}

// LoadScript loads a TorchScript archive (torch.jit.save). It checks only
// the host trust (SetHostArchiveTrust), if one is set: load only archives
// you trust, or use LoadScriptTrusted.
func LoadScript(path string) (*ScriptModule, error) {
	if err := ready(); err != nil {
		return nil, err
	}
	return loadScriptFile(path, nil)
}

// LoadScriptBytes loads a TorchScript archive from memory. It checks only
// the host trust, if one is set, as LoadScript.
func LoadScriptBytes(data []byte) (*ScriptModule, error) {
	if err := ready(); err != nil {
		return nil, err
	}
	return loadScriptBytes(data, nil)
}

// LoadScriptTrusted loads a TorchScript archive that trust trusts: its
// SHA-256 is listed or its Verifier accepts it (origin: the path). Any other
// fails with ErrUntrustedArchive, whose message gives the digest, before
// libtorch reads any of it: libtorch compiles an archive's code as it loads,
// and its compiler trusts that code (docs/security.md). The host trust
// (SetHostArchiveTrust), if one is set, must accept it too.
func LoadScriptTrusted(path string, trust ArchiveTrust) (*ScriptModule, error) {
	if err := ready(); err != nil {
		return nil, err
	}
	return withTrust(trust, func(ctrust *C.manypy_archive_trust) (*ScriptModule, error) {
		return loadScriptFile(path, ctrust)
	})
}

// LoadScriptBytesTrusted is LoadScriptTrusted from memory (the verifier's
// origin is "<bytes>").
func LoadScriptBytesTrusted(data []byte, trust ArchiveTrust) (*ScriptModule, error) {
	if err := ready(); err != nil {
		return nil, err
	}
	return withTrust(trust, func(ctrust *C.manypy_archive_trust) (*ScriptModule, error) {
		return loadScriptBytes(data, ctrust)
	})
}

// loadScriptFile loads path, checked by trust (nil: none) and the host
// trust, if one is set.
func loadScriptFile(path string, trust *C.manypy_archive_trust) (*ScriptModule, error) {
	var m *C.manypy_script_module
	if err := withCStrings(func(c cStrings) error {
		return statusError(C.manypy_script_load_file_trusted(c[0], trust, &m))
	}, path); err != nil {
		return nil, err
	}
	return newScriptModule(m), nil
}

func loadScriptBytes(data []byte, trust *C.manypy_archive_trust) (*ScriptModule, error) {
	var m *C.manypy_script_module
	err := statusError(C.manypy_script_load_bytes_trusted(unsafe.Pointer(unsafe.SliceData(data)),
		C.size_t(len(data)), trust, &m))
	runtime.KeepAlive(data)
	if err != nil {
		return nil, err
	}
	return newScriptModule(m), nil
}

// Close frees the module. Idempotent; waits for calls in flight.
func (s *ScriptModule) Close() { closeOwned(s.h, s.cleanup) }

// Call runs forward in inference mode. ctx's deadline and cancellation stop
// it before its next tensor operator; its CallOptions' ids reach operator
// callbacks (the pinned interpreter is ignored: there is none).
func (s *ScriptModule) Call(ctx context.Context, args ...any) (any, error) {
	return s.CallKw(ctx, "", args, nil)
}

// CallMethod runs the named method.
func (s *ScriptModule) CallMethod(ctx context.Context, method string, args ...any) (any, error) {
	return s.CallKw(ctx, method, args, nil)
}

// CallKw runs the named method ("" for forward) with keyword arguments
// (*Dict, Dict, map[string]any or nil).
func (s *ScriptModule) CallKw(ctx context.Context, method string, args []any, kwargs any) (any, error) {
	var name *string
	if method != "" {
		name = &method
	}
	out, err := invoke(ctx, s.h, name, args, kwargs, scriptCall)
	runtime.KeepAlive(s)
	return out, err
}

func scriptCall(ptr unsafe.Pointer, method *C.char, a callArgs,
	opts *C.manypy_call_options) C.mpgo_call_result {
	return C.mpgo_script_call((*C.manypy_script_module)(ptr), method, a.value, a.tensors[0],
		a.tensors[1], a.tensors[2], a.tensors[3], C.int(a.count), a.kwargs, opts)
}

// Save writes the module (torch.jit.save) to path with extraFiles (name ->
// string or []byte) as "extra/<name>", plus the export hook's files.
func (s *ScriptModule) Save(path string, extraFiles map[string]any) error {
	return saveArchive(s.h, s, path, extraFiles, func(ptr unsafe.Pointer, cpath *C.char, extra *C.manypy_value) *C.manypy_status {
		return C.manypy_script_save_file((*C.manypy_script_module)(ptr), cpath, extra)
	})
}

// SetScriptIntraOpThreads sets the host libtorch's intra-op threads, used by
// ScriptModule calls (threads that have not yet run an operator).
func SetScriptIntraOpThreads(threads int) error {
	if err := ready(); err != nil {
		return err
	}
	return statusError(C.manypy_script_set_intra_op_threads(C.int(threads)))
}
