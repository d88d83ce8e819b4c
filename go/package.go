package manypy

/*
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
	p := &Package{}
	p.h, p.cleanup = adopt(p, unsafe.Pointer(pkg), func(ptr unsafe.Pointer) {
		C.manypy_package_free((*C.manypy_package)(ptr))
	}, "package")
	return p
}

// Close frees the package handle. Idempotent; objects loaded from it keep
// it alive.
func (p *Package) Close() { closeOwned(p.h, p.cleanup) }

// LoadPickle unpickles module/name (torch.package's load_pickle) in one
// interpreter now, so that errors surface here, and lazily in the others
// when they serve calls.
func (p *Package) LoadPickle(module, name string) (*Object, error) {
	var obj *C.manypy_object
	if err := p.h.use(p, func(ptr unsafe.Pointer, c cStrings) error {
		return statusError(C.manypy_package_load_pickle((*C.manypy_package)(ptr), c[0], c[1], &obj))
	}, module, name); err != nil {
		return nil, err
	}
	return newObject(obj), nil
}

// ListFiles names every record of the archive, without running Python.
func (p *Package) ListFiles() ([]string, error) {
	return useValue(p.h, p, func(ptr unsafe.Pointer, _ cStrings, out **C.manypy_value) *C.manypy_status {
		return C.manypy_package_list_files((*C.manypy_package)(ptr), out)
	}, takeStrings)
}

// ReadFile reads one record's bytes, without running Python.
// ErrNoSuchName if there is no such record.
func (p *Package) ReadFile(name string) ([]byte, error) {
	return useValue(p.h, p, func(ptr unsafe.Pointer, c cStrings, out **C.manypy_value) *C.manypy_status {
		return C.manypy_package_read_file((*C.manypy_package)(ptr), c[0], out)
	}, takeBytes, name)
}

// Save writes a copy of the archive to path, with extraFiles (name ->
// string or []byte; nil for none) stored as "extra/<name>", plus the export
// hook's files. The copy loads like the original.
func (p *Package) Save(path string, extraFiles map[string]any) error {
	return saveArchive(p.h, p, path, extraFiles, func(ptr unsafe.Pointer, cpath *C.char, extra *C.manypy_value) *C.manypy_status {
		return C.manypy_package_save_file((*C.manypy_package)(ptr), cpath, extra)
	})
}
