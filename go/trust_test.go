package manypy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// sha256Hex is a sample archive's digest as sha256sum prints it.
func sha256Hex(t *testing.T, name string) string {
	t.Helper()
	sum := sha256.Sum256(readBytes(t, name))
	return hex.EncodeToString(sum[:])
}

// checkInverts calls invert_script.pt's forward, ~mask.
func checkInverts(t *testing.T, module *ScriptModule) {
	t.Helper()
	defer module.Close()
	mask := must(NewTensor([]bool{true, false, true}, 3))
	defer mask.Close()
	out := must(module.Call(bg, mask)).(*Tensor)
	defer out.Close()
	if got := must(TensorCopy[bool](out)); !slices.Equal(got, []bool{false, true, false}) {
		t.Errorf("invert: %v", got)
	}
}

// verifierLog records what a verifier was asked (origins), and refuses.
type verifierLog struct {
	mu      sync.Mutex
	digests []string
	origins []string
}

func (l *verifierLog) refuse(sha [32]byte, origin string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.digests = append(l.digests, hex.EncodeToString(sha[:]))
	l.origins = append(l.origins, origin)
	return false
}

func (l *verifierLog) expect(t *testing.T, digest string, origins ...string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !slices.Equal(l.origins, origins) {
		t.Errorf("verifier asked about %v, want %v", l.origins, origins)
	}
	for _, d := range l.digests {
		if d != digest {
			t.Errorf("verifier got digest %s, want %s", d, digest)
		}
	}
}

// One ArchiveTrust for TorchScript on the host and for pools. In a child
// process: a pool with an allow-list leases only interpreters whose whole
// history it trusts (docs/security.md, "Pools with different trust"), and
// the tests before this one leave none such (TestUnclosedPoolsAreCollected
// starts every interpreter of the process and runs archives in them). Every
// pool here lists identity.pt, so whatever order the subtests run in, each
// finds interpreters it trusts and no verifier is asked about what ran
// before.
func TestArchiveTrust(t *testing.T) {
	if !isolated(t) {
		return
	}
	invertDigest := sha256Hex(t, "invert_script.pt")
	identityDigest := sha256Hex(t, "identity.pt")
	loopPath, loopDigest := archive(t, "loop_script.pt"), sha256Hex(t, "loop_script.pt")
	loopBytes := readBytes(t, "loop_script.pt")

	t.Run("AllowListOnTheHost", func(t *testing.T) {
		trust := ArchiveTrust{SHA256: []string{invertDigest, identityDigest}}
		_, err := LoadScriptTrusted(loopPath, trust)
		expectCode(t, err, CodeUntrustedArchive, loopDigest)
		_, err = LoadScriptBytesTrusted(loopBytes, trust)
		expectCode(t, err, CodeUntrustedArchive, loopDigest)
		// Without a trust nothing is checked (what the trust is for), and
		// so with the zero ArchiveTrust, as the C API's NULL trust.
		must(LoadScriptBytes(loopBytes)).Close()
		must(LoadScriptTrusted(loopPath, ArchiveTrust{})).Close()

		checkInverts(t, must(LoadScriptTrusted(archive(t, "invert_script.pt"), trust)))
		checkInverts(t, must(LoadScriptBytesTrusted(readBytes(t, "invert_script.pt"), trust)))
		upper := ArchiveTrust{SHA256: []string{strings.ToUpper(invertDigest)}}
		checkInverts(t, must(LoadScriptTrusted(archive(t, "invert_script.pt"), upper)))
	})

	t.Run("VerifierOnTheHost", func(t *testing.T) {
		var log verifierLog
		trust := ArchiveTrust{SHA256: []string{invertDigest}, Verifier: log.refuse}
		_, err := LoadScriptTrusted(loopPath, trust)
		expectCode(t, err, CodeUntrustedArchive, loopDigest)
		_, err = LoadScriptBytesTrusted(loopBytes, trust)
		expectCode(t, err, CodeUntrustedArchive, loopDigest)
		checkInverts(t, must(LoadScriptTrusted(archive(t, "invert_script.pt"), trust))) // listed: not asked
		log.expect(t, loopDigest, loopPath, "<bytes>")

		byPath := ArchiveTrust{Verifier: func(_ [32]byte, origin string) bool {
			return strings.HasSuffix(origin, "loop_script.pt")
		}}
		must(LoadScriptTrusted(loopPath, byPath)).Close()
		_, err = LoadScriptBytesTrusted(loopBytes, byPath)
		expectCode(t, err, CodeUntrustedArchive, "")

		// A verifier that panics refuses, and the panic is reported.
		reported := make(chan string, 1)
		SetCallbackPanicHandler(func(p CallbackPanic) { reported <- p.Callback })
		defer SetCallbackPanicHandler(nil)
		panicky := ArchiveTrust{Verifier: func([32]byte, string) bool { panic("no") }}
		_, err = LoadScriptTrusted(archive(t, "invert_script.pt"), panicky)
		expectCode(t, err, CodeUntrustedArchive, "")
		if got := <-reported; got != "archive verifier" {
			t.Errorf("reported %q", got)
		}
	})

	t.Run("Pools", func(t *testing.T) {
		runsCode := archive(t, "malformed/runs_code.pt")
		runsCodeDigest := sha256Hex(t, "malformed/runs_code.pt")
		var log verifierLog
		trust := ArchiveTrust{SHA256: []string{invertDigest, identityDigest}, Verifier: log.refuse}
		pool := newPool(t, PoolOptions{Trust: trust})
		// runs_code.pt's pickle would write a file: refused before it runs.
		_, err := pool.LoadPackage(runsCode)
		expectCode(t, err, CodeUntrustedArchive, runsCodeDigest)
		_, err = pool.LoadPackageBytes(readBytes(t, "malformed/runs_code.pt"))
		expectCode(t, err, CodeUntrustedArchive, runsCodeDigest)
		log.expect(t, runsCodeDigest, runsCode, "<bytes>")
		model := loadModel(t, pool, "identity.pt")
		x := must(NewTensor([]float32{1, 2}, 2))
		defer x.Close()
		if got := tensorFloats(t, must(model.Call(bg, x))); !slices.Equal(got, []float32{1, 2}) {
			t.Errorf("identity: %v", got)
		}
		checkInverts(t, must(LoadScriptTrusted(archive(t, "invert_script.pt"), trust)))

		// TrustedSHA256 and ArchiveVerifier add to Trust.
		onlyInvert := ArchiveTrust{SHA256: []string{invertDigest}, Verifier: log.refuse}
		accepted := 0
		both := newPool(t, PoolOptions{Trust: onlyInvert, TrustedSHA256: []string{identityDigest},
			ArchiveVerifier: func(_ [32]byte, origin string) bool {
				accepted++
				return origin == "<bytes>"
			}})
		must(both.LoadPackage(archive(t, "identity.pt"))).Close()
		_, err = both.LoadPackage(runsCode)
		expectCode(t, err, CodeUntrustedArchive, runsCodeDigest)
		if accepted != 1 {
			t.Errorf("PoolOptions.ArchiveVerifier asked %d times, want 1", accepted)
		}
		log.expect(t, runsCodeDigest, runsCode, "<bytes>", runsCode) // Trust.Verifier, then it
	})

	t.Run("BadDigests", func(t *testing.T) {
		for _, bad := range []string{"", "not a digest", strings.Repeat("0", 63), strings.Repeat("0", 65),
			strings.Repeat("g", 64), strings.Repeat("0", 64) + "\x00"} {
			trust := ArchiveTrust{SHA256: []string{invertDigest, bad}}
			_, err := LoadScriptTrusted(archive(t, "invert_script.pt"), trust)
			if !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("LoadScriptTrusted with %q: %v, want ErrInvalidArgument", bad, err)
			}
			_, err = LoadScriptBytesTrusted(readBytes(t, "invert_script.pt"), trust)
			if !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("LoadScriptBytesTrusted with %q: %v, want ErrInvalidArgument", bad, err)
			}
			_, err = NewPool(PoolOptions{Trust: trust})
			if !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("NewPool with %q: %v, want ErrInvalidArgument", bad, err)
			}
		}
	})

	// The verifier's handle is deleted once the last copy of the trust goes
	// (the pool's, here): the func becomes garbage, which a cleanup on what
	// it holds shows. Deleting a cgo.Handle twice panics in mpgoFreeHandle,
	// which reports it: none may be reported.
	t.Run("VerifierReleasedOnce", func(t *testing.T) {
		panics := make(chan CallbackPanic, 8)
		SetCallbackPanicHandler(func(p CallbackPanic) { panics <- p })
		defer SetCallbackPanicHandler(nil)
		released := make(chan struct{}, 1)
		var asked atomic.Int32
		func() {
			held := new(int)
			runtime.AddCleanup(held, func(ch chan struct{}) { ch <- struct{}{} }, released)
			trust := ArchiveTrust{SHA256: []string{identityDigest}, Verifier: func([32]byte, string) bool {
				*held++
				asked.Add(1)
				return false
			}}
			pool := must(NewPool(PoolOptions{Trust: trust}))
			defer pool.Close()
			_, err := LoadScriptTrusted(loopPath, trust)
			expectCode(t, err, CodeUntrustedArchive, "")
			_, err = pool.LoadPackage(archive(t, "malformed/runs_code.pt"))
			expectCode(t, err, CodeUntrustedArchive, "")
			// A NewPool that fails after its options took the trust
			// deletes that copy's handle too.
			_, err = NewPool(PoolOptions{Trust: trust, Interpreters: MaxInterpreters() + 1})
			expectCode(t, err, CodeOutOfRange, "")
		}()
		if n := asked.Load(); n != 2 {
			t.Errorf("the verifier was asked %d times, want 2", n)
		}
		for deadline := time.Now().Add(30 * time.Second); ; {
			runtime.GC()
			select {
			case <-released:
			case <-time.After(20 * time.Millisecond):
				if time.Now().Before(deadline) {
					continue
				}
				t.Fatal("the verifier was never released: a handle to it is still live")
			}
			break
		}
		select {
		case p := <-panics:
			t.Fatalf("a callback panicked (a handle deleted twice?): %s: %v", p.Callback, p.Value)
		default:
		}
	})
}
