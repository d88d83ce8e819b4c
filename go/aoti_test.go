package manypy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// AOTInductor packages (.pt2) on the host, and the host trust.
//
// The sample packages (samples/models/make_pt2.py) are made only where
// manypy is built with AOTInductor (torch 2.6 or newer: the torch 2.x leg).
// Where they are not (torch 1.13), each test that needs them checks instead
// that every load is refused with ErrUnsupportedVersion naming the torch
// needed: no test passes by skipping. The host trust over TorchScript and
// ArchiveSaveCopy of a TorchScript archive run on both.

// aotiAvailable reports whether this build runs .pt2 packages: whether the
// sample packages were made. If not, it checks that loads are refused as
// they must be there, and the caller returns.
func aotiAvailable(t *testing.T) bool {
	t.Helper()
	if _, err := os.Stat(archive(t, "python_heavy.pt2")); err == nil {
		return true
	} else if !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	expectRefused := func(what string, _ *AotiModule, err error) {
		t.Helper()
		e := expectCode(t, err, CodeUnsupportedVersion, "torch 2.6 or newer")
		if !strings.Contains(e.Message, "built against torch 1.") {
			t.Errorf("%s: %q does not name the torch of this build", what, e.Message)
		}
	}
	m, err := LoadAoti(archive(t, "python_heavy_script.pt"))
	expectRefused("LoadAoti", m, err)
	m, err = LoadAotiBytes([]byte("PK\x03\x04"))
	expectRefused("LoadAotiBytes", m, err)
	m, err = LoadAotiTrusted(archive(t, "python_heavy_script.pt"), ArchiveTrust{
		SHA256: []string{sha256Hex(t, "python_heavy_script.pt")}})
	expectRefused("LoadAotiTrusted", m, err)
	m, err = LoadAotiBytesTrusted(readBytes(t, "python_heavy_script.pt"), ArchiveTrust{
		Verifier: func([32]byte, string) bool { return true }})
	expectRefused("LoadAotiBytesTrusted", m, err)
	t.Log("no .pt2 sample packages (manypy built without AOTInductor): loads are refused, as they must be")
	return false
}

// heavyPt2 is python_heavy.pt2's input and expected outputs.
type heavyPt2 struct {
	input, logits, norm []float32
}

func loadHeavyPt2(t *testing.T) heavyPt2 {
	t.Helper()
	return heavyPt2{
		input:  readFloats(t, "python_heavy.input.bin"),
		logits: readFloats(t, "python_heavy_pt2.expected.logits.bin"),
		norm:   readFloats(t, "python_heavy_pt2.expected.norm.bin"),
	}
}

// check compares a result of python_heavy.pt2's forward ({"logits": [4,
// 10], "norm": [4]}) with the expected values and closes its tensors.
func (h heavyPt2) check(out any) error {
	d, ok := out.(*Dict)
	if !ok {
		return fmt.Errorf("a %T, not a *Dict", out)
	}
	defer closeTensors(d)
	if !slices.Equal(d.Keys(), []string{"logits", "norm"}) {
		return fmt.Errorf("keys %v", d.Keys())
	}
	logits, _ := d.Get("logits")
	if err := checkShaped(logits, []int64{4, 10}, h.logits); err != nil {
		return fmt.Errorf("logits: %w", err)
	}
	norm, _ := d.Get("norm")
	if err := checkShaped(norm, []int64{4}, h.norm); err != nil {
		return fmt.Errorf("norm: %w", err)
	}
	return nil
}

func closeTensors(d *Dict) {
	for i := range d.Len() {
		if _, v := d.At(i); v != nil {
			if t, ok := v.(*Tensor); ok {
				t.Close()
			}
		}
	}
}

// checkShaped compares a float32 result tensor's shape and values (1e-4).
func checkShaped(v any, shape []int64, want []float32) error {
	tensor, ok := v.(*Tensor)
	if !ok {
		return fmt.Errorf("a %T, not a *Tensor", v)
	}
	if tensor.DType() != Float32 || !slices.Equal(tensor.Shape(), shape) {
		return fmt.Errorf("%v, want float32 %v", tensor, shape)
	}
	got, err := TensorView[float32](tensor)
	if err != nil {
		return err
	}
	return closeTo(got, want, 1e-4)
}

func loadAoti(t *testing.T, name string) *AotiModule {
	t.Helper()
	m := must(LoadAoti(archive(t, name)))
	t.Cleanup(m.Close)
	return m
}

// python_heavy.pt2 from a file and resnet18.pt2 from bytes against their
// expected outputs; inputs copied and lent; Close.
func TestAotiOutputs(t *testing.T) {
	if !aotiAvailable(t) {
		return
	}
	heavy := loadHeavyPt2(t)
	m := must(LoadAoti(archive(t, "python_heavy.pt2")))
	x := must(NewTensor(heavy.input, 4, 64))
	defer x.Close()
	for i := 0; i < 2; i++ { // the second call finds nothing of the first
		if err := heavy.check(must(m.Call(bg, x))); err != nil {
			t.Errorf("python_heavy.pt2, call %d: %v", i, err)
		}
	}
	// A lent input (zero copy), and the keyword form with no keywords.
	lent := must(NewTensorNoCopy(slices.Clone(heavy.input), 4, 64))
	defer lent.Close()
	if err := heavy.check(must(m.CallKw(bg, []any{lent}, map[string]any{}))); err != nil {
		t.Errorf("python_heavy.pt2, lent input: %v", err)
	}
	if err := heavy.check(must(m.CallKw(bg, []any{x}, nil))); err != nil {
		t.Errorf("python_heavy.pt2, CallKw: %v", err)
	}
	m.Close()
	m.Close() // idempotent
	if _, err := m.Call(bg, x); !errors.Is(err, ErrClosed) {
		t.Errorf("a call after Close: %v", err)
	}
	if _, err := m.Metadata(); !errors.Is(err, ErrClosed) {
		t.Errorf("Metadata after Close: %v", err)
	}

	// From bytes, which are copied: the caller's buffer may change at once.
	raw := readBytes(t, "resnet18.pt2")
	resnet := must(LoadAotiBytes(raw))
	defer resnet.Close()
	clear(raw)
	in := must(NewTensor(readFloats(t, "resnet18.input.bin"), caseShape(t, "resnet18")...))
	defer in.Close()
	out := must(resnet.Call(bg, in))
	defer out.(*Tensor).Close()
	if err := checkShaped(out, []int64{1, 1000}, readFloats(t, "resnet18_pt2.expected.out.bin")); err != nil {
		t.Errorf("resnet18.pt2 from bytes: %v", err)
	}
}

// What AOTInductor recorded, and the API usage key of a load.
func TestAotiMetadata(t *testing.T) {
	if !aotiAvailable(t) {
		return
	}
	var mu sync.Mutex
	seen := map[string]int{}
	must(0, SetAPIUsageHandler(func(key string) {
		mu.Lock()
		seen[key]++
		mu.Unlock()
	}))
	defer SetAPIUsageHandler(nil)
	m := loadAoti(t, "python_heavy.pt2")
	meta := must(m.Metadata())
	if meta["AOTI_DEVICE_KEY"] != "cpu" {
		t.Errorf("AOTI_DEVICE_KEY %q in %v", meta["AOTI_DEVICE_KEY"], meta)
	}
	mu.Lock()
	if seen["manypy.aoti.load"] != 1 {
		t.Errorf("manypy.aoti.load seen %d times", seen["manypy.aoti.load"])
	}
	mu.Unlock()
}

// Arguments that do not fit are each refused with their code, and the
// module serves on.
func TestAotiBadArguments(t *testing.T) {
	if !aotiAvailable(t) {
		return
	}
	heavy := loadHeavyPt2(t)
	m := loadAoti(t, "python_heavy.pt2")
	x := must(NewTensor(heavy.input, 4, 64))
	defer x.Close()
	three := must(NewTensor(heavy.input[:3*64], 3, 64))
	defer three.Close()
	wide := must(NewTensor(make([]float64, 4*64), 4, 64))
	defer wide.Close()
	cases := []struct {
		what    string
		args    []any
		kwargs  any
		code    Code
		message string
	}{
		{"two tensors", []any{x, x}, nil, CodeInvalidArgument, "takes 1 positional arguments (Tensor,), not 2"},
		{"none", nil, nil, CodeInvalidArgument, "not 0"},
		{"a string", []any{"x"}, nil, CodeWrongKind, "args[0] must be a tensor"},
		{"a keyword", []any{x}, map[string]any{"steps": x}, CodeInvalidArgument,
			"'steps', which the model does not take"},
		{"shape [3, 64]", []any{three}, nil, CodeBadTensor, "unmatched dim value at 0"},
		{"float64", []any{wide}, nil, CodeBadTensor, "unmatched dtype"},
		{"a Go value with no Python type", []any{struct{}{}}, nil, CodeInvalidArgument, ""},
	}
	for _, c := range cases {
		out, err := m.CallKw(bg, c.args, c.kwargs)
		if out != nil {
			t.Errorf("%s: a result %v", c.what, out)
		}
		var e *Error
		if !errors.As(err, &e) || e.Code != c.code || !errors.Is(err, ErrorFor(c.code)) ||
			!strings.Contains(e.Message, c.message) {
			t.Errorf("%s: got %v, want %s with %q", c.what, err, c.code, c.message)
		}
	}
	if err := heavy.check(must(m.Call(bg, x))); err != nil {
		t.Errorf("after the refused calls: %v", err)
	}
}

// Each doctored package of archives/malformed (make_pt2.py), and archives
// that are no .pt2, refused with its code.
func TestAotiDoctoredPackages(t *testing.T) {
	if !aotiAvailable(t) {
		return
	}
	cases := []struct {
		file    string
		code    Code
		message string
	}{
		{"malformed/truncated.pt2", CodeBadArchive, "truncated.pt2"},
		{"malformed/no_library.pt2", CodeNotAPackage, "is not an AOTInductor package"},
		{"malformed/bad_library.pt2", CodeBadArchive, "is cut short: its segment"},
		{"malformed/missing_dependency.pt2", CodeLoader, "libtorcx.so"},
		{"malformed/cuda_device.pt2", CodeUnsupportedVersion, "compiled for device 'cuda'"},
		{"malformed/other_machine.pt2", CodeUnsupportedVersion, "compiled for aarch64 CPUs; this host is x86_64"},
		{"malformed/aarch64_library.pt2", CodeUnsupportedVersion, "was compiled for aarch64; this host is x86_64"},
		{"malformed/newer_torch.pt2", CodeLoader, "aoti_torch_get_dtypf"},
		{"malformed/exported_only.pt2", CodeNotAPackage,
			"holds an exported program but no AOTInductor-compiled model"},
		{"python_heavy_script.pt", CodeNotAPackage, "manypy_script_load_file"},
		{"identity.pt", CodeNotAPackage, ""},
	}
	if runtime.GOARCH != "amd64" {
		t.Fatalf("the doctored packages' messages name x86_64 hosts, not %s", runtime.GOARCH)
	}
	for _, c := range cases {
		m, err := LoadAoti(archive(t, c.file))
		if m != nil {
			t.Errorf("%s: loaded", c.file)
		}
		var e *Error
		if !errors.As(err, &e) || e.Code != c.code || !errors.Is(err, ErrorFor(c.code)) ||
			!strings.Contains(e.Message, c.message) {
			t.Errorf("%s: got %v, want %s with %q", c.file, err, c.code, c.message)
		}
		// From bytes: the same refusal.
		if _, err = LoadAotiBytes(readBytes(t, c.file)); !errors.Is(err, ErrorFor(c.code)) {
			t.Errorf("%s from bytes: got %v, want %s", c.file, err, c.code)
		}
	}
	_, err := LoadAoti("/no/such/model.pt2")
	expectCode(t, err, CodeNotFound, "/no/such/model.pt2")
	_, err = LoadAoti("")
	expectCode(t, err, CodeInvalidArgument, "")
	_, err = LoadAoti("a\x00b.pt2")
	expectCode(t, err, CodeInvalidArgument, "NUL")
	_, err = LoadAotiBytes([]byte{1, 2, 3})
	expectCode(t, err, CodeBadArchive, "")
	if _, err = LoadAotiBytes(nil); err == nil {
		t.Error("an empty package loaded")
	}
	// Still serving.
	heavy := loadHeavyPt2(t)
	x := must(NewTensor(heavy.input, 4, 64))
	defer x.Close()
	if err := heavy.check(must(loadAoti(t, "python_heavy.pt2").Call(bg, x))); err != nil {
		t.Error(err)
	}
}

// restoreHostTrust removes the host trust when the test ends (the process
// has one; no test runs in parallel with another).
func restoreHostTrust(t *testing.T) {
	t.Helper()
	t.Cleanup(func() {
		if err := SetHostArchiveTrust(nil); err != nil {
			t.Errorf("removing the host trust: %v", err)
		}
	})
}

// Whose trust refused a host load, in its message.
const (
	byHost  = "the host trust"
	byGiven = "the trust given to this load"
)

// expectUntrusted checks a refusal: the digest, and whose trust refused.
func expectUntrusted(t *testing.T, err error, digest, whose string) {
	t.Helper()
	e := expectCode(t, err, CodeUntrustedArchive, digest)
	if !strings.Contains(e.Message, "which "+whose) {
		t.Errorf("%q does not say that %s refused", e.Message, whose)
	}
}

// The host trust over TorchScript, on both legs: every host load checks it,
// a load given a trust of its own must satisfy both (it narrows, never
// widens), a pool has its own, and nil removes it. Where there is no
// AOTInductor, .pt2 loads are refused for that before any check.
func TestHostArchiveTrust(t *testing.T) {
	available := aotiAvailable(t) // before the host trust is set
	restoreHostTrust(t)
	loopPath, loopDigest := archive(t, "loop_script.pt"), sha256Hex(t, "loop_script.pt")
	loopBytes := readBytes(t, "loop_script.pt")
	other := ArchiveTrust{SHA256: []string{strings.Repeat("0", 64)}}
	right := ArchiveTrust{SHA256: []string{loopDigest}}

	host := ArchiveTrust{SHA256: slices.Clone(other.SHA256)}
	must(0, SetHostArchiveTrust(&host))
	host.SHA256[0] = loopDigest // the library kept a copy: this changes nothing
	_, err := LoadScript(loopPath)
	expectUntrusted(t, err, loopDigest, byHost)
	_, err = LoadScriptBytes(loopBytes)
	expectUntrusted(t, err, loopDigest, byHost)
	_, err = LoadScriptTrusted(loopPath, ArchiveTrust{})
	expectUntrusted(t, err, loopDigest, byHost)
	_, err = LoadScriptBytesTrusted(loopBytes, ArchiveTrust{})
	expectUntrusted(t, err, loopDigest, byHost)
	// A trust of the load's own cannot widen the host's.
	_, err = LoadScriptTrusted(loopPath, right)
	expectUntrusted(t, err, loopDigest, byHost)
	_, err = LoadScriptBytesTrusted(loopBytes, ArchiveTrust{Verifier: func([32]byte, string) bool { return true }})
	expectUntrusted(t, err, loopDigest, byHost)
	if !available {
		// A build without AOTInductor refuses every load before it reads
		// anything, the host trust's check included.
		_, err = LoadAoti(archive(t, "python_heavy_script.pt"))
		expectCode(t, err, CodeUnsupportedVersion, "torch 2.6 or newer")
		_, err = LoadAotiBytes(readBytes(t, "python_heavy_script.pt"))
		expectCode(t, err, CodeUnsupportedVersion, "torch 2.6 or newer")
	}

	// A pool has its own trust: the host's does not reach it.
	pool := newPool(t, PoolOptions{Interpreters: 1})
	must(pool.LoadPackage(archive(t, "identity.pt"))).Close()

	// A digest that is not one: refused, and the host trust stays.
	err = SetHostArchiveTrust(&ArchiveTrust{SHA256: []string{loopDigest, "not a digest"}})
	expectCode(t, err, CodeInvalidArgument, "")
	_, err = LoadScript(loopPath)
	expectUntrusted(t, err, loopDigest, byHost)

	// A host trust that accepts: loads given none, the zero one or one
	// that accepts too load; one that refuses narrows it.
	must(0, SetHostArchiveTrust(&right))
	checkLoops(t, must(LoadScript(loopPath)))
	must(LoadScriptBytes(loopBytes)).Close()
	must(LoadScriptTrusted(loopPath, ArchiveTrust{})).Close()
	checkLoops(t, must(LoadScriptBytesTrusted(loopBytes, right)))
	_, err = LoadScriptTrusted(loopPath, other)
	expectUntrusted(t, err, loopDigest, byGiven)
	_, err = LoadScriptBytesTrusted(loopBytes, other)
	expectUntrusted(t, err, loopDigest, byGiven)

	// nil and the zero value remove it.
	must(0, SetHostArchiveTrust(nil))
	must(LoadScript(archive(t, "invert_script.pt"))).Close()
	must(0, SetHostArchiveTrust(&other))
	must(0, SetHostArchiveTrust(&ArchiveTrust{}))
	must(LoadScriptBytes(loopBytes)).Close()
	must(LoadScriptTrusted(loopPath, ArchiveTrust{})).Close()
}

// checkLoops calls loop_script.pt's forward(x, n) (x + n) and closes it.
func checkLoops(t *testing.T, module *ScriptModule) {
	t.Helper()
	defer module.Close()
	x := must(NewTensor([]float32{0, 0}))
	defer x.Close()
	if got := tensorFloats(t, must(module.Call(bg, x, 3))); !slices.Equal(got, []float32{3, 3}) {
		t.Errorf("loop: %v", got)
	}
}

// A verifier in the host trust is asked about every host load given no
// trust, with its origin, and released once when the host trust goes.
func TestHostArchiveTrustVerifier(t *testing.T) {
	available := aotiAvailable(t) // before the host trust is set
	restoreHostTrust(t)
	panics := make(chan CallbackPanic, 8)
	SetCallbackPanicHandler(func(p CallbackPanic) { panics <- p })
	defer SetCallbackPanicHandler(nil)
	loopPath, loopDigest := archive(t, "loop_script.pt"), sha256Hex(t, "loop_script.pt")
	released := make(chan struct{}, 1)
	var log verifierLog
	func() {
		held := new(int)
		runtime.AddCleanup(held, func(ch chan struct{}) { ch <- struct{}{} }, released)
		must(0, SetHostArchiveTrust(&ArchiveTrust{Verifier: func(sha [32]byte, origin string) bool {
			*held++
			return log.refuse(sha, origin)
		}}))
	}()
	_, err := LoadScript(loopPath)
	expectUntrusted(t, err, loopDigest, byHost)
	_, err = LoadScriptBytes(readBytes(t, "loop_script.pt"))
	expectUntrusted(t, err, loopDigest, byHost)
	// Asked also when the load's own trust accepts.
	_, err = LoadScriptTrusted(loopPath, ArchiveTrust{SHA256: []string{loopDigest}})
	expectUntrusted(t, err, loopDigest, byHost)
	log.expect(t, loopDigest, loopPath, "<bytes>", loopPath)
	if available {
		pt2, pt2Digest := archive(t, "python_heavy.pt2"), sha256Hex(t, "python_heavy.pt2")
		var pt2Log verifierLog
		must(0, SetHostArchiveTrust(&ArchiveTrust{Verifier: pt2Log.refuse}))
		_, err = LoadAoti(pt2)
		expectUntrusted(t, err, pt2Digest, byHost)
		_, err = LoadAotiBytes(readBytes(t, "python_heavy.pt2"))
		expectUntrusted(t, err, pt2Digest, byHost)
		pt2Log.expect(t, pt2Digest, pt2, "<bytes>")
	}
	must(0, SetHostArchiveTrust(nil))
	for deadline := time.Now().Add(30 * time.Second); ; {
		runtime.GC()
		select {
		case <-released:
		case <-time.After(20 * time.Millisecond):
			if time.Now().Before(deadline) {
				continue
			}
			t.Fatal("the host trust's verifier was never released")
		}
		break
	}
	select {
	case p := <-panics:
		t.Fatalf("a callback panicked (a handle deleted twice?): %s: %v", p.Callback, p.Value)
	default:
	}
}

// Trusts given to .pt2 loads, and the host trust with them: both must accept.
func TestAotiTrust(t *testing.T) {
	if !aotiAvailable(t) {
		return
	}
	restoreHostTrust(t)
	heavy := loadHeavyPt2(t)
	x := must(NewTensor(heavy.input, 4, 64))
	defer x.Close()
	serves := func(m *AotiModule) {
		t.Helper()
		defer m.Close()
		if err := heavy.check(must(m.Call(bg, x))); err != nil {
			t.Error(err)
		}
	}
	path, digest := archive(t, "python_heavy.pt2"), sha256Hex(t, "python_heavy.pt2")
	raw := readBytes(t, "python_heavy.pt2")
	other := ArchiveTrust{SHA256: []string{strings.Repeat("0", 64)}}
	right := ArchiveTrust{SHA256: []string{strings.ToUpper(digest)}}

	_, err := LoadAotiTrusted(path, other)
	expectCode(t, err, CodeUntrustedArchive, digest)
	_, err = LoadAotiBytesTrusted(raw, other)
	expectCode(t, err, CodeUntrustedArchive, digest)
	serves(must(LoadAotiTrusted(path, right)))
	serves(must(LoadAotiBytesTrusted(raw, right)))
	var log verifierLog
	refusing := ArchiveTrust{SHA256: other.SHA256, Verifier: log.refuse}
	_, err = LoadAotiTrusted(path, refusing)
	expectCode(t, err, CodeUntrustedArchive, digest)
	_, err = LoadAotiBytesTrusted(raw, refusing)
	expectCode(t, err, CodeUntrustedArchive, digest)
	log.expect(t, digest, path, "<bytes>")
	_, err = LoadAotiTrusted(path, ArchiveTrust{SHA256: []string{"not a digest"}})
	expectCode(t, err, CodeInvalidArgument, "")

	// The host trust covers every load; a load's own trust must accept too.
	must(0, SetHostArchiveTrust(&other))
	_, err = LoadAoti(path)
	expectUntrusted(t, err, digest, byHost)
	_, err = LoadAotiBytes(raw)
	expectUntrusted(t, err, digest, byHost)
	_, err = LoadAotiTrusted(path, ArchiveTrust{})
	expectUntrusted(t, err, digest, byHost)
	_, err = LoadAotiBytesTrusted(raw, right)
	expectUntrusted(t, err, digest, byHost)
	must(0, SetHostArchiveTrust(&right))
	serves(must(LoadAoti(path)))
	serves(must(LoadAotiBytes(raw)))
	serves(must(LoadAotiTrusted(path, right)))
	_, err = LoadAotiTrusted(path, other)
	expectUntrusted(t, err, digest, byGiven)
	_, err = LoadAotiBytesTrusted(raw, refusing)
	expectUntrusted(t, err, digest, byGiven)
	must(0, SetHostArchiveTrust(nil))
	serves(must(LoadAotiBytes(raw)))
}

// Many goroutines share one module; every result is checked.
func TestAotiFromGoroutines(t *testing.T) {
	if !aotiAvailable(t) {
		return
	}
	heavy := loadHeavyPt2(t)
	m := loadAoti(t, "python_heavy.pt2")
	x := must(NewTensor(heavy.input, 4, 64))
	defer x.Close()
	const goroutines, calls = 8, 50
	errs := make(chan error, goroutines)
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own := must(NewTensor(heavy.input, 4, 64)) // half share x, half their own
			defer own.Close()
			in := x
			if g%2 == 1 {
				in = own
			}
			for i := 0; i < calls; i++ {
				out, err := m.Call(bg, in)
				if err == nil {
					err = heavy.check(out)
				}
				if err != nil {
					errs <- fmt.Errorf("goroutine %d, call %d: %w", g, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// aotiRuns records the "manypy::aoti_run" events of one request id, and
// runs onEnter in the enter callback (on the calling thread, before the
// compiled model starts).
type aotiRuns struct {
	mu      sync.Mutex
	events  []*OpEvent
	onEnter func()
}

func (r *aotiRuns) enter(e *OpEvent) {
	if e.Name != "manypy::aoti_run" {
		return
	}
	r.mu.Lock()
	fn := r.onEnter
	r.events = append(r.events, e)
	r.mu.Unlock()
	if fn != nil {
		fn()
	}
}

func (r *aotiRuns) take() []*OpEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	events := r.events
	r.events, r.onEnter = nil, nil
	return events
}

func (r *aotiRuns) setOnEnter(fn func()) {
	r.mu.Lock()
	r.onEnter = fn
	r.mu.Unlock()
}

// Deadlines and cancellation are checked before the compiled model starts
// and when it returns, whose late result is dropped; operator callbacks see
// one "manypy::aoti_run" per call with the call's ids and its input.
func TestAotiDeadlines(t *testing.T) {
	if !aotiAvailable(t) {
		return
	}
	heavy := loadHeavyPt2(t)
	m := loadAoti(t, "python_heavy.pt2")
	x := must(NewTensor(heavy.input, 4, 64))
	defer x.Close()
	var runs aotiRuns
	callbacks := must(AddOpCallbacks(runs.enter, nil, 1, true))
	defer callbacks.Remove()
	ids := func(ctx context.Context, request string) context.Context {
		return WithCallOptions(ctx, CallOptions{ModelID: "heavy-pt2", RequestID: request})
	}

	// One record per call, with the context and the input.
	if err := heavy.check(must(m.Call(ids(bg, "plain"), x))); err != nil {
		t.Fatal(err)
	}
	events := runs.take()
	if len(events) != 1 {
		t.Fatalf("%d manypy::aoti_run events, want 1", len(events))
	}
	if e := events[0]; e.ModelID != "heavy-pt2" || e.RequestID != "plain" || e.Interpreter != -1 ||
		len(e.Inputs) != 1 || e.Inputs[0].Kind != "tensor" || e.Inputs[0].DType != Float32 ||
		!slices.Equal(e.Inputs[0].Shape, []int64{4, 64}) {
		t.Errorf("event %+v", e)
	}

	// Contexts already done: refused before anything runs.
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	_, err := m.Call(ids(cancelled, "cancelled"), x)
	expectStopped(t, "a cancelled context", err, 0, 0, context.Canceled, CodeCancelled)
	past, cancel := context.WithDeadline(bg, time.Now().Add(-time.Second))
	defer cancel()
	_, err = m.Call(ids(past, "past"), x)
	expectStopped(t, "a deadline past", err, 0, 0, context.DeadlineExceeded, CodeDeadlineExceeded)
	if events := runs.take(); len(events) != 0 {
		t.Errorf("a call with a done context ran: %+v", events[0])
	}

	// A deadline that passes while the model runs (the enter callback
	// outlasts it): the model finishes, and its result is dropped.
	ctx, cancel := context.WithTimeout(ids(bg, "late"), 5*time.Second) // for a loaded machine to start the call
	defer cancel()
	deadline, _ := ctx.Deadline()
	runs.setOnEnter(func() { time.Sleep(time.Until(deadline) + 50*time.Millisecond) })
	out, err := m.Call(ctx, x)
	e := expectCode(t, err, CodeDeadlineExceeded, "its result was dropped")
	if out != nil || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(e, ctx.Err()) {
		t.Errorf("a late result: %v, %v", out, err)
	}
	if events := runs.take(); len(events) != 1 {
		t.Errorf("the late call ran %d times", len(events))
	}

	// A cancellation while it runs: the same.
	ctx, cancel = context.WithCancel(ids(bg, "cancel"))
	defer cancel()
	runs.setOnEnter(func() {
		cancel()
		time.Sleep(time.Second) // for the token's cancel, on a goroutine of context.AfterFunc
	})
	out, err = m.Call(ctx, x)
	expectCode(t, err, CodeCancelled, "its result was dropped")
	if out != nil || !errors.Is(err, context.Canceled) {
		t.Errorf("a call cancelled while it ran: %v, %v", out, err)
	}
	runs.take()

	// A generous deadline changes nothing.
	ctx, cancel = context.WithTimeout(ids(bg, "generous"), time.Minute)
	defer cancel()
	if err := heavy.check(must(m.Call(ctx, x))); err != nil {
		t.Error(err)
	}
}

// A Close that races calls on other goroutines frees after them: each call
// either completes with the right result or fails with ErrClosed.
func TestAotiCloseRacingCalls(t *testing.T) {
	if !aotiAvailable(t) {
		return
	}
	heavy := loadHeavyPt2(t)
	for round := 0; round < 3; round++ {
		m := must(LoadAoti(archive(t, "python_heavy.pt2")))
		x := must(NewTensor(heavy.input, 4, 64))
		var wg sync.WaitGroup
		var completed, refused atomic.Int64
		started := make(chan struct{}, 4)
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					out, err := m.Call(bg, x)
					if i == 0 {
						started <- struct{}{}
					}
					if errors.Is(err, ErrClosed) {
						refused.Add(1)
						return
					}
					if err == nil {
						err = heavy.check(out)
					}
					if err != nil {
						t.Errorf("call: %v", err)
						return
					}
					completed.Add(1)
				}
			}()
		}
		for g := 0; g < 4; g++ {
			<-started
		}
		m.Close() // while calls run: they finish first
		x.Close() // the calls in flight keep the input's memory
		wg.Wait()
		if refused.Load() != 4 || completed.Load() < 4 {
			t.Fatalf("round %d: completed %d, refused %d", round, completed.Load(), refused.Load())
		}
	}
}

// ArchiveSaveCopy stamps an archive it did not write: extra files and the
// export hook's, in a copy that loads and computes as the original, under a
// digest of its own. TorchScript on both legs, .pt2 where it runs.
func TestArchiveSaveCopy(t *testing.T) {
	must(0, SetExportHook(func() map[string]any {
		return map[string]any{"producer_info.json": producerInfo, "note.txt": "from the hook"}
	}))
	defer SetExportHook(nil)
	dir := t.TempDir()
	extra := map[string]any{"note.txt": "served by manypy", "raw.bin": []byte{0, 1, 2}}
	stamped := func(path string) {
		t.Helper()
		// The caller's files win over the hook's.
		if got := string(must(ArchiveReadFile(path, "extra/note.txt"))); got != "served by manypy" {
			t.Errorf("%s: note.txt %q", path, got)
		}
		if got := must(ArchiveReadFile(path, "extra/raw.bin")); !slices.Equal(got, []byte{0, 1, 2}) {
			t.Errorf("%s: raw.bin %v", path, got)
		}
		if got := string(must(ArchiveReadFile(path, "extra/producer_info.json"))); got != producerInfo {
			t.Errorf("%s: producer_info.json %q", path, got)
		}
		if files := must(ArchiveListFiles(path)); !slices.ContainsFunc(files, func(n string) bool {
			return strings.HasSuffix(n, "extra/raw.bin")
		}) {
			t.Errorf("%s: records %v", path, files)
		}
	}

	script := filepath.Join(dir, "loop_stamped.pt")
	must(0, ArchiveSaveCopy(archive(t, "loop_script.pt"), script, extra))
	stamped(script)
	checkLoops(t, must(LoadScript(script)))
	if digestOf(t, script) == sha256Hex(t, "loop_script.pt") {
		t.Error("the copy has the original's digest")
	}
	// Without files of its own: the hook's only.
	hooked := filepath.Join(dir, "loop_hooked.pt")
	must(0, ArchiveSaveCopy(archive(t, "loop_script.pt"), hooked, nil))
	if got := string(must(ArchiveReadFile(hooked, "extra/note.txt"))); got != "from the hook" {
		t.Errorf("the hook's note.txt %q", got)
	}

	err := ArchiveSaveCopy(archive(t, "loop_script.pt"), filepath.Join(dir, "bad.pt"), map[string]any{"bad": 3})
	if !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("an extra file of type int: %v", err)
	}
	err = ArchiveSaveCopy("/no/such/archive.pt", filepath.Join(dir, "x.pt"), nil)
	expectCode(t, err, CodeNotFound, "/no/such/archive.pt")
	err = ArchiveSaveCopy(archive(t, "loop_script.pt"), filepath.Join(dir, "no", "such", "dir.pt"), nil)
	expectCode(t, err, CodeNotFound, "")
	err = ArchiveSaveCopy(archive(t, "malformed/truncated.pt"), filepath.Join(dir, "t.pt"), nil)
	expectCode(t, err, CodeBadArchive, "")
	err = ArchiveSaveCopy(archive(t, "loop_script.pt"), "with\x00nul.pt", nil)
	expectCode(t, err, CodeInvalidArgument, "NUL")

	if !aotiAvailable(t) {
		return
	}
	pt2 := filepath.Join(dir, "heavy_stamped.pt2")
	must(0, ArchiveSaveCopy(archive(t, "python_heavy.pt2"), pt2, extra))
	stamped(pt2)
	heavy := loadHeavyPt2(t)
	x := must(NewTensor(heavy.input, 4, 64))
	defer x.Close()
	copied := must(LoadAoti(pt2))
	defer copied.Close()
	if err := heavy.check(must(copied.Call(bg, x))); err != nil {
		t.Errorf("the copy: %v", err)
	}
	original := loadAoti(t, "python_heavy.pt2")
	if got, want := must(copied.Metadata()), must(original.Metadata()); !maps.Equal(got, want) {
		t.Errorf("the copy's metadata %v, the original's %v", got, want)
	}
	// Its digest is its own: a trust must list it anew.
	_, err = LoadAotiTrusted(pt2, ArchiveTrust{SHA256: []string{sha256Hex(t, "python_heavy.pt2")}})
	expectCode(t, err, CodeUntrustedArchive, "")
	must(LoadAotiTrusted(pt2, ArchiveTrust{SHA256: []string{digestOf(t, pt2)}})).Close()
}

// digestOf is a file's SHA-256 as sha256sum prints it.
func digestOf(t *testing.T, path string) string {
	t.Helper()
	sum := sha256.Sum256(must(os.ReadFile(path)))
	return hex.EncodeToString(sum[:])
}
