package manypy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

func TestEveryCodeHasItsSentinel(t *testing.T) {
	if err := ready(); err != nil {
		t.Fatal(err)
	}
	for code := CodeInvalidArgument; code <= CodeDraining; code++ {
		sentinel := ErrorFor(code)
		if sentinel == nil {
			t.Fatalf("%d: no sentinel", code)
		}
		// The Go name is the C library's name for the same number.
		if code.String() != cCodeName(code) {
			t.Errorf("%d: %s, C says %s", code, code, cCodeName(code))
		}
		err := error(&Error{Code: code, Message: "m"})
		if !errors.Is(err, sentinel) {
			t.Errorf("%s does not match its sentinel", code)
		}
		for other := CodeInvalidArgument; other <= CodeDraining; other++ {
			if other != code && errors.Is(err, ErrorFor(other)) {
				t.Errorf("%s matches %s", code, other)
			}
		}
		var e *Error
		if !errors.As(err, &e) || e.Code != code {
			t.Errorf("%s: errors.As", code)
		}
		// Only stopped calls match the context errors.
		if errors.Is(err, context.Canceled) != (code == CodeCancelled) ||
			errors.Is(err, context.DeadlineExceeded) != (code == CodeDeadlineExceeded) {
			t.Errorf("%s: context errors", code)
		}
	}
	if ErrorFor(CodeOK) != nil || ErrorFor(99) != nil || Code(99).String() != "MANYPY_UNKNOWN(99)" {
		t.Error("OK and unknown codes")
	}
	// The last code this package knows is the C library's last: a code
	// added to manypy.h fails this until it is mapped here.
	if cCodeName(CodeDraining+1) != "MANYPY_UNKNOWN" || ErrorFor(CodeDraining+1) != nil {
		t.Errorf("code %d: C names it %s", CodeDraining+1, cCodeName(CodeDraining+1))
	}
	if cCodeName(99) != "MANYPY_UNKNOWN" {
		t.Error("C name of an unknown code")
	}
}

func TestErrorFormats(t *testing.T) {
	traceback := "Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\n" +
		"ZeroDivisionError: division by zero\n"
	e := &Error{Code: CodePython, Message: "interpreter 1: ZeroDivisionError: division by zero",
		PythonType: "ZeroDivisionError", Traceback: traceback}
	line := "MANYPY_ERR_PYTHON: interpreter 1: ZeroDivisionError: division by zero"
	detail := line + "\nPython exception: ZeroDivisionError\n" + strings.TrimSuffix(traceback, "\n")
	wrapped := fmt.Errorf("scoring: %w", e)
	for _, c := range []struct{ got, want string }{
		{e.Error(), line},
		{fmt.Sprint(e), line},
		{fmt.Sprintf("%v", e), line},
		{fmt.Sprintf("%s", e), line},
		{fmt.Sprintf("%q", e), strconv.Quote(line)},
		{fmt.Sprintf("%+v", e), detail},
		{fmt.Sprintf("%-80s|", e), line + strings.Repeat(" ", 80-len(line)) + "|"},
		{fmt.Sprintf("%#v", e), `&manypy.Error{Code:3, Message:"interpreter 1: ZeroDivisionError: division by zero", ` +
			`PythonType:"ZeroDivisionError", Traceback:` + strconv.Quote(traceback) + `}`},
		{fmt.Sprintf("%d", e), "%!d(string=" + line + ")"},
		{wrapped.Error(), "scoring: " + line},
		// Without a Python exception, %+v has nothing to add.
		{fmt.Sprintf("%+v", &Error{Code: CodeNotFound, Message: "no such file"}), "MANYPY_ERR_NOT_FOUND: no such file"},
		{invalid("a nil %s", "*Tensor").Error(), "MANYPY_ERR_INVALID_ARGUMENT: a nil *Tensor"},
		{Code(99).String(), "MANYPY_UNKNOWN(99)"},
		{(&Error{Code: 99, Message: "m"}).Error(), "MANYPY_UNKNOWN(99): m"},
	} {
		if c.got != c.want {
			t.Errorf("got  %q\nwant %q", c.got, c.want)
		}
	}
	var as *Error
	if !errors.Is(wrapped, ErrPython) || !errors.As(wrapped, &as) || as != e {
		t.Error("a wrapped *Error no longer matches")
	}
}

// expectCode checks an error's code and that its message contains a piece.
func expectCode(t *testing.T, err error, code Code, inMessage string) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Code != code || !errors.Is(err, ErrorFor(code)) {
		t.Fatalf("got %v, want %s", err, code)
	}
	if !strings.Contains(e.Message, inMessage) {
		t.Errorf("%s: message %q does not contain %q", code, e.Message, inMessage)
	}
	return e
}

// Each code a Go program can reach, end to end. (STATIC_TLS: below, in a
// child process; DEADLINE_EXCEEDED, CANCELLED: deadlines_test.go;
// UNTRUSTED_ARCHIVE: trust in metadata_test.go; OVERLOADED:
// admission_test.go; WRONG_KIND, LOADER and the codes of .pt2 packages:
// aoti_test.go, with the torch 2.x build. Reading a value, WRONG_KIND
// cannot be caused (the binding checks kinds before reading);
// INTERPRETER_BROKEN and INTERNAL cannot be caused from Go: the mapping
// above covers them.)
func TestErrorsEndToEnd(t *testing.T) {
	pool := newPool(t, PoolOptions{})
	_, err := pool.Eval(0, "1 / 0")
	e := expectCode(t, err, CodePython, "ZeroDivisionError")
	if e.PythonType != "ZeroDivisionError" || !strings.Contains(e.Traceback, "Traceback") {
		t.Errorf("python error fields: %#v", e)
	}
	// One line, with the traceback under %+v only.
	if e.Error() != "MANYPY_ERR_PYTHON: "+e.Message || strings.Contains(e.Error(), "\n") ||
		!strings.Contains(fmt.Sprintf("%+v", err), "\n"+strings.TrimRight(e.Traceback, "\n")) {
		t.Errorf("python error text: %q\n%+v", e, err)
	}
	// A message with a newline of its own is still one line.
	err = pool.Exec(0, "raise ValueError('first\\nsecond')")
	e = expectCode(t, err, CodePython, "first")
	if strings.Contains(e.Error(), "\n") || !strings.Contains(e.Traceback, "second") {
		t.Errorf("a two-line exception: %q\n%+v", e, err)
	}
	e = expectCode(t, pool.Exec(0, "def (:"), CodeSyntax, "SyntaxError")
	if e.PythonType != "SyntaxError" {
		t.Errorf("syntax error type %q", e.PythonType)
	}
	e = expectCode(t, pool.Exec(0, "import no_such_module_xyz"), CodeModuleNotFound, "no_such_module_xyz")
	if e.PythonType != "ModuleNotFoundError" {
		t.Errorf("module error type %q", e.PythonType)
	}
	_, err = pool.Eval(0, "object()")
	expectCode(t, err, CodeUnsupportedType, "")

	_, err = pool.LoadPackage("/no/such/model.pt")
	expectCode(t, err, CodeNotFound, "/no/such/model.pt")
	_, err = LoadScript("/no/such/model.pt")
	expectCode(t, err, CodeNotFound, "/no/such/model.pt")
	_, err = pool.LoadPackage("")
	expectCode(t, err, CodeInvalidArgument, "")
	for _, name := range []string{"malformed/not_a_zip.pt", "malformed/truncated.pt"} {
		_, err = pool.LoadPackage(archive(t, name))
		expectCode(t, err, CodeBadArchive, "")
	}
	_, err = pool.LoadPackageBytes([]byte{1, 2, 3})
	expectCode(t, err, CodeBadArchive, "")
	_, err = pool.LoadPackageBytes(nil)
	if err == nil {
		t.Error("an empty archive loaded")
	}
	for _, name := range []string{"malformed/plain.zip", "resnet18_script.pt"} {
		_, err = pool.LoadPackage(archive(t, name))
		expectCode(t, err, CodeNotAPackage, "")
	}
	_, err = pool.LoadPackage(archive(t, "malformed/future_version.pt"))
	expectCode(t, err, CodeUnsupportedVersion, "")
	corrupt := must(pool.LoadPackage(archive(t, "malformed/corrupt.pt")))
	_, err = corrupt.LoadPickle("model", "model.pkl")
	expectCode(t, err, CodeBadArchive, "")
	corrupt.Close()
	missing := must(pool.LoadPackage(archive(t, "malformed/missing_extern.pt")))
	_, err = missing.LoadPickle("model", "model.pkl")
	if expectCode(t, err, CodeModuleNotFound, "").PythonType != "ModuleNotFoundError" {
		t.Error("missing extern: python type")
	}
	missing.Close()

	pkg := must(pool.LoadPackage(archive(t, "python_heavy.pt")))
	defer pkg.Close()
	model := must(pkg.LoadPickle("model", "model.pkl"))
	defer model.Close()
	// A wrong input shape fails inside the model's own code.
	x := must(NewTensor(make([]float32, 6), 2, 3))
	defer x.Close()
	_, err = model.Call(bg, x)
	if !strings.Contains(expectCode(t, err, CodePython, "").Traceback, "forward") {
		t.Error("model error: no forward in the traceback")
	}
	x64 := must(NewTensor(make([]float32, 256), 4, 64))
	defer x64.Close()
	_, err = model.CallKw(bg, "", []any{x64}, map[string]any{"no_such_kwarg": 1})
	expectCode(t, err, CodePython, "TypeError")
	_, err = model.CallMethod(bg, "no_such_method")
	expectCode(t, err, CodeNoSuchName, "no_such_method")
	_, err = model.Attr(bg, "no_such_attr")
	expectCode(t, err, CodeNoSuchName, "no_such_attr")
	_, err = pkg.ReadFile("no_such_record")
	expectCode(t, err, CodeNoSuchName, "no_such_record")
	_, err = pkg.LoadPickle("model", "missing.pkl")
	expectCode(t, err, CodeNoSuchName, "missing")

	_, err = NewPool(PoolOptions{Interpreters: 1000})
	expectCode(t, err, CodeOutOfRange, "")
	_, err = NewPool(PoolOptions{Interpreters: -1})
	expectCode(t, err, CodeOutOfRange, "")
	_, err = NewPool(PoolOptions{IntraOpThreads: -1})
	expectCode(t, err, CodeOutOfRange, "")
	_, err = NewPool(PoolOptions{ThreadMode: 7})
	expectCode(t, err, CodeInvalidArgument, "")
	_, err = NewPool(PoolOptions{TrustedSHA256: []string{"not hex"}})
	expectCode(t, err, CodeInvalidArgument, "")
	expectCode(t, pool.Exec(7, "x = 1"), CodeOutOfRange, "")
	_, err = model.Call(WithCallOptions(bg, CallOptions{Pinned: true, Interpreter: -5}), x64)
	expectCode(t, err, CodeOutOfRange, "")
	_, err = StartProfiler(0)
	expectCode(t, err, CodeOutOfRange, "sampling probability")
	expectCode(t, LogAPIUsage(""), CodeInvalidArgument, "")
	expectCode(t, LoadOperatorLibrary("/no/such/libops.so"), CodeNotFound, "")
	expectCode(t, LoadOperatorLibrary(archive(t, "identity.json")), CodeLoader, "")
	expectCode(t, SetScriptIntraOpThreads(0), CodeOutOfRange, "")
}

func TestSixteenCallbackRegistrationsAtMost(t *testing.T) {
	var regs []*OpCallbacks
	defer func() {
		for _, r := range regs {
			if err := r.Remove(); err != nil {
				t.Error(err)
			}
		}
	}()
	var err error
	for i := 0; i < 17 && err == nil; i++ {
		var r *OpCallbacks
		if r, err = AddOpCallbacks(nil, func(*OpEvent) {}, 0.5, false); err == nil {
			regs = append(regs, r)
		}
	}
	expectCode(t, err, CodeResourceExhausted, "")
	if len(regs) != 16 {
		t.Errorf("%d registrations", len(regs))
	}
}

// Child processes: the test binary again, with MANYPY_GO_CHILD naming what
// to do, in an environment the parent sets up.
func TestMain(m *testing.M) {
	if mode := os.Getenv("MANYPY_GO_CHILD"); mode != "" {
		os.Exit(childMain(mode))
	}
	os.Exit(m.Run())
}

func runChild(t *testing.T, mode string, env ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), "MANYPY_GO_CHILD="+mode), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child %s: %v\n%s", mode, err, out)
	}
	return string(out)
}

func childMain(mode string) int {
	switch mode {
	case "version":
		// Against the fake 1.0.0 library: an error at the first call.
		_, err := NewPool(PoolOptions{})
		_, err2 := NewTensor([]float32{1})
		if errors.Is(err, ErrLoader) && errors.Is(err2, ErrLoader) {
			os.Stdout.WriteString("refused: " + err.Error() + "\n")
			return 0
		}
		os.Stdout.WriteString("not refused\n")
		return 1
	case "static-tls":
		// Without GLIBC_TUNABLES: the process's 15 interpreters cannot all
		// start (glibc's default holds 5 on torch 1.13, 14 on torch 2.x).
		n := MaxInterpreters()
		pool, err := NewPool(PoolOptions{Interpreters: n})
		if err == nil {
			defer pool.Close()
			for i := 0; i < n && err == nil; i++ {
				err = pool.Exec(i, "import torch")
			}
		}
		if errors.Is(err, ErrStaticTLS) {
			os.Stdout.WriteString("static tls: " + err.Error() + "\n")
			return 0
		}
		os.Stdout.WriteString("no static TLS error: " + errString(err) + "\n")
		return 1
	}
	return 2
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func TestVersionMismatch(t *testing.T) {
	dir := os.Getenv("MANYPY_FAKE_LIBRARY_DIR")
	if dir == "" {
		t.Fatal("MANYPY_FAKE_LIBRARY_DIR is not set (the ctest entry sets it to <build>/go-fake-manypy)")
	}
	out := runChild(t, "version", "LD_LIBRARY_PATH="+dir)
	if !strings.Contains(out, "version 1.0.0") || !strings.Contains(out, "0.3.x") {
		t.Errorf("message: %s", out)
	}
}

func TestStaticTLSWithoutTheTunable(t *testing.T) {
	want := "GLIBC_TUNABLES=glibc.rtld.optional_static_tls"
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GLIBC_TUNABLES=") {
			env = append(env, kv)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(env, "MANYPY_GO_CHILD=static-tls")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), want) {
		t.Errorf("child output lacks %q: %s", want, out)
	}
}
