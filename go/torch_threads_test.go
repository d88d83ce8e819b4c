package manypy

import (
	"runtime"
	"syscall"
	"testing"
)

// Operators that TorchScript forks (torch.jit.fork) run on torch's own
// inter-op threads inside the interpreter: callbacks arrive there too, on
// threads neither Go nor manypy created, and the Go callback runs.
func TestOpCallbacksOnTorchThreads(t *testing.T) {
	var log eventLog
	reg := must(AddOpCallbacks(nil, log.add, 1.0, false))
	defer reg.Remove()
	pool := newPool(t, PoolOptions{Interpreters: 1})
	// TorchScript from a string: exec'd Python has no source file to script.
	must(0, pool.Exec(0, `
import torch
cu = torch.jit.CompilationUnit("""
def double(x: torch.Tensor) -> torch.Tensor:
    return torch.mul(x, 2)

def forked(x: torch.Tensor) -> torch.Tensor:
    futures = [torch.jit.fork(double, x + float(i)) for i in range(4)]
    return torch.stack([torch.jit.wait(f) for f in futures])
""")
`))
	tid := make(chan int)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		out := must(pool.Eval(0, "cu.forked(torch.ones(2))")).(*Tensor)
		defer out.Close()
		got := must(TensorCopy[float32](out))
		for i, v := range got {
			if want := float32(2 * (1 + i/2)); v != want {
				t.Errorf("forked[%d] = %v, want %v", i, v, want)
			}
		}
		tid <- syscall.Gettid()
	}()
	caller := <-tid
	must(0, reg.Remove())
	log.mu.Lock()
	defer log.mu.Unlock()
	var onTorchThreads, muls int
	for _, e := range log.events {
		if e.Name == "aten::mul" {
			muls++
			if int(e.ThreadID) != caller && e.Interpreter >= 0 {
				onTorchThreads++
			}
		}
	}
	if muls < 4 || onTorchThreads == 0 {
		t.Errorf("%d aten::mul events, %d of them on torch's threads (caller thread %d)", muls, onTorchThreads, caller)
	}
}
