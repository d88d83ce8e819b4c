package manypy

import (
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"
)

// Tensors get their cleanup late (backstop.go): one closed in time never
// gets one; one still open when a newer tensor takes its slot, or at the
// sweep after a collection, does.
func TestBackstopArmedOnlyForOpenTensors(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // no collection's sweep midway
	waiting := func(x *Tensor) bool {
		for i := range backstops {
			if backstops[i].Load() == x {
				return true
			}
		}
		return false
	}
	for _, leave := range []struct {
		name string
		do   func(closed, open *Tensor)
	}{
		{"swept", func(_, _ *Tensor) { sweepBackstops() }},
		{"evicted by newer tensors", func(closed, open *Tensor) {
			for i := 0; i < 64*backstopSlots && (waiting(closed) || waiting(open)); i++ {
				must(NewTensor([]float32{0})).Close()
			}
		}},
	} {
		closed := must(NewTensor([]float32{1}))
		closed.Close()
		if !waiting(closed) {
			t.Fatalf("%s: a new tensor is not waiting for its cleanup", leave.name)
		}
		open := must(NewTensor([]float32{2}))
		if !waiting(open) || open.backstop.Load() != nil {
			t.Fatalf("%s: a new tensor is not waiting for its cleanup", leave.name)
		}
		leave.do(closed, open)
		if waiting(closed) || waiting(open) {
			t.Fatalf("%s: the tensors are still waiting", leave.name)
		}
		if closed.backstop.Load() != nil {
			t.Errorf("%s: a tensor closed in time got a cleanup", leave.name)
		}
		if open.backstop.Load() == nil {
			t.Errorf("%s: an open tensor got no cleanup", leave.name)
		}
		open.Close()
	}
}

// Every zero-copy buffer is released exactly once, whether its tensor is
// closed or dropped, while sweeps race the Closes and the
// evictions; the backstop frees exactly the tensors never closed: a Close
// and the arming of the cleanup must not both miss each other (the cleanup
// would free a freed tensor), and every tensor never closed must be freed
// by the collector. Tensors are closed a while after they are made, so
// that many are armed first.
func TestBackstopFreesEachTensorOnce(t *testing.T) {
	const goroutines, perGoroutine = 4, 2048 // a multiple of 64 (the batches closed)
	// What earlier tests dropped is freed first.
	for i := 0; i < 3; i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	before, collectedBefore := releasedBuffers.Load(), collectedTensors.Load()
	stop := make(chan struct{})
	swept := make(chan struct{})
	go func() {
		defer close(swept)
		for {
			select {
			case <-stop:
				return
			default:
				sweepBackstops()
				runtime.Gosched()
			}
		}
	}()
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var recent []*Tensor
			for i := 0; i < perGoroutine; i++ {
				x, err := NewTensorNoCopy([]float32{float32(i)})
				if err != nil {
					t.Error(err)
					return
				}
				if recent = append(recent, x); len(recent) == 64 {
					for j := 0; j < len(recent); j += 2 {
						recent[j].Close() // the odd ones are dropped
					}
					recent = recent[:0]
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-swept
	const total = goroutines * perGoroutine
	for deadline := time.Now().Add(hangBound); releasedBuffers.Load()-before < total; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d buffers released within %v", releasedBuffers.Load()-before, total, hangBound)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	runtime.GC()
	runtime.GC()
	time.Sleep(100 * time.Millisecond)
	if got := releasedBuffers.Load() - before; got != total {
		t.Errorf("%d buffers released, want %d", got, total)
	}
	if got := collectedTensors.Load() - collectedBefore; got != total/2 {
		t.Errorf("the backstop freed %d tensors, want the %d never closed", got, total/2)
	}
}
