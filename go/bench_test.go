package manypy

import (
	"sync"
	"testing"
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
