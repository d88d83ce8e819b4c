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
// (PoolOptions.Trust), to TorchScript and AOTInductor packages loaded on
// the host (LoadScriptTrusted, LoadScriptBytesTrusted, LoadAotiTrusted,
// LoadAotiBytesTrusted), or to every host load (SetHostArchiveTrust): they
// refuse any other archive with ErrUntrustedArchive, whose message gives
// its digest, before any of it runs. One value can serve every load of a
// service.
//
// It is a plain value, with nothing to free: each use hands the C library a
// copy of it. The zero value, with neither digests nor a verifier, checks
// nothing, as the C API's NULL trust: a pool given it loads every archive,
// and a host load given it checks only the host trust, if one is set.
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

// zero reports whether t checks nothing of its own.
func (t ArchiveTrust) zero() bool { return len(t.SHA256) == 0 && t.Verifier == nil }

// SetHostArchiveTrust sets the host trust: what every host load checks
// (LoadScript, LoadAoti, their Bytes forms and their Trusted forms), so
// that a service can refuse, with one call at start-up, every model it does
// not know. A load given a trust of its own must satisfy both (the message
// says which refused): code that loads a model can narrow the policy, never
// widen it. Pools have their own (PoolOptions.Trust). nil, or the zero
// ArchiveTrust, removes it.
//
// The library keeps a copy: changing *trust afterwards changes nothing. It
// is process-wide, and any goroutine may set it; a load already past its
// check is not affected. A Verifier in it is asked about every host load
// its digests do not list, on the loading goroutine's thread, and is
// released when the host trust is replaced or removed. A digest that is not
// 64 hex digits fails with ErrInvalidArgument and leaves the host trust as
// it was.
func SetHostArchiveTrust(trust *ArchiveTrust) error {
	if err := ready(); err != nil {
		return err
	}
	if trust == nil || trust.zero() {
		return statusError(C.manypy_set_host_archive_trust(nil))
	}
	_, err := withTrust(*trust, func(ctrust *C.manypy_archive_trust) (struct{}, error) {
		return struct{}{}, statusError(C.manypy_set_host_archive_trust(ctrust))
	})
	return err
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
