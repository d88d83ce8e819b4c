package manypy

/*
#include "glue.h"
*/
import "C"

import (
	"runtime/cgo"
	"sync"
)

// OpCallbacks is a registration of operator callbacks (AddOpCallbacks).
// Safe for concurrent use.
type OpCallbacks struct {
	id   uint64
	once sync.Once
	err  error
}

// AddOpCallbacks registers callbacks around torch operators, sampled with
// probability p in (0, 1], in every interpreter of the process (those
// started later too) and in the host's libtorch (ScriptModule). enter and
// exit may be nil. With needsInputs, events carry each input's kind, dtype
// and shape.
//
// Callbacks run on the thread running the operator: concurrently, on
// threads Go did not create (torch's, the HANDOFF threads). They must be
// quick and must not call manypy. A panic in one is recovered and reported
// (SetCallbackPanicHandler); the operator goes on. At most 16 registrations
// live at once (ErrResourceExhausted). A registration stays until Remove,
// however unreachable it becomes, as a listener would.
func AddOpCallbacks(enter, exit func(*OpEvent), p float64, needsInputs bool) (*OpCallbacks, error) {
	if err := ready(); err != nil {
		return nil, err
	}
	inputs := 0
	if needsInputs {
		inputs = 1
	}
	// Deleted by free_user_data: after the registration is removed, or at
	// once if this fails.
	h := cgo.NewHandle(&opCallbacks{enter: enter, exit: exit})
	var id C.uint64_t
	err := statusError(C.mpgo_add_op_callbacks(boolInt(enter != nil), boolInt(exit != nil),
		C.uintptr_t(h), C.double(p), C.int(inputs), &id))
	if err != nil {
		return nil, err
	}
	return &OpCallbacks{id: uint64(id)}, nil
}

func boolInt(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// Remove removes the registration: when it returns, no callback of it runs
// or will run. Idempotent.
func (r *OpCallbacks) Remove() error {
	r.once.Do(func() { r.err = statusError(C.manypy_remove_op_callbacks(C.uint64_t(r.id))) })
	return r.err
}

// SetAPIUsageHandler installs handler for the process (nil removes it),
// replacing any earlier one. It is called once per distinct API usage key
// (torch's, manypy's, the caller's and model code's), first, before this
// returns, with every key already seen. It may run on any thread, while the
// library holds a lock: it must return quickly and must not call manypy.
func SetAPIUsageHandler(handler func(key string)) error {
	if err := ready(); err != nil {
		return err
	}
	var h cgo.Handle
	if handler != nil {
		h = cgo.NewHandle(handler) // deleted when replaced or removed
	}
	// If this fails (out of memory), the header does not say whether
	// free_user_data ran: the handle is left, rather than deleted twice.
	return statusError(C.mpgo_set_api_usage_handler(C.uintptr_t(h)))
}

// LogAPIUsage logs a key of the caller's; a key already seen is ignored.
func LogAPIUsage(key string) error {
	return callLibrary(func(c cStrings) error {
		return statusError(C.manypy_log_api_usage(c[0]))
	}, key)
}

// SetExportHook installs the process-wide export hook (nil removes it): it
// returns files (name -> string or []byte) to add, as "extra/<name>", to
// every archive written in the process: Package.Save,
// ScriptModule.Save, ArchiveSaveCopy, and torch.jit.save and torch.package's
// PackageExporter in any interpreter. It runs on the writing thread, under a
// lock, and must not call manypy. A panic (or a file that is neither string
// nor []byte) adds no files and is reported; the archive is still written.
func SetExportHook(hook func() map[string]any) error {
	if err := ready(); err != nil {
		return err
	}
	var h cgo.Handle
	if hook != nil {
		h = cgo.NewHandle(hook)
	}
	// On failure the C side has freed the user data (capi/src/archive.cpp).
	return statusError(C.mpgo_set_export_hook(C.uintptr_t(h)))
}

// LoadOperatorLibrary loads a custom operator library (TORCH_LIBRARY) into
// the host's libtorch and every interpreter, present and future. It is
// never unloaded.
func LoadOperatorLibrary(path string) error {
	return callLibrary(func(c cStrings) error {
		return statusError(C.manypy_load_operator_library(c[0]))
	}, path)
}

// ArchiveListFiles names the records of any PyTorch archive (TorchScript,
// torch.package or an AOTInductor .pt2 package), read without Python.
func ArchiveListFiles(path string) ([]string, error) {
	return produced(func(out **C.manypy_value) error {
		return callLibrary(func(c cStrings) error {
			return statusError(C.manypy_archive_list_files(c[0], out))
		}, path)
	}, takeStrings)
}

// ArchiveReadFile reads one record of an archive (extra files are
// "extra/<name>"); ErrNoSuchName if absent.
func ArchiveReadFile(path, name string) ([]byte, error) {
	return produced(func(out **C.manypy_value) error {
		return callLibrary(func(c cStrings) error {
			return statusError(C.manypy_archive_read_file(c[0], c[1], out))
		}, path, name)
	}, takeBytes)
}

// ArchiveSaveCopy writes a copy of the PyTorch archive at path (TorchScript,
// torch.package or .pt2) to newPath with libtorch's writer, with extraFiles
// (name -> string or []byte) as "extra/<name>" (replacing records of those
// names), plus the export hook's files: how a pipeline stamps metadata on an
// archive it did not write through manypy. The copy loads like the
// original; its digest differs, so a trust must list it anew. Errors as
// ArchiveListFiles, and ErrNotFound for a newPath that cannot be written.
func ArchiveSaveCopy(path, newPath string, extraFiles map[string]any) error {
	return callLibrary(func(c cStrings) error {
		extra, err := extraFilesValue(extraFiles)
		if err != nil {
			return err
		}
		defer C.manypy_value_free(extra)
		return statusError(C.manypy_archive_save_copy(c[0], c[1], extra))
	}, path, newPath)
}

// callLibrary runs fn, which calls a process-wide C function (no handle),
// with strs as C strings (withCStrings), once the library's version is
// checked.
func callLibrary(fn func(c cStrings) error, strs ...string) error {
	if err := ready(); err != nil {
		return err
	}
	return withCStrings(fn, strs...)
}
