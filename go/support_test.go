package manypy

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The sample archives (samples/models, built into <build>/archives): the
// ctest entries set MANYPY_ARCHIVES; a missing directory fails every test
// that needs it rather than skipping.
func archivesDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("MANYPY_ARCHIVES")
	if dir == "" {
		dir = filepath.Join("..", "build", "archives")
	}
	if _, err := os.Stat(filepath.Join(dir, "manifest.json")); err != nil {
		t.Fatalf("the sample archives are not in %s (set MANYPY_ARCHIVES to <build>/archives): %v", dir, err)
	}
	return dir
}

func archive(t testing.TB, name string) string {
	return filepath.Join(archivesDir(t), name)
}

// readFloats reads a raw little-endian float32 file of the archives.
func readFloats(t testing.TB, name string) []float32 {
	t.Helper()
	raw, err := os.ReadFile(archive(t, name))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(raw)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out
}

// caseShape reads NAME.json's input shape.
func caseShape(t testing.TB, name string) []int64 {
	t.Helper()
	raw, err := os.ReadFile(archive(t, name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var desc struct {
		Input struct {
			Shape []int64 `json:"shape"`
		} `json:"input"`
	}
	if err := json.Unmarshal(raw, &desc); err != nil {
		t.Fatal(err)
	}
	return desc.Input.Shape
}

// must returns v, or panics with err: the test (and the test binary) fails
// with the error and its stack. For set-up steps that must not fail.
func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("unexpected error: %v", err))
	}
	return v
}

// isolatedEnv names, in a child process's environment, the test that child
// runs (isolated).
const isolatedEnv = "MANYPY_GO_ISOLATED_TEST"

// long skips t under -short (go_test_quick: the quick tier and the second
// leg; go_test_cgocheck2): t is long and drives the binding's own
// concurrency or lifecycle, the same code on both legs, which the full run's
// go_test_race runs. why says what makes it long.
func long(t *testing.T, why string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("slow: %s (go_test_race runs it)", why)
	}
}

// isolated runs the calling top-level test in a child process (the test
// binary again, running only that test) unless this process is that child.
// Interpreters are the process's, and some tests leave them unfit for the
// tests after them, or need ones that earlier tests left unfit: a retired
// interpreter never serves again, and one that ran code from an archive
// serves no pool that does not trust that archive. It returns true in the
// child, where the test goes on, and false in the parent, once the child
// has passed (it fails t otherwise).
func isolated(t *testing.T) bool {
	t.Helper()
	if os.Getenv(isolatedEnv) == t.Name() {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), isolatedEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s in a child process: %v\n%s", t.Name(), err, out)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()+" (") {
		t.Fatalf("the child process did not run %s:\n%s", t.Name(), out)
	}
	return false
}

func newPool(t testing.TB, opts PoolOptions) *Pool {
	t.Helper()
	p := must(NewPool(opts))
	t.Cleanup(p.Close)
	return p
}

// loadModel loads NAME.pt's model/model.pkl into pool.
func loadModel(t testing.TB, pool *Pool, name string) *Object {
	t.Helper()
	pkg := must(pool.LoadPackage(archive(t, name)))
	defer pkg.Close() // the object keeps it
	obj := must(pkg.LoadPickle("model", "model.pkl"))
	t.Cleanup(obj.Close)
	return obj
}

// closeTo compares float32 outputs with an absolute tolerance.
func closeTo(got, want []float32, atol float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d values, want %d", len(got), len(want))
	}
	for i := range got {
		if math.Abs(float64(got[i])-float64(want[i])) > atol || math.IsNaN(float64(got[i])) {
			return fmt.Errorf("value %d is %g, want %g", i, got[i], want[i])
		}
	}
	return nil
}

// tensorFloats copies a float32 result tensor out and closes it.
func tensorFloats(t testing.TB, v any) []float32 {
	t.Helper()
	tensor, ok := v.(*Tensor)
	if !ok {
		t.Fatalf("got a %T, want a *Tensor", v)
	}
	defer tensor.Close()
	return must(TensorCopy[float32](tensor))
}

var bg = context.Background()

func readBytes(t testing.TB, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(archive(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
