package manypy

import (
	"context"
	"errors"
	"reflect"
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
	const timeout = 300 * time.Millisecond
	for _, method := range []string{"spin", "spin_catching"} {
		ctx, cancel := context.WithTimeout(bg, timeout)
		start := time.Now()
		_, err := model.CallMethod(ctx, method)
		expectStopped(t, method, err, time.Since(start), timeout, context.DeadlineExceeded, CodeDeadlineExceeded)
		cancel()
		var e *Error
		if errors.As(err, &e); e.PythonType != "manypy.DeadlineExceeded" {
			t.Errorf("%s: python type %q", method, e.PythonType)
		}
	}
	// A property runs Python too: Attr takes the context.
	ctx, cancel := context.WithTimeout(bg, timeout)
	start := time.Now()
	_, err := model.Attr(ctx, "spinning_property")
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
