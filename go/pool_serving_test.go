package manypy

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The serving lifecycle (serving.go): serve early, stats, request
// metrics, resize, growth, drain, the interpreter failed callback.

// execAs runs source bounded by a context naming model (and pinning
// interpreter, unless it is AnyInterpreter).
func execAs(pool *Pool, interpreter int, model, source string) error {
	opts := CallOptions{ModelID: model}
	if interpreter != AnyInterpreter {
		opts.Pinned, opts.Interpreter = true, interpreter
	}
	return pool.ExecContext(WithCallOptions(bg, opts), source)
}

func stats(t *testing.T, pool *Pool) PoolStats {
	t.Helper()
	return must(pool.Stats())
}

// A pool that serves early, on fresh interpreters (a child process: this
// process's are started already): NewPool returns while the others still
// start, the counts add up, a call pinned to one still starting waits for
// it, and in the end all serve.
func TestServeEarly(t *testing.T) {
	if !isolated(t) {
		return
	}
	start := time.Now()
	pool := newPool(t, PoolOptions{Interpreters: 3, ServeEarly: true})
	first := time.Since(start)
	s := stats(t, pool)
	t.Logf("serving after %v: %+v", first, s)
	if s.Interpreters != 3 || pool.Size() != 3 || s.Ready+s.Busy < 1 || s.Starting < 1 || s.Broken != 0 ||
		s.Lost != 0 || s.Ready+s.Busy+s.Starting+s.Broken+s.Lost != 3 || s.Draining || !s.Serving() {
		t.Errorf("right after NewPool: %+v", s)
	}
	model := loadModel(t, pool, "version_1.pt")
	pinned := WithCallOptions(bg, CallOptions{Pinned: true, Interpreter: 2})
	if v, err := model.CallMethod(pinned, "version"); err != nil || v != int64(1) {
		t.Fatalf("version() on the last interpreter: %v, %v", v, err)
	}
	eventually(t, "every interpreter started", func() bool { return stats(t, pool).Starting == 0 })
	s = stats(t, pool)
	if s.Ready+s.Busy != 3 || s.Broken != 0 {
		t.Errorf("all started: %+v", s)
	}
	for i := 0; i < 3; i++ {
		if err := pool.CheckInterpreter(i); err != nil {
			t.Errorf("interpreter %d: %v", i, err)
		}
	}
	t.Logf("all serving after %v", time.Since(start))
}

// ServingAtLeast counts the interpreters that serve (ready or busy), never
// asks for fewer than 1, and is false while draining; Serving is
// ServingAtLeast(1).
func TestServingAtLeast(t *testing.T) {
	for _, c := range []struct {
		stats PoolStats
		min   int
		want  bool
	}{
		{PoolStats{Interpreters: 4, Ready: 1, Busy: 1, Broken: 1, Lost: 1}, 2, true},
		{PoolStats{Interpreters: 4, Ready: 1, Busy: 1, Broken: 1, Lost: 1}, 3, false},
		{PoolStats{Interpreters: 2, Broken: 1, Lost: 1}, 0, false},
		{PoolStats{Interpreters: 2, Ready: 1, Lost: 1}, 0, true},
		{PoolStats{Interpreters: 2, Ready: 2, Draining: true}, 1, false},
	} {
		if got := c.stats.ServingAtLeast(c.min); got != c.want {
			t.Errorf("%+v.ServingAtLeast(%d) = %v", c.stats, c.min, got)
		}
		if c.stats.Serving() != c.stats.ServingAtLeast(1) {
			t.Errorf("%+v: Serving() is not ServingAtLeast(1)", c.stats)
		}
	}
}

// Stats and request metrics after calls of two models: the counts by code,
// the histograms, the text exposition with the pool's name; ErrClosed once
// closed.
func TestStatsAndRequestMetrics(t *testing.T) {
	pool := must(NewPool(PoolOptions{Interpreters: 2, Name: `svc "a"`}))
	defer pool.Close()
	if pool.Name() != `svc "a"` {
		t.Errorf("Name() = %q", pool.Name())
	}
	s := stats(t, pool)
	if s.Interpreters != 2 || s.Ready != 2 || s.InFlight+s.Queued != 0 || s.Draining || len(s.Completed) != 0 {
		t.Errorf("a new pool: %+v", s)
	}
	for i := 0; i < 3; i++ {
		if err := execAs(pool, AnyInterpreter, "m1", "x = 1"); err != nil {
			t.Fatal(err)
		}
	}
	expectCode(t, execAs(pool, 0, "m1", "raise ValueError('no')"), CodePython, "ValueError")
	expectCode(t, execAs(pool, 7, "m1", "x = 1"), CodeOutOfRange, "")
	if err := execAs(pool, 1, "m2", "y = 2"); err != nil {
		t.Fatal(err)
	}
	s = stats(t, pool)
	want := map[Code]uint64{CodeOK: 4, CodePython: 1, CodeOutOfRange: 1}
	if fmt.Sprint(s.Completed) != fmt.Sprint(want) {
		t.Errorf("completed %v, want %v", s.Completed, want)
	}

	metrics := must(pool.RequestMetrics())
	if len(metrics) != 2 || metrics[0].Model != "m1" || metrics[1].Model != "m2" {
		t.Fatalf("metrics of %d models: %+v", len(metrics), metrics)
	}
	m1, m2 := metrics[0], metrics[1]
	if fmt.Sprint(m1.Completed) != fmt.Sprint(map[Code]uint64{CodeOK: 3, CodePython: 1, CodeOutOfRange: 1}) ||
		fmt.Sprint(m2.Completed) != fmt.Sprint(map[Code]uint64{CodeOK: 1}) {
		t.Errorf("completed: m1 %v, m2 %v", m1.Completed, m2.Completed)
	}
	// The refusal has no duration: 4 requests timed, 4 queue times.
	if m1.Request.Count != 4 || m1.Queue.Count != 4 || m2.Request.Count != 1 || m2.Queue.Count != 1 {
		t.Errorf("counts: m1 %d/%d, m2 %d/%d", m1.Request.Count, m1.Queue.Count, m2.Request.Count, m2.Queue.Count)
	}
	if m1.Request.Sum <= 0 || m1.Request.Sum > 10 || m1.Queue.Sum < 0 || m1.Queue.Sum > m1.Request.Sum {
		t.Errorf("sums: request %v, queue %v", m1.Request.Sum, m1.Queue.Sum)
	}
	for _, h := range []Histogram{m1.Request, m1.Queue, m2.Request, m2.Queue} {
		if len(h.Buckets) < 5 {
			t.Fatalf("%d buckets", len(h.Buckets))
		}
		for i, b := range h.Buckets {
			if b.UpperBound != m1.Request.Buckets[i].UpperBound {
				t.Errorf("bucket %d: bound %v, another histogram's %v", i, b.UpperBound, m1.Request.Buckets[i].UpperBound)
			}
			if i > 0 && (b.UpperBound <= h.Buckets[i-1].UpperBound || b.Count < h.Buckets[i-1].Count) {
				t.Errorf("bucket %d (%v, %d) after (%v, %d)", i, b.UpperBound, b.Count,
					h.Buckets[i-1].UpperBound, h.Buckets[i-1].Count)
			}
		}
		if last := h.Buckets[len(h.Buckets)-1]; last.Count > h.Count || last.UpperBound != 10 {
			t.Errorf("last bucket %+v of %d", last, h.Count)
		}
	}

	text := must(pool.PrometheusText())
	for _, line := range []string{
		"# TYPE manypy_requests_total counter\n",
		`manypy_requests_total{pool="svc \"a\"",model="m1",code="ok"} 3` + "\n",
		`manypy_requests_total{pool="svc \"a\"",model="m1",code="python"} 1` + "\n",
		`manypy_requests_total{pool="svc \"a\"",model="m1",code="out_of_range"} 1` + "\n",
		`manypy_request_duration_seconds_bucket{pool="svc \"a\"",model="m1",le="+Inf"} 4` + "\n",
		`manypy_queue_duration_seconds_count{pool="svc \"a\"",model="m2"} 1` + "\n",
		`manypy_inflight_requests{pool="svc \"a\""} 0` + "\n",
		`manypy_interpreters{pool="svc \"a\"",state="ready"} 2` + "\n",
		`manypy_draining{pool="svc \"a\""} 0` + "\n",
	} {
		if !strings.Contains(text, line) {
			t.Errorf("the text lacks %q:\n%s", line, text)
		}
	}

	pool.Close()
	if _, err := pool.Stats(); !errors.Is(err, ErrClosed) {
		t.Errorf("Stats after Close: %v", err)
	}
	if _, err := pool.RequestMetrics(); !errors.Is(err, ErrClosed) {
		t.Errorf("RequestMetrics after Close: %v", err)
	}
	if _, err := pool.PrometheusText(); !errors.Is(err, ErrClosed) {
		t.Errorf("PrometheusText after Close: %v", err)
	}
	if _, err := pool.Drain(bg); !errors.Is(err, ErrClosed) {
		t.Errorf("Drain after Close: %v", err)
	}
	if err := pool.Resize(1); !errors.Is(err, ErrClosed) {
		t.Errorf("Resize after Close: %v", err)
	}
}

// The serving options' bad values are refused by NewPool with precise
// errors.
func TestServingOptionsRefused(t *testing.T) {
	for _, c := range []struct {
		opts PoolOptions
		code Code
		in   string
	}{
		{PoolOptions{Interpreters: 2, MaxInterpreters: 1}, CodeOutOfRange, "most interpreters"},
		{PoolOptions{MaxInterpreters: MaxInterpreters() + 1}, CodeOutOfRange, "most interpreters"},
		{PoolOptions{MaxInterpreters: -1}, CodeOutOfRange, "most interpreters must be >= 0"},
		{PoolOptions{GrowAfter: -time.Millisecond}, CodeOutOfRange, "wait_ns must be >= 1"},
		{PoolOptions{Name: "a\x00b"}, CodeInvalidArgument, "NUL"},
		{PoolOptions{Name: "\xff"}, CodeInvalidArgument, "UTF-8"},
	} {
		pool, err := NewPool(c.opts)
		if pool != nil {
			pool.Close()
		}
		expectCode(t, err, c.code, c.in)
	}
}

// Resize: bad sizes with the C message, growing and shrinking, an object
// loaded before serving on a new member, a pinned call to a member that
// left.
func TestResize(t *testing.T) {
	pool := newPool(t, PoolOptions{Interpreters: 1})
	model := loadModel(t, pool, "version_1.pt")
	// The C library's message, and the same for a size C cannot take.
	for _, n := range []int{0, MaxInterpreters() + 1, -1} {
		e := expectCode(t, pool.Resize(n), CodeOutOfRange, "")
		if want := fmt.Sprintf("a pool needs 1 to %d interpreters on this platform, not %d", MaxInterpreters(), n); e.Message != want {
			t.Errorf("Resize(%d): %q, want %q", n, e.Message, want)
		}
	}
	if pool.Size() != 1 {
		t.Fatalf("size %d after refused resizes", pool.Size())
	}
	on1 := WithCallOptions(bg, CallOptions{Pinned: true, Interpreter: 1})
	for round := 0; round < 2; round++ {
		if err := pool.Resize(2); err != nil {
			t.Fatal(err)
		}
		if s := stats(t, pool); pool.Size() != 2 || s.Interpreters != 2 || s.Ready != 2 {
			t.Fatalf("grown: size %d, %+v", pool.Size(), s)
		}
		if v, err := model.CallMethod(on1, "version"); err != nil || v != int64(1) {
			t.Fatalf("on the new member: %v, %v", v, err)
		}
		if err := pool.Resize(1); err != nil {
			t.Fatal(err)
		}
		if pool.Size() != 1 {
			t.Fatalf("shrunk: size %d", pool.Size())
		}
		_, err := model.CallMethod(on1, "version")
		expectCode(t, err, CodeOutOfRange, "the pool has 1")
		if err := pool.Resize(1); err != nil {
			t.Fatal(err)
		}
	}
}

// A pool of 1 that may grow to 2 after waits of 5 ms: 4 concurrent calls of
// 100 ms make it grow.
func TestGrowsOnLongWaits(t *testing.T) {
	pool := newPool(t, PoolOptions{Interpreters: 1, MaxInterpreters: 2, GrowAfter: 5 * time.Millisecond,
		ThreadMode: Handoff})
	if pool.Size() != 1 {
		t.Fatalf("size %d before any wait", pool.Size())
	}
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := pool.Exec(AnyInterpreter, "import time\ntime.sleep(0.1)"); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	eventually(t, "the pool grown to 2", func() bool { return stats(t, pool).Ready == 2 })
	if pool.Size() != 2 {
		t.Errorf("size %d", pool.Size())
	}
}

// running starts n calls of source on the pool, pinned to interpreters
// (AnyInterpreter: not pinned), and returns their errors' channel once all
// are in flight.
func running(t *testing.T, pool *Pool, source string, interpreters ...int) chan error {
	t.Helper()
	before := pool.InFlight()
	done := make(chan error, len(interpreters))
	for _, i := range interpreters {
		go func() { done <- execAs(pool, i, "slow", source) }()
	}
	eventually(t, "the calls in flight", func() bool { return pool.InFlight() >= before+len(interpreters) })
	return done
}

// A drain lets the calls in flight finish, then every new call of any kind
// is refused with ErrDraining, and counted; a second drain has nothing to
// wait for; resizing is refused.
func TestDrainFinishesCalls(t *testing.T) {
	for name, mode := range map[string]ThreadMode{"direct": Direct, "handoff": Handoff} {
		t.Run(name, func(t *testing.T) {
			pool := newPool(t, PoolOptions{Interpreters: 2, ThreadMode: mode})
			model := loadModel(t, pool, "version_2.pt")
			batcher := newBatcher(t, model, "", BatcherOptions{})
			x := must(NewTensor([]float32{0, 0}, 1, 2))
			defer x.Close()
			must(model.Call(bg, x)).(*Tensor).Close()
			// Two on interpreter 0 (one waits), one on 1.
			calls := running(t, pool, "import time\ntime.sleep(0.3)", 0, 0, 1)
			ctx, cancel := context.WithTimeout(bg, 20*time.Second)
			defer cancel()
			result, err := pool.Drain(ctx)
			if err != nil || result != (DrainResult{Finished: 3}) {
				t.Errorf("drain: %+v, %v", result, err)
			}
			for i := 0; i < 3; i++ {
				if err := <-calls; err != nil {
					t.Errorf("a call in flight at the drain: %v", err)
				}
			}
			// Refused, whatever the way in.
			expectCode(t, execAs(pool, 0, "late", "x = 1"), CodeDraining, "draining")
			_, err = pool.Eval(AnyInterpreter, "1")
			expectCode(t, err, CodeDraining, "")
			_, err = model.Call(bg, x)
			expectCode(t, err, CodeDraining, "")
			_, err = batcher.Call(bg, x)
			expectCode(t, err, CodeDraining, "")
			s := stats(t, pool)
			if !s.Draining || s.Serving() || s.Completed[CodeDraining] != 4 || s.Completed[CodeOK] != 4 {
				t.Errorf("stats after the drain: %+v", s)
			}
			// Twice: nothing left, nothing counted.
			if result, err := pool.Drain(bg); err != nil || result != (DrainResult{}) {
				t.Errorf("second drain: %+v, %v", result, err)
			}
			expectCode(t, pool.Resize(1), CodeDraining, "draining")
		})
	}
}

// At the context's deadline a drain cancels what is left, running or
// queued; so does a cancellation before it, and a context already done.
func TestDrainDeadlineAndCancellation(t *testing.T) {
	loop := "import time\nwhile True:\n    time.sleep(0.01)"
	for _, c := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(bg, 300*time.Millisecond)
		}},
		{"cancelled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(bg)
			time.AfterFunc(300*time.Millisecond, cancel)
			return ctx, cancel
		}},
		{"cancelled before a far deadline", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithTimeout(bg, time.Hour)
			time.AfterFunc(300*time.Millisecond, cancel)
			return ctx, cancel
		}},
		{"already done", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(bg)
			cancel()
			return ctx, cancel
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool := newPool(t, PoolOptions{Interpreters: 1, ThreadMode: Handoff})
			calls := running(t, pool, loop, 0, 0)
			ctx, cancel := c.ctx()
			defer cancel()
			start := time.Now()
			result, err := pool.Drain(ctx)
			took := time.Since(start)
			t.Logf("drained in %v: %+v", took, result)
			if err != nil || result != (DrainResult{Cancelled: 2}) {
				t.Errorf("drain: %+v, %v", result, err)
			}
			if took > 10*time.Second {
				t.Errorf("drained in %v", took)
			}
			for i := 0; i < 2; i++ {
				expectCode(t, <-calls, CodeCancelled, "manypy_pool_drain")
			}
			if pool.InFlight() != 0 {
				t.Errorf("%d in flight after the drain", pool.InFlight())
			}
		})
	}
}

// Drain racing Close of the pool (and of its object): the drain returns
// normally, or ErrClosed when the Close came first; the call in flight
// finishes; nothing is freed twice or under the drain (run with -race).
func TestDrainRacingClose(t *testing.T) {
	for round := 0; round < 6; round++ {
		pool := must(NewPool(PoolOptions{Interpreters: 2}))
		pkg := must(pool.LoadPackage(archive(t, "version_2.pt")))
		model := must(pkg.LoadPickle("model", "model.pkl"))
		pkg.Close()
		calls := running(t, pool, "import time\ntime.sleep(0.2)", 0)
		drained := make(chan error, 1)
		var result DrainResult
		go func() {
			var err error
			result, err = pool.Drain(bg)
			drained <- err
		}()
		switch round % 3 {
		case 1:
			time.Sleep(50 * time.Millisecond)
		case 2:
			runtime.Gosched()
		}
		model.Close()
		pool.Close()
		err := <-drained
		switch {
		case err == nil:
			if result.Finished+result.Cancelled != 1 {
				t.Errorf("round %d: %+v", round, result)
			}
		case !errors.Is(err, ErrClosed):
			t.Errorf("round %d: drain: %v", round, err)
		}
		if err := <-calls; err != nil {
			t.Errorf("round %d: the call in flight: %v", round, err)
		}
		if _, err := pool.Drain(bg); !errors.Is(err, ErrClosed) {
			t.Errorf("round %d: drain after close: %v", round, err)
		}
	}
}

// Model hot swap without HTTP (docs/deploy.md, "Model hot swap"): the
// current version is shared under a lock for each call, and every 200 ms
// replaced by the other version, 25 times, the old one closed while calls
// may run on it. For those 5 s or more, 8 goroutines call: no call fails, each result is
// filled with the version its share was, and version() agrees. In the end
// the versions swapped out are unloaded from every interpreter.
func TestHotSwapUnderLoad(t *testing.T) {
	long(t, "versions swapped under concurrent calls")
	pool := newPool(t, PoolOptions{Interpreters: 2})
	type version struct {
		model  *Object
		number int64
	}
	load := func(n int) version {
		pkg := must(pool.LoadPackage(archive(t, fmt.Sprintf("version_%d.pt", n))))
		defer pkg.Close()
		model := must(pkg.LoadPickle("model", "model.pkl"))
		number := must(model.CallMethod(bg, "version")).(int64)
		if number != int64(n) {
			t.Errorf("version_%d.pt says version %d", n, number)
		}
		return version{model, number}
	}
	var mu sync.Mutex
	current := load(1)
	// acquire shares the current version: the share stays callable however
	// many swaps happen before the call.
	acquire := func() (*Object, int64, error) {
		mu.Lock()
		defer mu.Unlock()
		shared, err := current.model.Share()
		return shared, current.number, err
	}

	stop := make(chan struct{})
	var calls, wrong atomic.Int64
	seen := [3]atomic.Int64{}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := must(NewTensor(make([]float32, 6), 2, 3))
			defer x.Close()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				model, number, err := acquire()
				if err != nil {
					t.Errorf("share: %v", err)
					return
				}
				out, err := model.Call(bg, x)
				if err == nil && i%8 == 0 {
					var v any
					if v, err = model.CallMethod(bg, "version"); err == nil && v != number {
						wrong.Add(1)
						t.Errorf("version() %v from a share of version %d", v, number)
					}
				}
				model.Close()
				if err != nil {
					t.Errorf("a call on version %d: %v", number, err)
					return
				}
				values := tensorFloats(t, out)
				if len(values) != 6 || slices.ContainsFunc(values, func(v float32) bool { return v != float32(number) }) {
					wrong.Add(1)
					t.Errorf("version %d answered %v", number, values)
				}
				seen[number].Add(1)
				calls.Add(1)
			}
		}()
	}
	// 25 swaps, one every 200 ms (later when a load takes longer).
	const swaps = 25
	ticker := time.NewTicker(200 * time.Millisecond)
	defer ticker.Stop()
	for swap := 0; swap < swaps; swap++ {
		<-ticker.C
		next := load(3 - int(current.number))
		mu.Lock()
		old := current
		current = next
		mu.Unlock()
		old.model.Close() // unloaded once the calls holding shares of it end
	}
	close(stop)
	wg.Wait()
	t.Logf("%d calls over %d swaps: %d on version 1, %d on version 2", calls.Load(), swaps,
		seen[1].Load(), seen[2].Load())
	if seen[1].Load() == 0 || seen[2].Load() == 0 || wrong.Load() != 0 {
		t.Errorf("calls by version %d and %d, %d wrong answers", seen[1].Load(), seen[2].Load(), wrong.Load())
	}
	// Only the current version is still loaded: every interpreter has at
	// most one Versioned module alive.
	count := "sum(1 for o in __import__('gc').get_objects() if type(o).__name__ == 'Versioned')"
	for i := 0; i < pool.Size(); i++ {
		eventually(t, fmt.Sprintf("the old versions unloaded from interpreter %d", i), func() bool {
			n, err := pool.Eval(i, count)
			if err != nil {
				t.Fatal(err)
			}
			return n.(int64) <= 1
		})
	}
	current.model.Close()
}

// The interpreter failed callback, in a child process (the interpreters it
// breaks stay broken): two interpreters whose next lease cannot begin (their
// runtime's lease_begin is made to raise), then a pool of 3 that serves
// early leases them and a fresh one. The pool serves on the fresh one; the
// callback is told about both, with their indices and errors, on a
// goroutine of its own, where it may call the pool; its panic is recovered
// and reported.
func TestOnInterpreterFailed(t *testing.T) {
	if !isolated(t) {
		return
	}
	first := must(NewPool(PoolOptions{Interpreters: 2}))
	if err := first.ExecAll("import _manypy_runtime\n" +
		"def _refuse(*args):\n    raise RuntimeError('this lease cannot begin')\n" +
		"_manypy_runtime.lease_begin = _refuse"); err != nil {
		t.Fatal(err)
	}
	first.Close()

	panics := make(chan CallbackPanic, 4)
	SetCallbackPanicHandler(func(p CallbackPanic) { panics <- p })
	defer SetCallbackPanicHandler(nil)
	type failure struct {
		index int
		err   error
		size  int
	}
	failures := make(chan failure, 4)
	var told atomic.Int64
	var pool *Pool // set once NewPool returns
	var poolMu sync.Mutex
	created := must(NewPool(PoolOptions{Interpreters: 3, ServeEarly: true,
		OnInterpreterFailed: func(index int, err error) {
			poolMu.Lock()
			p := pool
			poolMu.Unlock()
			size := -1
			if p != nil {
				size = p.Size() // calling the pool from the callback is allowed
			}
			failures <- failure{index, err, size}
			if told.Add(1) == 2 {
				panic("the second failure's callback panics")
			}
		}}))
	defer created.Close()
	poolMu.Lock()
	pool = created
	poolMu.Unlock()

	var indices []int
	for len(indices) < 2 {
		select {
		case f := <-failures:
			var e *Error
			if !errors.As(f.err, &e) || e.Code != CodePython ||
				!strings.Contains(e.Message, fmt.Sprintf("interpreter %d: ", f.index)) ||
				!strings.Contains(e.Message, "this lease cannot begin") {
				t.Errorf("failure of %d: %+v", f.index, f.err)
			}
			if f.size != -1 && f.size != 3 { // -1: told before NewPool returned
				t.Errorf("the pool's size in the callback: %d", f.size)
			}
			indices = append(indices, f.index)
		case <-time.After(hangBound):
			t.Fatalf("told of %d failures: %v", len(indices), indices)
		}
	}
	slices.Sort(indices)
	if indices[0] == indices[1] || indices[0] < 0 || indices[1] > 2 {
		t.Errorf("failed interpreters %v", indices)
	}
	select {
	case p := <-panics:
		if p.Callback != "interpreter failed callback" || fmt.Sprint(p.Value) != "the second failure's callback panics" {
			t.Errorf("reported panic: %s: %v", p.Callback, p.Value)
		}
	case <-time.After(hangBound):
		t.Fatal("the callback's panic was not reported")
	}
	eventually(t, "the third interpreter serving", func() bool { return stats(t, created).Starting == 0 })
	s := stats(t, created)
	if s.Broken != 2 || s.Ready+s.Busy != 1 || !s.Serving() {
		t.Errorf("stats: %+v", s)
	}
	for _, i := range indices {
		expectCode(t, created.CheckInterpreter(i), CodeInterpreterBroken, "lease")
	}
	for i := 0; i < 4; i++ {
		if v, err := created.Eval(AnyInterpreter, "6 * 7"); err != nil || v != int64(42) {
			t.Errorf("a call to any interpreter: %v, %v", v, err)
		}
	}
	select {
	case f := <-failures:
		t.Errorf("told of a third failure: %+v", f)
	default:
	}
}

// OnInterpreterFailed's cgo.Handle is the library's from the setter on:
// deleted exactly once (by its free_user_data), when the pool and
// everything holding it (a package, an object, a batcher) are all closed,
// in any order, and not before. Deleting a cgo.Handle twice panics in
// mpgoFreeInterpreterFailed, which reports it: none may be reported.
func TestOnInterpreterFailedHandleFreedOnce(t *testing.T) {
	panics := make(chan CallbackPanic, 8)
	SetCallbackPanicHandler(func(p CallbackPanic) { panics <- p })
	defer SetCallbackPanicHandler(nil)
	base := interpreterFailedHandles.Load()
	live := func(what string, want int64) {
		t.Helper()
		if n := interpreterFailedHandles.Load(); n != base+want {
			t.Fatalf("%s: %d handles live, want %d", what, n-base, want)
		}
	}
	for _, order := range [][]string{
		{"pool", "package", "object", "batcher"},
		{"batcher", "object", "package", "pool"},
		{"package", "pool", "batcher", "object"},
		{"object", "pool", "package", "batcher"},
	} {
		pool := must(NewPool(PoolOptions{OnInterpreterFailed: func(int, error) {}}))
		live(fmt.Sprint(order, ": the pool created"), 1)
		pkg := must(pool.LoadPackage(archive(t, "batching.pt")))
		obj := must(pkg.LoadPickle("model", "model.pkl"))
		batcher := must(obj.NewBatcher("", BatcherOptions{MaxWait: NoBatchWait}))
		x := must(NewTensor([]float32{1, 2}, 1, 2))
		if got := tensorFloats(t, must(batcher.Call(bg, x))); !slices.Equal(got, []float32{3, 5}) {
			t.Fatalf("forward through the batcher: %v", got)
		}
		x.Close()
		closers := map[string]func(){"pool": pool.Close, "package": pkg.Close,
			"object": obj.Close, "batcher": batcher.Close}
		for i, name := range order {
			closers[name]()
			closers[name]() // idempotent
			if i < len(order)-1 {
				live(fmt.Sprint(order, ": ", name, " closed"), 1)
			}
		}
		// The C pool goes with the last of them, maybe a moment later.
		eventually(t, fmt.Sprint(order, ": the handle deleted"), func() bool {
			return interpreterFailedHandles.Load() <= base
		})
		live(fmt.Sprint(order, ": all closed"), 0)
	}
	runtime.GC() // any cleanup of what the rounds made runs and frees nothing more
	time.Sleep(100 * time.Millisecond)
	live("after a collection", 0)
	select {
	case p := <-panics:
		t.Fatalf("reported panic: %s: %v", p.Callback, p.Value)
	default:
	}
}

// A NewPool that fails deletes the callback's handle too: refused by
// manypy_pool_create (the options checked there), and refused by the
// binding before the callback is set (no handle is left either way).
func TestOnInterpreterFailedHandleFreedOnFailedPool(t *testing.T) {
	panics := make(chan CallbackPanic, 8)
	SetCallbackPanicHandler(func(p CallbackPanic) { panics <- p })
	defer SetCallbackPanicHandler(nil)
	base := interpreterFailedHandles.Load()
	onFailed := func(index int, err error) { t.Errorf("told of interpreter %d: %v", index, err) }
	for _, c := range []struct {
		opts PoolOptions
		in   string
	}{
		{PoolOptions{Interpreters: 2, MaxInterpreters: 1}, "most interpreters"},    // manypy_pool_create
		{PoolOptions{MaxInterpreters: MaxInterpreters() + 1}, "most interpreters"}, // manypy_pool_create
		{PoolOptions{Interpreters: MaxInterpreters() + 1}, ""},                     // manypy_pool_create
		{PoolOptions{MaxInterpreters: -1}, "most interpreters must be >= 0"},       // the binding
		{PoolOptions{GrowAfter: -time.Millisecond}, "wait_ns must be >= 1"},        // the options' setter
	} {
		c.opts.OnInterpreterFailed = onFailed
		pool, err := NewPool(c.opts)
		if pool != nil {
			pool.Close()
		}
		expectCode(t, err, CodeOutOfRange, c.in)
		if n := interpreterFailedHandles.Load(); n != base {
			t.Errorf("%+v: %d handles live after NewPool failed, want 0", c.opts, n-base)
		}
	}
	select {
	case p := <-panics:
		t.Fatalf("reported panic: %s: %v", p.Callback, p.Value)
	default:
	}
}
