package manypy

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Admission control: PoolOptions.QueueLimit, ErrOverloaded, Pool.Queued
// and Pool.InFlight, on a pool of 1 interpreter kept busy by stuck.pt's
// sleep. A call counts as waiting while another call on its interpreter is
// in flight: in HANDOFF mode it waits in the interpreter's queue; in DIRECT
// mode it runs on its own thread as soon as it gets the GIL, which
// time.sleep releases, and still counts until it completes.

// eventually polls cond until it holds, or fails the test after hangBound.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(hangBound); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, hangBound)
		}
	}
}

type sleepResult struct {
	value any
	err   error
}

// sleepIn calls stuck.pt's sleep(seconds) on a goroutine.
func sleepIn(model *Object, seconds float64) chan sleepResult {
	done := make(chan sleepResult, 1)
	go func() {
		out, err := model.CallMethod(bg, "sleep", seconds)
		done <- sleepResult{out, err}
	}()
	return done
}

func testQueueLimit(t *testing.T, mode ThreadMode) {
	long(t, "stuck calls holding the queue, in each thread mode")
	pool := newPool(t, PoolOptions{Interpreters: 1, ThreadMode: mode, QueueLimit: 1})
	stuck := loadModel(t, pool, "stuck.pt")
	batching := loadModel(t, pool, "batching.pt")
	batcher := newBatcher(t, batching, "", BatcherOptions{MaxWait: NoBatchWait})
	x := must(NewTensor([]float32{1, 2}, 1, 2))
	defer x.Close()
	// Each object's replica is made by its first call, before the load.
	must(stuck.Call(bg, x)).(*Tensor).Close()
	must(batcher.Call(bg, x)).(*Tensor).Close()
	eventually(t, "an idle pool", func() bool { return pool.Queued() == 0 && pool.InFlight() == 0 })

	// One call runs, one waits: the queue is full. (Seconds long, so that
	// the checks below see it so even on a loaded machine under -race.)
	running := sleepIn(stuck, 3.0)
	eventually(t, "the sleep running", func() bool { return pool.InFlight() == 1 })
	waiting := sleepIn(stuck, 2.5)
	eventually(t, "a call queued behind it", func() bool { return pool.Queued() == 1 })
	if n := pool.InFlight(); n != 2 {
		t.Errorf("in flight with one running and one queued: %d", n)
	}

	// The next call of every kind is refused at once, and never runs.
	_, err := stuck.Call(bg, x)
	e := expectCode(t, err, CodeOverloaded, "")
	if !errors.Is(err, ErrOverloaded) || e.PythonType != "" {
		t.Errorf("refused call: %#v", e)
	}
	ctx, cancel := context.WithTimeout(bg, time.Hour)
	_, err = stuck.CallMethod(ctx, "sleep", 0.0)
	cancel()
	expectCode(t, err, CodeOverloaded, "")
	_, err = batcher.Call(bg, x)
	expectCode(t, err, CodeOverloaded, "")
	if q, f := pool.Queued(), pool.InFlight(); q != 1 || f != 2 {
		t.Errorf("refused calls changed the load: queued %d, in flight %d", q, f)
	}

	// The admitted calls complete as usual, and the pool drains.
	for _, c := range []struct {
		done chan sleepResult
		want float64
	}{{running, 3.0}, {waiting, 2.5}} {
		r := <-c.done
		if r.err != nil || r.value != c.want {
			t.Errorf("admitted sleep(%v): %v, %v", c.want, r.value, r.err)
		}
	}
	eventually(t, "the pool drained", func() bool { return pool.Queued() == 0 && pool.InFlight() == 0 })
	if got := tensorFloats(t, must(stuck.Call(bg, x))); !reflect.DeepEqual(got, []float32{2, 4}) {
		t.Errorf("after the load: %v", got)
	}
}

func TestQueueLimitDirect(t *testing.T)  { testQueueLimit(t, Direct) }
func TestQueueLimitHandoff(t *testing.T) { testQueueLimit(t, Handoff) }

// Under load from 16 goroutines on 1 interpreter with a queue limit of 2:
// each call either runs, correctly, or is refused with ErrOverloaded, never
// anything else; Queued never exceeds the limit; the load is seen in
// Queued and InFlight while it lasts.
func TestQueueLimitUnderLoad(t *testing.T) {
	const limit = 2
	pool := newPool(t, PoolOptions{Interpreters: 1, QueueLimit: limit})
	stuck := loadModel(t, pool, "stuck.pt")
	x := must(NewTensor([]float32{1, 2}))
	defer x.Close()
	must(stuck.Call(bg, x)).(*Tensor).Close()

	var served, refused atomic.Int64
	var maxQueued, maxInFlight atomic.Int64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			raise(&maxQueued, int64(pool.Queued()))
			raise(&maxInFlight, int64(pool.InFlight()))
			time.Sleep(100 * time.Microsecond)
		}
	}()
	errs := make(chan error, 16)
	concurrently(t, 16, func(g int) {
		for i := 0; i < 8; i++ {
			out, err := stuck.CallMethod(bg, "sleep", 0.02)
			switch {
			case errors.Is(err, ErrOverloaded):
				refused.Add(1)
			case err != nil:
				errs <- err
				return
			case out != 0.02:
				errs <- fmt.Errorf("sleep(0.02) returned %v", out)
				return
			default:
				served.Add(1)
			}
		}
	})
	close(stop)
	sampler.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("served %d, refused %d, most queued %d, most in flight %d",
		served.Load(), refused.Load(), maxQueued.Load(), maxInFlight.Load())
	if served.Load() == 0 || refused.Load() == 0 {
		t.Errorf("served %d, refused %d: 16 goroutines on 1 interpreter with a queue limit of %d must do both",
			served.Load(), refused.Load(), limit)
	}
	if q := maxQueued.Load(); q > limit || q == 0 {
		t.Errorf("most calls queued: %d (limit %d)", q, limit)
	}
	if maxInFlight.Load() < 2 {
		t.Errorf("most calls in flight: %d", maxInFlight.Load())
	}
	eventually(t, "the pool drained", func() bool { return pool.Queued() == 0 && pool.InFlight() == 0 })
}

func raise(max *atomic.Int64, v int64) {
	for {
		old := max.Load()
		if v <= old || max.CompareAndSwap(old, v) {
			return
		}
	}
}

func TestQueueLimitOptions(t *testing.T) {
	if _, err := NewPool(PoolOptions{QueueLimit: -1}); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("a negative queue limit: %v", err)
	}
	pool := must(NewPool(PoolOptions{}))
	if q, f := pool.Queued(), pool.InFlight(); q != 0 || f != 0 {
		t.Errorf("a new pool: queued %d, in flight %d", q, f)
	}
	pool.Close()
	if q, f := pool.Queued(), pool.InFlight(); q != 0 || f != 0 {
		t.Errorf("a closed pool: queued %d, in flight %d", q, f)
	}
}
