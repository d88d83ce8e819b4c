package manypy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Every distinct key reaches the handler once: manypy's, torch's from the
// interpreters, the caller's and model code's; a late handler first gets
// the keys already seen.
func TestAPIUsage(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	handler := func(key string) {
		mu.Lock()
		seen[key]++
		mu.Unlock()
	}
	must(0, SetAPIUsageHandler(handler))
	defer SetAPIUsageHandler(nil)
	pool := newPool(t, PoolOptions{Interpreters: 2})
	loadModel(t, pool, "identity.pt")
	must(0, LogAPIUsage("manypy.go.test.caller"))
	must(0, LogAPIUsage("manypy.go.test.caller"))
	must(0, pool.ExecAll("import torch\ntorch._C._log_api_usage_once('manypy.go.test.model')"))
	mu.Lock()
	for _, key := range []string{"manypy.pool.create", "manypy.package.load", "manypy.object.load",
		"torch.python.import", "manypy.go.test.caller", "manypy.go.test.model"} {
		if seen[key] != 1 {
			t.Errorf("key %s seen %d times", key, seen[key])
		}
	}
	for key, n := range seen {
		if n != 1 {
			t.Errorf("key %s seen %d times", key, n)
		}
	}
	mu.Unlock()

	// A handler installed late sees each key already seen, once.
	late := map[string]int{}
	must(0, SetAPIUsageHandler(func(key string) {
		mu.Lock()
		late[key]++
		mu.Unlock()
	}))
	mu.Lock()
	if late["manypy.go.test.caller"] != 1 || late["manypy.pool.create"] != 1 {
		t.Errorf("late handler: %v", late)
	}
	mu.Unlock()
}

const producerInfo = `{"producer": "manypy go test"}`

// The export hook stamps archives written in the host and by Python in the
// interpreters; extra files round-trip.
func TestMetadataAndExportHook(t *testing.T) {
	must(0, SetExportHook(func() map[string]any {
		return map[string]any{"producer_info.json": producerInfo, "raw.bin": []byte{0, 1, 2}}
	}))
	defer SetExportHook(nil)
	dir := t.TempDir()
	pool := newPool(t, PoolOptions{Interpreters: 2})

	// Python writes in two interpreters: torch.jit.save and PackageExporter.
	scriptPath := filepath.Join(dir, "from-python.pt")
	packagePath := filepath.Join(dir, "package.pt")
	must(0, pool.Exec(0, fmt.Sprintf("import torch\ntorch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), %q)", scriptPath)))
	must(0, pool.Exec(1, fmt.Sprintf("from torch.package import PackageExporter\n"+
		"with PackageExporter(%q) as e:\n    e.save_text('notes', 'readme.txt', 'from an interpreter')", packagePath)))
	for _, path := range []string{scriptPath, packagePath} {
		if got := string(must(ArchiveReadFile(path, "extra/producer_info.json"))); got != producerInfo {
			t.Errorf("%s: producer_info %q", path, got)
		}
		if got := must(ArchiveReadFile(path, "extra/raw.bin")); !slices.Equal(got, []byte{0, 1, 2}) {
			t.Errorf("%s: raw.bin %v", path, got)
		}
	}
	if got := string(must(ArchiveReadFile(packagePath, "notes/readme.txt"))); got != "from an interpreter" {
		t.Errorf("readme %q", got)
	}
	_, err := ArchiveReadFile(packagePath, "extra/nope")
	expectCode(t, err, CodeNoSuchName, "")
	_, err = ArchiveListFiles(archive(t, "malformed/truncated.pt"))
	expectCode(t, err, CodeBadArchive, "")

	// The stamped package loads; a loaded package saves a copy with extra
	// files and the hook's.
	pkg := must(pool.LoadPackage(archive(t, "identity.pt")))
	defer pkg.Close()
	names := must(pkg.ListFiles())
	if !slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, "model/model.pkl") }) {
		t.Errorf("records %v", names)
	}
	if len(must(pkg.ReadFile(names[0]))) == 0 && !strings.HasSuffix(names[0], "/") {
		t.Logf("first record %s is empty", names[0])
	}
	copyPath := filepath.Join(dir, "copy.pt")
	must(0, pkg.Save(copyPath, map[string]any{"model_card.md": "# identity"}))
	if got := string(must(ArchiveReadFile(copyPath, "extra/model_card.md"))); got != "# identity" {
		t.Errorf("model card %q", got)
	}
	if got := string(must(ArchiveReadFile(copyPath, "extra/producer_info.json"))); got != producerInfo {
		t.Errorf("copy producer_info %q", got)
	}
	copied := must(pool.LoadPackage(copyPath))
	obj := must(copied.LoadPickle("model", "model.pkl"))
	if got := must(obj.Call(bg, "still the identity")); got != "still the identity" {
		t.Errorf("copy: %v", got)
	}
	obj.Close()
	copied.Close()
	if err := pkg.Save(copyPath, map[string]any{"bad": 3}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("an extra file of type int: %v", err)
	}

	// TorchScript on the host.
	script := must(LoadScript(archive(t, "loop_script.pt")))
	defer script.Close()
	savedPath := filepath.Join(dir, "saved.pt")
	must(0, script.Save(savedPath, map[string]any{"note.txt": []byte("bytes")}))
	if got := string(must(ArchiveReadFile(savedPath, "extra/note.txt"))); got != "bytes" {
		t.Errorf("note %q", got)
	}
	if got := string(must(ArchiveReadFile(savedPath, "extra/producer_info.json"))); got != producerInfo {
		t.Errorf("script producer_info %q", got)
	}
	if files := must(ArchiveListFiles(savedPath)); !slices.ContainsFunc(files, func(n string) bool {
		return strings.HasSuffix(n, "extra/note.txt")
	}) {
		t.Errorf("listed %v", files)
	}
}

// Trusted archives: a digest list and a verifier (a Go func called from C).
// In a child process: a pool that trusts only some archives leases no
// interpreter that ran code from another, and the tests before this one
// leave every interpreter of the process so (TestUnclosedPoolsAreCollected
// starts all of them).
func TestTrustedArchives(t *testing.T) {
	if !isolated(t) {
		return
	}
	identity := archive(t, "identity.pt")
	raw := must(os.ReadFile(identity))
	sum := sha256.Sum256(raw)
	digest := hex.EncodeToString(sum[:])

	pool := newPool(t, PoolOptions{TrustedSHA256: []string{strings.ToUpper(digest)}})
	pkg := must(pool.LoadPackage(identity))
	pkg.Close()
	_, err := pool.LoadPackage(archive(t, "python_heavy.pt"))
	expectCode(t, err, CodeUntrustedArchive, "")

	var mu sync.Mutex
	var asked []string
	verifier := func(sha [32]byte, origin string) bool {
		mu.Lock()
		asked = append(asked, origin)
		mu.Unlock()
		return sha == sum
	}
	checked := newPool(t, PoolOptions{ArchiveVerifier: verifier})
	pkg = must(checked.LoadPackage(identity))
	pkg.Close()
	pkg = must(checked.LoadPackageBytes(raw))
	pkg.Close()
	_, err = checked.LoadPackage(archive(t, "python_heavy.pt"))
	expectCode(t, err, CodeUntrustedArchive, "")
	mu.Lock()
	if len(asked) != 3 || asked[0] != identity || asked[1] != "<bytes>" {
		t.Errorf("verifier asked about %v", asked)
	}
	mu.Unlock()

	// A verifier that panics refuses, and the panic is reported.
	reported := make(chan string, 1)
	SetCallbackPanicHandler(func(p CallbackPanic) { reported <- p.Callback })
	defer SetCallbackPanicHandler(nil)
	panicky := newPool(t, PoolOptions{ArchiveVerifier: func([32]byte, string) bool { panic("no") }})
	_, err = panicky.LoadPackage(identity)
	expectCode(t, err, CodeUntrustedArchive, "")
	if got := <-reported; got != "archive verifier" {
		t.Errorf("reported %q", got)
	}
}

// A custom operator library, in the interpreters and on the host.
func TestOperatorLibrary(t *testing.T) {
	path := os.Getenv("MANYPY_SAMPLE_OPS")
	if path == "" {
		t.Fatal("MANYPY_SAMPLE_OPS is not set (the ctest entry sets it to libmanypy_sample_ops.so)")
	}
	must(0, LoadOperatorLibrary(path))
	pool := newPool(t, PoolOptions{Interpreters: 1})
	out := must(pool.Eval(0, "__import__('torch').ops.manypy_sample.scaled_add("+
		"__import__('torch').ones(2), __import__('torch').ones(2), 3.0)")).(*Tensor)
	defer out.Close()
	if got := must(TensorCopy[float32](out)); !slices.Equal(got, []float32{4, 4}) {
		t.Errorf("scaled_add: %v", got)
	}
}
