// Command manypy-go-vs-c measures the Go binding against the same calls
// made from C, in one process, on one pool and the same models, in
// alternating rounds (as bench/java/JavaVsC.java does for Java):
//
//   - identity.pt, one call at a time: p50 latency of a call from Go and
//     from C (the binding's per-call overhead is the difference);
//   - python_heavy.pt from 2 goroutines on 2 interpreters vs 2 pthreads:
//     throughput.
//
// Run it from a build (PKG_CONFIG_PATH=<build>/pkgconfig, GLIBC_TUNABLES
// as scripts/env.sh sets it):
//
//	go run . -archives ../../../build/archives   (from go/cmd/manypy-go-vs-c)
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
	"unsafe"

	"manypy.dev/manypy"
	"manypy.dev/manypy/cmd/manypy-go-vs-c/internal/cbench"
)

func main() {
	archives := flag.String("archives", os.Getenv("MANYPY_ARCHIVES"), "the sample archives (<build>/archives)")
	rounds := flag.Int("rounds", 5, "alternating Go/C rounds")
	calls := flag.Int("calls", 20000, "identity calls per round and side")
	seconds := flag.Float64("seconds", 2, "python_heavy seconds per round and side")
	flag.Parse()
	if err := run(*archives, *rounds, *calls, *seconds); err != nil {
		fmt.Fprintln(os.Stderr, "manypy-go-vs-c:", err)
		os.Exit(1)
	}
}

func load(pool *manypy.Pool, path string) (*manypy.Object, error) {
	pkg, err := pool.LoadPackage(path)
	if err != nil {
		return nil, err
	}
	defer pkg.Close()
	return pkg.LoadPickle("model", "model.pkl")
}

func readFloats(path string) ([]float32, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := make([]float32, len(raw)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out, nil
}

func run(archives string, rounds, calls int, seconds float64) error {
	pool, err := manypy.NewPool(manypy.PoolOptions{Interpreters: 2})
	if err != nil {
		return err
	}
	defer pool.Close()
	identity, err := load(pool, filepath.Join(archives, "identity.pt"))
	if err != nil {
		return err
	}
	defer identity.Close()
	heavy, err := load(pool, filepath.Join(archives, "python_heavy.pt"))
	if err != nil {
		return err
	}
	defer heavy.Close()
	heavyIn, err := readFloats(filepath.Join(archives, "python_heavy.input.bin"))
	if err != nil {
		return err
	}
	idIn := []float32{1, 2, 3, 4, 5, 6}

	// Warm up both interpreters and both sides.
	for i := 0; i < 2; i++ {
		if _, err := goHeavy(heavy, heavyIn, 2, 0.5); err != nil {
			return err
		}
	}
	var goReuse, goNew, cLat []int64
	var goCalls, cCalls int64
	for r := 0; r < rounds; r++ {
		l, err := goIdentity(identity, idIn, calls, false)
		if err != nil {
			return err
		}
		goReuse = append(goReuse, l...)
		if l, err = goIdentity(identity, idIn, calls, true); err != nil {
			return err
		}
		goNew = append(goNew, l...)
		err = identity.WithHandle(func(ptr unsafe.Pointer) {
			l, err = cbench.Identity(ptr, idIn, calls)
		})
		if err != nil {
			return err
		}
		cLat = append(cLat, l...)

		n, err := goHeavy(heavy, heavyIn, 2, seconds)
		if err != nil {
			return err
		}
		goCalls += n
		err = heavy.WithHandle(func(ptr unsafe.Pointer) {
			n, err = cbench.Heavy(ptr, heavyIn, 2, seconds)
		})
		if err != nil {
			return err
		}
		cCalls += n
	}
	fmt.Printf("identity.pt, one call at a time, %d rounds x %d calls per side (DIRECT mode)\n", rounds, calls)
	c50, c99 := percentile(cLat, 50), percentile(cLat, 99)
	fmt.Printf("  %-38s p50 %7.2f us  p99 %7.2f us\n", "C", c50, c99)
	for _, row := range []struct {
		name string
		lat  []int64
	}{{"Go, one input Tensor reused", goReuse}, {"Go, a new zero-copy Tensor per call", goNew}} {
		p50, p99 := percentile(row.lat, 50), percentile(row.lat, 99)
		fmt.Printf("  %-38s p50 %7.2f us  p99 %7.2f us  (p50 %+.2f us vs C)\n", row.name, p50, p99, p50-c50)
	}
	total := float64(rounds) * seconds
	fmt.Printf("python_heavy.pt, 2 goroutines vs 2 pthreads on 2 interpreters, %d rounds x %.1f s per side\n", rounds, seconds)
	fmt.Printf("  C   %8.1f calls/s\n  Go  %8.1f calls/s  (%.3fx C)\n",
		float64(cCalls)/total, float64(goCalls)/total, float64(goCalls)/float64(cCalls))
	return nil
}

func percentile(ns []int64, p int) float64 {
	sorted := slices.Clone(ns)
	slices.Sort(sorted)
	return float64(sorted[len(sorted)*p/100]) / 1e3
}

// goIdentity: the Go side of the identity round.
func goIdentity(model *manypy.Object, input []float32, calls int, newTensorPerCall bool) ([]int64, error) {
	lat := make([]int64, calls)
	reused, err := manypy.NewTensorNoCopy(input, 2, 3)
	if err != nil {
		return nil, err
	}
	defer reused.Close()
	ctx := context.Background()
	for i := range lat {
		start := time.Now()
		x := reused
		if newTensorPerCall {
			if x, err = manypy.NewTensorNoCopy(input, 2, 3); err != nil {
				return nil, err
			}
		}
		out, err := model.Call(ctx, x)
		if err != nil {
			return nil, err
		}
		out.(*manypy.Tensor).Close()
		if newTensorPerCall {
			x.Close()
		}
		lat[i] = int64(time.Since(start))
	}
	return lat, nil
}

// goHeavy: the Go side of the python_heavy round, as a Go service would
// write it: a zero-copy tensor per call, kwargs, both result tensors read
// and closed.
func goHeavy(model *manypy.Object, input []float32, goroutines int, seconds float64) (int64, error) {
	kwargs := manypy.NewDict("steps", 5, "normalize", false)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var total int64
	var firstErr error
	end := time.Now().Add(time.Duration(seconds * float64(time.Second)))
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var n int64
			err := func() error {
				for time.Now().Before(end) {
					x, err := manypy.NewTensorNoCopy(input, 4, 64)
					if err != nil {
						return err
					}
					out, err := model.CallKw(context.Background(), "", []any{x}, kwargs)
					x.Close()
					if err != nil {
						return err
					}
					d := out.(*manypy.Dict)
					for _, k := range []string{"logits", "norm"} {
						v, _ := d.Get(k)
						v.(*manypy.Tensor).Close()
					}
					n++
				}
				return nil
			}()
			mu.Lock()
			total += n
			if err != nil && firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return total, firstErr
}
