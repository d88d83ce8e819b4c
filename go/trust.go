package manypy

/*
#include "glue.h"
*/
import "C"

import (
	"runtime/cgo"
	"slices"
)

// ArchiveTrust says which archives may run (docs/security.md): those whose
// SHA-256 is in SHA256, and those Verifier accepts. Give it to a pool
// (PoolOptions.Trust) and to TorchScript loaded on the host
// (LoadScriptTrusted, LoadScriptBytesTrusted): they refuse any other
// archive with ErrUntrustedArchive, whose message gives its digest, before
// any of it runs. One value can serve every load of a service.
//
// It is a plain value, with nothing to free: each use hands the C library a
// copy of it. The zero value, with neither digests nor a verifier, checks
// nothing (every archive loads), as the C API's NULL trust.
type ArchiveTrust struct {
	// SHA256 lists trusted archives' digests, as sha256sum prints them: 64
	// hex digits, either case. Anything else fails the load (or NewPool)
	// with ErrInvalidArgument.
	SHA256 []string
	// Verifier decides about archives not listed: it gets the archive's
	// SHA-256 and origin (the path, or "<bytes>"), and returns whether to
	// trust it. It runs on the loading goroutine's thread (and on the one
	// creating a pool, about archives its interpreters ran before) and must
	// not call manypy; a panic in it refuses the archive and is reported
	// (SetCallbackPanicHandler).
	Verifier func(sha256 [32]byte, origin string) bool
}

// or is the trust of an archive trusted by t or by the given digests and
// verifier (PoolOptions' TrustedSHA256 and ArchiveVerifier).
func (t ArchiveTrust) or(sha256 []string, verifier func([32]byte, string) bool) ArchiveTrust {
	out := ArchiveTrust{SHA256: slices.Concat(t.SHA256, sha256), Verifier: t.Verifier}
	switch {
	case verifier == nil:
	case out.Verifier == nil:
		out.Verifier = verifier
	default:
		first := out.Verifier
		out.Verifier = func(sha [32]byte, origin string) bool {
			return first(sha, origin) || verifier(sha, origin)
		}
	}
	return out
}

// withTrust runs use with the C library's copy of t, freed when use
// returns (pools and options keep copies of their own). The one place
// where the binding gives C digests and verifiers.
func withTrust[T any](t ArchiveTrust, use func(*C.manypy_archive_trust) (T, error)) (T, error) {
	var zero T
	ctrust := C.manypy_archive_trust_new()
	if ctrust == nil {
		return zero, outOfMemory()
	}
	defer C.manypy_archive_trust_free(ctrust)
	if err := addEach(t.SHA256, func(digest *C.char) *C.manypy_status {
		return C.manypy_archive_trust_add_sha256(ctrust, digest)
	}); err != nil {
		return zero, err
	}
	if t.Verifier != nil {
		// Deleted by free_user_data when the last copy of the trust goes
		// (or at once if this fails).
		h := cgo.NewHandle(t.Verifier)
		if err := statusError(C.mpgo_archive_trust_set_verifier(ctrust, C.uintptr_t(h))); err != nil {
			return zero, err
		}
	}
	return use(ctrust)
}
