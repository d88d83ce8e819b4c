package manypy

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// eventLog collects the events of one registration.
type eventLog struct {
	mu     sync.Mutex
	events []*OpEvent
}

func (l *eventLog) add(e *OpEvent) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *eventLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.events)
}

func (l *eventLog) forRequest(id string) []*OpEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*OpEvent
	for _, e := range l.events {
		if e.RequestID == id {
			out = append(out, e)
		}
	}
	return out
}

// callOnLockedThread makes a call from a goroutine locked to its OS thread
// and returns that thread's id, to compare with the events' ThreadID.
func callOnLockedThread(t *testing.T, call func()) int {
	t.Helper()
	tid := make(chan int)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		call()
		tid <- syscall.Gettid()
	}()
	return <-tid
}

// Events carry the call's context from every interpreter, and from the host
// for TorchScript (-1). In HANDOFF mode they arrive on the library's threads,
// which Go did not create; in DIRECT mode on the calling goroutine's thread.
func TestOpCallbacksContextThreadsAndInterpreters(t *testing.T) {
	var log eventLog
	var enters atomic.Int64
	reg := must(AddOpCallbacks(func(*OpEvent) { enters.Add(1) }, log.add, 1.0, true))
	defer reg.Remove()

	x := must(NewTensor(readFloats(t, "python_heavy.input.bin"), 4, 64))
	defer x.Close()
	for _, mode := range []ThreadMode{Handoff, Direct} {
		pool := must(NewPool(PoolOptions{Interpreters: 3, ThreadMode: mode}))
		pkg := must(pool.LoadPackage(archive(t, "python_heavy.pt")))
		model := must(pkg.LoadPickle("model", "model.pkl"))
		interpreters := map[int]bool{}
		for i := 0; i < 3; i++ {
			request := fmt.Sprintf("mode%d-interp%d", mode, i)
			ctx := WithCallOptions(bg, CallOptions{Pinned: true, Interpreter: i, ModelID: "heavy", RequestID: request})
			tid := callOnLockedThread(t, func() {
				out := must(model.Call(ctx, x)).(*Dict)
				for _, k := range []string{"logits", "norm"} {
					v, _ := out.Get(k)
					v.(*Tensor).Close()
				}
			})
			events := log.forRequest(request)
			if len(events) < 24 {
				t.Fatalf("%s: %d events", request, len(events))
			}
			for _, e := range events {
				if e.ModelID != "heavy" || e.Interpreter < 0 || e.EndNS < e.StartNS || e.Name == "" {
					t.Fatalf("%s: event %+v", request, e)
				}
				if (mode == Handoff) == (int(e.ThreadID) == tid) {
					t.Fatalf("%s: event on thread %d, caller's %d", request, e.ThreadID, tid)
				}
				interpreters[e.Interpreter] = true
			}
			if events[0].Interpreter != events[len(events)-1].Interpreter {
				t.Errorf("%s: one call, two interpreters", request)
			}
		}
		if len(interpreters) != 3 {
			t.Errorf("mode %d: events from interpreters %v, want 3", mode, interpreters)
		}
		model.Close()
		pkg.Close()
		pool.Close()
	}

	// Inputs: python_heavy's first op on x is a linear (addmm or linear)
	// whose inputs include a [4, 64] float32 tensor.
	var sawInput bool
	for _, e := range log.forRequest("mode1-interp0") {
		for _, in := range e.Inputs {
			if in.Kind == "tensor" && in.DType == Float32 && len(in.Shape) == 2 && in.Shape[1] == 64 {
				sawInput = true
			}
		}
	}
	if !sawInput {
		t.Error("no event reported a [.., 64] float32 input")
	}

	// The host: TorchScript reports interpreter -1 with the same context.
	script := must(LoadScript(archive(t, "python_heavy_script.pt")))
	defer script.Close()
	out := must(script.Call(WithCallOptions(bg, CallOptions{ModelID: "heavy-ts", RequestID: "host"}), x)).(*Dict)
	for _, k := range []string{"logits", "norm"} {
		v, _ := out.Get(k)
		v.(*Tensor).Close()
	}
	host := log.forRequest("host")
	if len(host) == 0 {
		t.Fatal("no events from the host")
	}
	for _, e := range host {
		if e.Interpreter != -1 || e.ModelID != "heavy-ts" {
			t.Fatalf("host event %+v", e)
		}
	}
	if enters.Load() == 0 {
		t.Error("no enter events")
	}

	// After Remove, nothing more arrives.
	if err := reg.Remove(); err != nil {
		t.Fatal(err)
	}
	before := log.count()
	must(script.Call(bg, x))
	if log.count() != before {
		t.Error("events after Remove")
	}
	if err := reg.Remove(); err != nil {
		t.Errorf("second Remove: %v", err)
	}
}

// A panicking callback is recovered on its (non-Go) thread and reported;
// the model's call goes on and returns the right result.
func TestPanicInCallbacks(t *testing.T) {
	var reports sync.Map
	var count atomic.Int64
	SetCallbackPanicHandler(func(p CallbackPanic) {
		count.Add(1)
		reports.Store(p.Callback, fmt.Sprint(p.Value))
	})
	defer SetCallbackPanicHandler(nil)

	reg := must(AddOpCallbacks(nil, func(e *OpEvent) { panic("boom in " + e.Name) }, 1.0, false))
	pool := newPool(t, PoolOptions{Interpreters: 1, ThreadMode: Handoff})
	model := loadModel(t, pool, "python_heavy.pt")
	x := must(NewTensor(readFloats(t, "python_heavy.input.bin"), 4, 64))
	defer x.Close()
	out := must(model.CallKw(bg, "", []any{x}, NewDict("steps", 5, "normalize", false))).(*Dict)
	logits, _ := out.Get("logits")
	if err := checkTensor(logits, readFloats(t, "python_heavy.expected.logits.bin"), 1e-5); err != nil {
		t.Error(err)
	}
	norm, _ := out.Get("norm")
	norm.(*Tensor).Close()
	if err := reg.Remove(); err != nil {
		t.Fatal(err)
	}
	if count.Load() < 24 {
		t.Errorf("%d panics reported", count.Load())
	}
	if v, _ := reports.Load("op callback"); !strings.HasPrefix(fmt.Sprint(v), "boom in ") {
		t.Errorf("report %v", v)
	}

	// The API usage handler and the export hook too.
	must(0, SetAPIUsageHandler(func(key string) { panic("usage " + key) }))
	must(0, LogAPIUsage("manypy.go.test.panic"))
	must(0, SetAPIUsageHandler(nil))
	if _, ok := reports.Load("api usage handler"); !ok {
		t.Error("api usage handler panic not reported")
	}
	must(0, SetExportHook(func() map[string]any { panic("no files today") }))
	defer SetExportHook(nil)
	script := must(LoadScript(archive(t, "loop_script.pt")))
	defer script.Close()
	path := t.TempDir() + "/saved.pt"
	must(0, script.Save(path, map[string]any{"note.txt": "still written"}))
	if got := string(must(ArchiveReadFile(path, "extra/note.txt"))); got != "still written" {
		t.Errorf("archive after a panicking hook: %q", got)
	}
	if _, ok := reports.Load("export hook"); !ok {
		t.Error("export hook panic not reported")
	}
}

func TestProfiler(t *testing.T) {
	prof := must(StartProfiler(1.0))
	defer prof.Close()
	pool := newPool(t, PoolOptions{Interpreters: 1})
	model := loadModel(t, pool, "python_heavy.pt")
	x := must(NewTensor(readFloats(t, "python_heavy.input.bin"), 4, 64))
	defer x.Close()
	for i := 0; i < 3; i++ {
		out := must(model.Call(WithCallOptions(bg, CallOptions{ModelID: "heavy"}), x)).(*Dict)
		for _, k := range []string{"logits", "norm"} {
			v, _ := out.Get(k)
			v.(*Tensor).Close()
		}
	}
	entries := must(prof.Snapshot())
	var heavy uint64
	for _, e := range entries {
		if e.ModelID == "heavy" {
			heavy += e.Count
			if e.Operator == "" || e.TotalNS <= 0 || e.P99NS < e.P50NS {
				t.Errorf("entry %+v", e)
			}
		}
	}
	if heavy < 3*24 {
		t.Errorf("%d sampled operators for model heavy", heavy)
	}
	text := must(prof.Prometheus())
	if !strings.Contains(text, "manypy_operator_duration_seconds") || !strings.Contains(text, `model="heavy"`) {
		t.Errorf("prometheus text:\n%s", text)
	}
	trace := must(prof.ChromeTrace())
	if !json.Valid([]byte(trace)) || !strings.Contains(trace, "traceEvents") {
		t.Errorf("chrome trace: %.200s", trace)
	}
	prof.Close()
	if _, err := prof.Snapshot(); err == nil {
		t.Error("snapshot of a closed profiler")
	}
}
