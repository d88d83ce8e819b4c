package manypy

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// go test -run=^$ -bench=. : the binding's per-call cost on identity.pt
// (cmd/manypy-go-vs-c compares the same calls with C, side by side).

func BenchmarkIdentityCall(b *testing.B) {
	pool := newPool(b, PoolOptions{})
	model := loadModel(b, pool, "identity.pt")
	x := must(NewTensorNoCopy([]float32{1, 2, 3, 4, 5, 6}, 2, 3))
	defer x.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out, err := model.Call(bg, x)
		if err != nil {
			b.Fatal(err)
		}
		out.(*Tensor).Close()
	}
}

func BenchmarkIdentityCallNewTensor(b *testing.B) {
	pool := newPool(b, PoolOptions{})
	model := loadModel(b, pool, "identity.pt")
	data := []float32{1, 2, 3, 4, 5, 6}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		x, err := NewTensorNoCopy(data, 2, 3)
		if err != nil {
			b.Fatal(err)
		}
		out, err := model.Call(bg, x)
		if err != nil {
			b.Fatal(err)
		}
		out.(*Tensor).Close()
		x.Close()
	}
}

// Python-heavy calls from 2 goroutines on 2 interpreters.
func BenchmarkPythonHeavy2Goroutines(b *testing.B) {
	pool := newPool(b, PoolOptions{Interpreters: 2})
	model := loadModel(b, pool, "python_heavy.pt")
	x := must(NewTensor(readFloats(b, "python_heavy.input.bin"), 4, 64))
	defer x.Close()
	kwargs := NewDict("steps", 5, "normalize", false)
	b.ResetTimer()
	var wg sync.WaitGroup
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < b.N; i += 2 {
				out, err := model.CallKw(bg, "", []any{x}, kwargs)
				if err != nil {
					b.Error(err)
					return
				}
				d := out.(*Dict)
				for _, k := range []string{"logits", "norm"} {
					v, _ := d.Get(k)
					v.(*Tensor).Close()
				}
			}
		}()
	}
	wg.Wait()
}

// ResNet-18, batch-1 requests from 16 goroutines on 2 interpreters, as the
// issue's batching benchmark: each call straight to the object, then
// through a Batcher (largest batch 8, wait 2 ms). Reports calls/s and the
// p99 latency; compare the two in one run:
//
//	go test -run='^$' -bench=ResNet18From16 -benchtime=200x
func BenchmarkResNet18From16Goroutines(b *testing.B) {
	pool := newPool(b, PoolOptions{Interpreters: 2})
	model := loadModel(b, pool, "resnet18.pt")
	x := must(NewTensor(readFloats(b, "resnet18.input.bin"), caseShape(b, "resnet18")...))
	defer x.Close()
	direct := func(x *Tensor) (any, error) { return model.Call(bg, x) }
	batcher := must(model.NewBatcher("", BatcherOptions{MaxBatch: 8, MaxWait: 2 * time.Millisecond}))
	defer batcher.Close()
	batched := func(x *Tensor) (any, error) { return batcher.Call(bg, x) }
	for _, c := range []struct {
		name string
		call func(*Tensor) (any, error)
	}{{"unbatched", direct}, {"batched", batched}} {
		b.Run(c.name, func(b *testing.B) { benchmarkFrom(b, 16, x, c.call) })
	}
}

// benchmarkFrom makes b.N calls from goroutines goroutines, and reports
// calls/s and the p99 latency.
func benchmarkFrom(b *testing.B, goroutines int, x *Tensor, call func(*Tensor) (any, error)) {
	for i := 0; i < 2*goroutines; i++ { // every interpreter has its replica
		out, err := call(x)
		if err != nil {
			b.Fatal(err)
		}
		out.(*Tensor).Close()
	}
	var next atomic.Int64
	latencies := make([]time.Duration, b.N)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(b.N); i = next.Add(1) - 1 {
				t0 := time.Now()
				out, err := call(x)
				if err != nil {
					b.Error(err)
					return
				}
				latencies[i] = time.Since(t0)
				out.(*Tensor).Close()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(latencies)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "calls/s")
	b.ReportMetric(float64(latencies[b.N*99/100].Microseconds())/1000, "p99-ms")
}

// The cost of a call the queue limit refuses, from Go: a pool of 1
// interpreter with a queue limit of 1, busy with one call and one waiting
// (stuck.pt's spin, stopped at the end), then b.N calls that each get
// ErrOverloaded. Reports the p50 and p99 of one refusal.
func BenchmarkOverloadedRefusal(b *testing.B) {
	pool := newPool(b, PoolOptions{Interpreters: 1, QueueLimit: 1})
	model := loadModel(b, pool, "stuck.pt")
	x := must(NewTensor([]float32{1, 2}))
	defer x.Close()
	must(model.Call(bg, x)).(*Tensor).Close()
	busy, stop := context.WithCancel(bg)
	done := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func() {
			_, err := model.CallMethod(busy, "spin")
			done <- err
		}()
		for deadline := time.Now().Add(20 * time.Second); pool.InFlight() < i+1; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatal("the pool did not get busy")
			}
		}
	}
	latencies := make([]time.Duration, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		_, err := model.Call(bg, x)
		latencies[i] = time.Since(t0)
		if !errors.Is(err, ErrOverloaded) {
			b.Fatalf("call %d: %v, want ErrOverloaded", i, err)
		}
	}
	b.StopTimer()
	stop()
	for i := 0; i < 2; i++ {
		if err := <-done; !errors.Is(err, context.Canceled) {
			b.Errorf("the spin: %v", err)
		}
	}
	slices.Sort(latencies)
	b.ReportMetric(float64(latencies[b.N/2].Nanoseconds())/1000, "p50-us")
	b.ReportMetric(float64(latencies[b.N*99/100].Nanoseconds())/1000, "p99-us")
}
