package manypy

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// Handles close in any order: an object keeps its package and pool alive.
func TestCloseInAnyOrder(t *testing.T) {
	orders := [][]string{
		{"pool", "package", "object"},
		{"object", "package", "pool"},
		{"package", "pool", "object"},
	}
	for _, order := range orders {
		pool := must(NewPool(PoolOptions{}))
		pkg := must(pool.LoadPackage(archive(t, "identity.pt")))
		obj := must(pkg.LoadPickle("model", "model.pkl"))
		closers := map[string]func(){"pool": pool.Close, "package": pkg.Close, "object": obj.Close}
		for i, name := range order {
			closers[name]()
			closers[name]() // idempotent
			// Whatever is still open works.
			if !contains(order[:i+1], "object") {
				if got := must(obj.Call(bg, int64(3))); got != int64(3) {
					t.Fatalf("%v: object after closing %s: %v", order, name, got)
				}
			}
			if !contains(order[:i+1], "package") {
				if _, err := pkg.ListFiles(); err != nil {
					t.Fatalf("%v: package after closing %s: %v", order, name, err)
				}
			}
		}
		// Everything is closed: calls fail cleanly.
		if _, err := obj.Call(bg, 1); !errors.Is(err, ErrClosed) {
			t.Errorf("object call after close: %v", err)
		}
		if _, err := pkg.LoadPickle("model", "model.pkl"); !errors.Is(err, ErrClosed) {
			t.Errorf("package after close: %v", err)
		}
		if _, err := pool.Eval(0, "1"); !errors.Is(err, ErrClosed) {
			t.Errorf("pool after close: %v", err)
		}
		if pool.Size() != 0 {
			t.Error("size of a closed pool")
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// A Close that races calls on other goroutines frees after them: each call
// either completes with the right result or fails with ErrClosed.
func TestCloseRacingCalls(t *testing.T) {
	pool := newPool(t, PoolOptions{Interpreters: 2})
	for round := 0; round < 3; round++ {
		pkg := must(pool.LoadPackage(archive(t, "python_heavy.pt")))
		model := must(pkg.LoadPickle("model", "model.pkl"))
		pkg.Close()
		x := must(NewTensor(readFloats(t, "python_heavy.input.bin"), 4, 64))
		var wg sync.WaitGroup
		var completed, refused atomic.Int64
		started := make(chan struct{}, 4)
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					out, err := model.Call(bg, x)
					if i == 0 {
						started <- struct{}{}
					}
					if errors.Is(err, ErrClosed) {
						refused.Add(1)
						return
					}
					if err != nil {
						t.Errorf("call: %v", err)
						return
					}
					d := out.(*Dict)
					logits, _ := d.Get("logits")
					logits.(*Tensor).Close()
					norm, _ := d.Get("norm")
					norm.(*Tensor).Close()
					completed.Add(1)
				}
			}()
		}
		for g := 0; g < 4; g++ {
			<-started
		}
		model.Close() // while calls run: they finish first
		x.Close()     // the calls in flight keep the input's memory
		wg.Wait()
		if refused.Load() != 4 || completed.Load() < 4 {
			t.Fatalf("completed %d, refused %d", completed.Load(), refused.Load())
		}
	}
}

// 30 pools of 3 interpreters, never closed: the process has 15 at most, so
// NewPool must collect the unreachable ones to go on.
func TestUnclosedPoolsAreCollected(t *testing.T) {
	long(t, "30 pools of 3 interpreters left to the garbage collector")
	for i := 0; i < 30; i++ {
		pool, err := NewPool(PoolOptions{Interpreters: 3})
		if err != nil {
			t.Fatalf("pool %d: %v", i, err)
		}
		pkg := must(pool.LoadPackage(archive(t, "identity.pt")))
		obj := must(pkg.LoadPickle("model", "model.pkl"))
		if got := must(obj.Call(bg, int64(i))); got != int64(i) {
			t.Fatalf("pool %d: %v", i, got)
		}
		_ = pool.Exec(2, "import torch") // start a third interpreter
	}
	// Every one of them is freed in the end: a pool of all the process's
	// interpreters can be made (and the tests after this one find them free).
	all, err := NewPool(PoolOptions{Interpreters: MaxInterpreters()})
	if err != nil {
		t.Fatalf("a pool of all %d interpreters: %v", MaxInterpreters(), err)
	}
	all.Close()
}
