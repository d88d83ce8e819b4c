package manypy

/*
#include <stdlib.h>
#include "glue.h"
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// Package is a torch.package archive loaded into a pool. It keeps the pool's
// interpreters alive until closed. Safe for concurrent use.
type Package struct {
	h       *handle
	cleanup runtime.Cleanup // the backstop, stopped by Close
}

func newPackage(pkg *C.manypy_package) *Package {
	p := &Package{h: newHandle(unsafe.Pointer(pkg), func(ptr unsafe.Pointer) {
		C.manypy_package_free((*C.manypy_package)(ptr))
	}, "package")}
	p.cleanup = runtime.AddCleanup(p, cleanupHandle, p.h)
	return p
}

// Close frees the package handle. Idempotent; objects loaded from it keep
// it alive.
func (p *Package) Close() { closeOwned(p.h, p.cleanup) }

// LoadPickle unpickles module/name (torch.package's load_pickle) in one
// interpreter now, so that errors surface here, and lazily in the others
// when they serve calls.
func (p *Package) LoadPickle(module, name string) (*Object, error) {
	ptr, err := p.h.acquire()
	if err != nil {
		return nil, err
	}
	defer p.h.release()
	cmodule, err := cString(module)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(cmodule))
	cname, err := cString(name)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(cname))
	var obj *C.manypy_object
	err = statusError(C.manypy_package_load_pickle((*C.manypy_package)(ptr), cmodule, cname, &obj))
	runtime.KeepAlive(p)
	if err != nil {
		return nil, err
	}
	return newObject(obj), nil
}

// ListFiles names every record of the archive, without running Python.
func (p *Package) ListFiles() ([]string, error) {
	ptr, err := p.h.acquire()
	if err != nil {
		return nil, err
	}
	defer p.h.release()
	var out *C.manypy_value
	err = statusError(C.manypy_package_list_files((*C.manypy_package)(ptr), &out))
	runtime.KeepAlive(p)
	if err != nil {
		return nil, err
	}
	return takeStrings(out)
}

// ReadFile reads one record's bytes, without running Python.
// ErrNoSuchName if there is no such record.
func (p *Package) ReadFile(name string) ([]byte, error) {
	ptr, err := p.h.acquire()
	if err != nil {
		return nil, err
	}
	defer p.h.release()
	cname, err := cString(name)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(cname))
	var out *C.manypy_value
	err = statusError(C.manypy_package_read_file((*C.manypy_package)(ptr), cname, &out))
	runtime.KeepAlive(p)
	if err != nil {
		return nil, err
	}
	return takeBytes(out)
}

// Save writes a copy of the archive to path, with extraFiles (name ->
// string or []byte; nil for none) stored as "extra/<name>", plus the export
// hook's files. The copy loads like the original.
func (p *Package) Save(path string, extraFiles map[string]any) error {
	err := saveArchive(p.h, path, extraFiles, func(ptr unsafe.Pointer, cpath *C.char, extra *C.manypy_value) *C.manypy_status {
		return C.manypy_package_save_file((*C.manypy_package)(ptr), cpath, extra)
	})
	runtime.KeepAlive(p)
	return err
}
