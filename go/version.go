package manypy

/*
#include <manypy.h>
*/
import "C"

import (
	"fmt"
	"sync"
)

// The version of manypy.h this package was compiled against.
const (
	HeaderVersionMajor = C.MANYPY_VERSION_MAJOR
	HeaderVersionMinor = C.MANYPY_VERSION_MINOR
	HeaderVersionPatch = C.MANYPY_VERSION_PATCH
)

var (
	versionOnce sync.Once
	versionErr  error
)

// ready checks, once, that the loaded libmanypy.so has this package's ABI,
// before anything else of the library runs. Every entry point calls it: a
// mismatch is an error from the first call, never a crash inside a
// function whose signature changed.
func ready() error {
	versionOnce.Do(func() { versionErr = checkVersion(uint32(C.manypy_version_number())) })
	return versionErr
}

// checkVersion applies the header's rule: the same major and, while the
// major is 0, the same minor; from 1.0 on, a minor at least the header's.
func checkVersion(number uint32) error {
	major, minor, patch := number/10000, number/100%100, number%100
	ok := major == HeaderVersionMajor &&
		(minor == HeaderVersionMinor || (major > 0 && minor > HeaderVersionMinor))
	if ok {
		return nil
	}
	return &Error{Code: CodeLoader, Message: fmt.Sprintf(
		"the loaded libmanypy.so is version %d.%d.%d but this Go package was built "+
			"against manypy.h %d.%d.x: build it against the library it runs with "+
			"(PKG_CONFIG_PATH, LD_LIBRARY_PATH)",
		major, minor, patch, HeaderVersionMajor, HeaderVersionMinor)}
}

// Version is the loaded library's version, "major.minor.patch".
func Version() string { return C.GoString(C.manypy_version_string()) }
