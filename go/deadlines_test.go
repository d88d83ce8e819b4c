package manypy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Stops are bounded by the timeout plus this: the interpreter checks at
// bytecode boundaries; the margin covers a loaded 2-core machine and -race.
const stopMargin = 500 * time.Millisecond

func expectStopped(t *testing.T, what string, err error, elapsed, bound time.Duration, ctxErr error, code Code) {
	t.Helper()
	if !errors.Is(err, ctxErr) || !errors.Is(err, ErrorFor(code)) {
		t.Fatalf("%s: got %v, want %s / %v", what, err, code, ctxErr)
	}
	if elapsed > bound+stopMargin {
		t.Errorf("%s: stopped after %v, bound %v", what, elapsed, bound)
	}
}

func testDeadlines(t *testing.T, mode ThreadMode) {
	pool := newPool(t, PoolOptions{Interpreters: 2, ThreadMode: mode})
	model := loadModel(t, pool, "stuck.pt")
	x := must(NewTensor([]float32{1, 2}))
	defer x.Close()
	checkServes := func() {
		for i := 0; i < 2; i++ {
			out := must(model.Call(WithCallOptions(bg, CallOptions{Pinned: true, Interpreter: i}), x))
			if got := tensorFloats(t, out); !reflect.DeepEqual(got, []float32{2, 4}) {
				t.Fatalf("interpreter %d after a stop: %v", i, got)
			}
		}
	}
	// A loop the stop ends: its interpreter serves on (checkServes below).
	// A loop that catches the stop retires its interpreter:
	// TestCatchingTheStopRetiresTheInterpreter.
	const timeout = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(bg, timeout)
	start := time.Now()
	_, err := model.CallMethod(ctx, "spin")
	expectStopped(t, "spin", err, time.Since(start), timeout, context.DeadlineExceeded, CodeDeadlineExceeded)
	cancel()
	var e *Error
	if errors.As(err, &e); e.PythonType != "manypy.DeadlineExceeded" || strings.Contains(e.Message, "retired") {
		t.Errorf("spin: python type %q, message %q", e.PythonType, e.Message)
	}
	// A property runs Python too: Attr takes the context.
	ctx, cancel = context.WithTimeout(bg, timeout)
	start = time.Now()
	_, err = model.Attr(ctx, "spinning_property")
	expectStopped(t, "property", err, time.Since(start), timeout, context.DeadlineExceeded, CodeDeadlineExceeded)
	cancel()
	checkServes()

	// A cancel from another goroutine stops two running calls.
	ctx, cancel = context.WithCancel(bg)
	errs := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func() {
			_, err := model.CallMethod(WithCallOptions(ctx, CallOptions{Pinned: true, Interpreter: i}), "spin")
			errs <- err
		}()
	}
	time.Sleep(200 * time.Millisecond)
	start = time.Now()
	cancel()
	for i := 0; i < 2; i++ {
		expectStopped(t, "cancel", <-errs, time.Since(start), 0, context.Canceled, CodeCancelled)
	}
	checkServes()

	// Already done: fails at once, nothing runs.
	start = time.Now()
	_, err = model.CallMethod(ctx, "spin")
	expectStopped(t, "cancelled before", err, time.Since(start), 0, context.Canceled, CodeCancelled)
	expired, cancelExpired := context.WithDeadline(bg, time.Now().Add(-time.Second))
	defer cancelExpired()
	_, err = model.CallMethod(expired, "spin")
	expectStopped(t, "expired before", err, time.Since(start), 0, context.DeadlineExceeded, CodeDeadlineExceeded)

	// A call queued for a busy interpreter gives up at its deadline (in
	// DIRECT mode threads share the interpreter's GIL: there is no queue).
	if mode == Handoff {
		waitForBusyInterpreter(t, model, x, timeout)
	}

	// Bounds that never expire change nothing.
	ctx, cancel = context.WithTimeout(bg, time.Hour)
	if got := tensorFloats(t, must(model.Call(ctx, x))); !reflect.DeepEqual(got, []float32{2, 4}) {
		t.Errorf("with a far deadline: %v", got)
	}
	cancel()
}

func waitForBusyInterpreter(t *testing.T, model *Object, x *Tensor, timeout time.Duration) {
	busy, stopBusy := context.WithTimeout(bg, 2*time.Second)
	defer stopBusy()
	pinned0 := WithCallOptions(busy, CallOptions{Pinned: true, Interpreter: 0})
	go func() { _, _ = model.CallMethod(pinned0, "spin") }()
	time.Sleep(200 * time.Millisecond)
	ctx, cancel := context.WithTimeout(WithCallOptions(bg, CallOptions{Pinned: true, Interpreter: 0}), timeout)
	defer cancel()
	start := time.Now()
	_, err := model.Call(ctx, x)
	expectStopped(t, "waiting", err, time.Since(start), timeout, context.DeadlineExceeded, CodeDeadlineExceeded)
}

func TestDeadlinesDirect(t *testing.T)  { testDeadlines(t, Direct) }
func TestDeadlinesHandoff(t *testing.T) { testDeadlines(t, Handoff) }

// A model that catches the stop and goes on (stuck.pt's spin_catching) is
// ended once the pool's stop grace has passed, and its interpreter is
// retired for the rest of the process: the call's error says so, and the
// pool replaces it in the same index before the call returns
// (docs/serving.md, "Retired interpreters"): Stats counts it, and calls
// pinned to that index and calls to any interpreter are served.
// In a child process: a retired interpreter keeps its place among the
// process's (TestUnclosedPoolsAreCollected makes a pool of all of them).
// The cases retire 3 interpreters, each replaced.
func TestCatchingTheStopRetiresTheInterpreter(t *testing.T) {
	if !isolated(t) {
		return
	}
	t.Run("DefaultGrace", func(t *testing.T) { testRetirement(t, Direct, 0, 100*time.Millisecond) })
	t.Run("GraceSet", func(t *testing.T) { testRetirement(t, Handoff, 250*time.Millisecond, 250*time.Millisecond) })
	t.Run("NoStopGrace", func(t *testing.T) { testRetirement(t, Direct, NoStopGrace, 0) })
}

// testRetirement: a pool with StopGrace stopGrace, whose stops escalate
// after grace.
func testRetirement(t *testing.T, mode ThreadMode, stopGrace, grace time.Duration) {
	pool := newPool(t, PoolOptions{Interpreters: 2, ThreadMode: mode, StopGrace: stopGrace})
	model := loadModel(t, pool, "stuck.pt")
	x := must(NewTensor([]float32{1, 2}))
	defer x.Close()
	on := func(i int) context.Context { return WithCallOptions(bg, CallOptions{Pinned: true, Interpreter: i}) }
	serves := func(ctx context.Context) {
		t.Helper()
		if got := tensorFloats(t, must(model.Call(ctx, x))); !reflect.DeepEqual(got, []float32{2, 4}) {
			t.Fatalf("x * 2: %v", got)
		}
	}
	serves(on(0)) // the replicas, made before any timeout runs
	serves(on(1))

	const timeout = 300 * time.Millisecond
	start := time.Now()
	ctx, cancel := context.WithTimeout(on(1), timeout)
	_, err := model.CallMethod(ctx, "spin_catching")
	elapsed := time.Since(start)
	cancel()
	expectStopped(t, "spin_catching", err, elapsed, timeout+grace, context.DeadlineExceeded, CodeDeadlineExceeded)
	if elapsed < timeout+grace {
		t.Errorf("escalated after %v, before the grace (%v) had passed", elapsed, grace)
	}
	var e *Error
	errors.As(err, &e)
	graceText := fmt.Sprintf("within its %d ms grace period", grace.Milliseconds())
	if e.PythonType != "manypy.DeadlineExceeded" || !strings.Contains(e.Traceback, "spin_catching") ||
		!strings.Contains(e.Message, "the interpreter was retired") || !strings.Contains(e.Message, graceText) {
		t.Errorf("spin_catching: %q, %q\n%s", e.PythonType, e.Message, e.Traceback)
	}

	// Replaced: index 1 names the replacement, which serves once it has
	// started (calls pinned to it wait for it).
	if stats, err := pool.Stats(); err != nil || stats.Replaced != 1 || stats.NoRoom {
		t.Errorf("Stats after the retirement: %+v, %v", stats, err)
	}
	for _, i := range []int{0, 1} {
		if err := pool.CheckInterpreter(i); err != nil {
			t.Errorf("CheckInterpreter(%d): %v", i, err)
		}
	}
	for _, i := range []int{2, AnyInterpreter, 1 << 32} {
		if err := pool.CheckInterpreter(i); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("CheckInterpreter(%d): %v", i, err)
		}
	}
	for k := 0; k < 4; k++ {
		serves(bg)
	}
	serves(on(0))
	serves(on(1))
	pool.Close()
	if err := pool.CheckInterpreter(0); !errors.Is(err, ErrClosed) {
		t.Errorf("CheckInterpreter after Close: %v", err)
	}
}

// TorchScript on the host stops before its next tensor operator.
func TestDeadlinesScript(t *testing.T) {
	script := must(LoadScript(archive(t, "loop_script.pt")))
	defer script.Close()
	x := must(NewTensor([]float32{0, 0}))
	defer x.Close()
	got := tensorFloats(t, must(script.Call(bg, x, 3)))
	if !reflect.DeepEqual(got, []float32{3, 3}) {
		t.Fatalf("loop: %v", got)
	}
	ctx, cancel := context.WithTimeout(bg, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := script.Call(ctx, x, int64(1)<<40)
	expectStopped(t, "script", err, time.Since(start), 200*time.Millisecond, context.DeadlineExceeded, CodeDeadlineExceeded)
	ctx, cancel = context.WithCancel(bg)
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	_, err = script.Call(ctx, x, int64(1)<<40)
	expectStopped(t, "script cancel", err, time.Since(start), time.Second, context.Canceled, CodeCancelled)
}

// ExecContext and EvalContext are bounded as object calls: a deadline ends
// a loop with the deadline's error and its interpreter serves on, a cancel
// from another goroutine ends a running eval, and CallOptions pin the
// interpreter.
func TestExecAndEvalTakeTheContext(t *testing.T) {
	pool := newPool(t, PoolOptions{Interpreters: 2})
	on := func(ctx context.Context, i int) context.Context {
		return WithCallOptions(ctx, CallOptions{Pinned: true, Interpreter: i})
	}
	for i := 0; i < 2; i++ {
		if err := pool.ExecContext(on(bg, i), fmt.Sprintf("where = %d", i)); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(on(bg, 1), 200*time.Millisecond)
	// One line: Python 3.11 sends no line event for its jump to itself, and
	// the stop still reaches it (core/interp/stop.c).
	err := pool.ExecContext(ctx, "while True: pass")
	cancel()
	var e *Error
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &e) ||
		e.Code != CodeDeadlineExceeded || e.PythonType != "manypy.DeadlineExceeded" {
		t.Fatalf("exec with a deadline: %+v", err)
	}
	if err := pool.CheckInterpreter(1); err != nil {
		t.Errorf("after the stop: %v", err)
	}
	for i := 0; i < 2; i++ {
		if got, err := pool.EvalContext(on(bg, i), "where"); err != nil || got != int64(i) {
			t.Errorf("interpreter %d after the stop: %v, %v", i, got, err)
		}
	}

	// The eval makes a file, then spins: cancelled once the file is there,
	// so the cancel reaches running Python, not a call yet to start.
	started := filepath.Join(t.TempDir(), "started")
	ctx, cancel = context.WithCancel(on(bg, 0))
	defer cancel()
	errs := make(chan error, 1)
	go func() {
		_, err := pool.EvalContext(ctx, fmt.Sprintf(
			"(open(%q, 'w').close(), next(x for x in iter(int, 1) if x))", started))
		errs <- err
	}()
	for {
		if _, err := os.Stat(started); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	err = <-errs
	if !errors.Is(err, context.Canceled) || !errors.As(err, &e) || e.PythonType != "manypy.Cancelled" {
		t.Fatalf("eval cancelled: %+v", err)
	}
	if got, err := pool.EvalContext(on(bg, 0), "where + 40"); err != nil || got != int64(40) {
		t.Errorf("interpreter 0 after the cancel: %v, %v", got, err)
	}

	// A done context runs nothing; an index outside the pool is refused.
	if err := pool.ExecContext(ctx, "where = -1"); !errors.Is(err, context.Canceled) {
		t.Errorf("exec with a cancelled context: %v", err)
	}
	if got := must(pool.EvalContext(on(bg, 0), "where")); got != int64(0) {
		t.Errorf("a cancelled exec ran: where = %v", got)
	}
	if _, err := pool.EvalContext(on(bg, 2), "1"); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("eval on interpreter 2: %v", err)
	}
	if got := must(pool.EvalContext(bg, "where in (0, 1)")); got != true {
		t.Errorf("eval anywhere: %v", got)
	}
}

// A call that C code keeps in the GIL (hostile.pt's hold_gil: 3 s) cannot
// be stopped. Twice the stop grace after its deadline its interpreter is
// lost: Stats counts it, CheckInterpreter says why, and a HANDOFF caller
// gets its deadline's error while the call still runs. When the call
// returns, the interpreter serves again (docs/serving.md, "Lost
// interpreters").
func TestACallHoldingTheGILMakesItsInterpreterLost(t *testing.T) {
	pool := newPool(t, PoolOptions{Interpreters: 1, ThreadMode: Handoff})
	model := loadModel(t, pool, "hostile.pt")
	ctx, cancel := context.WithTimeout(bg, 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := model.CallMethod(ctx, "evade_stop", "hold_gil")
		done <- err
	}()
	eventually(t, "the interpreter lost", func() bool { return must(pool.Stats()).Lost == 1 })
	s := must(pool.Stats())
	if s.Starting+s.Ready+s.Busy+s.Broken+s.Lost != 1 || s.Serving() {
		t.Errorf("lost: %+v", s)
	}
	if err := pool.CheckInterpreter(0); !errors.Is(err, ErrInterpreterBroken) ||
		!strings.Contains(err.Error(), "it is lost") {
		t.Errorf("CheckInterpreter while lost: %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrorFor(CodeDeadlineExceeded)) || !strings.Contains(err.Error(), "did not end") {
			t.Errorf("the caller: %v", err)
		}
	case <-time.After(hangBound):
		t.Fatalf("the HANDOFF caller was not told within %v", hangBound)
	}
	if must(pool.Stats()).Lost != 1 {
		t.Errorf("the caller was told only after the call ended")
	}
	eventually(t, "the interpreter back", func() bool { return must(pool.Stats()).Lost == 0 })
	if err := pool.CheckInterpreter(0); err != nil {
		t.Errorf("after the call ended: %v", err)
	}
}
