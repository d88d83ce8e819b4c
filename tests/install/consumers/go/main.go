// Command manypy-consumer serves seed_example.pt (a torch.package of two
// convolutions) with the manypy Go module as a service would get it: from
// a pool of 2 interpreters, from several goroutines, each call's output
// checked against the expected one; and manypyprom reports the profiler's
// operators through client_golang, which proves the third-party modules
// resolved too. Exits non-zero on any failure, saying what failed.
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"manypy.dev/manypy"
	"manypy.dev/manypy/manypyprom"
)

const modelID = "seed_example"

var outShape = []int64{1, 64, 2, 2}

func main() {
	model := flag.String("model", "/model/seed_example.pt", "the torch.package to serve")
	expectedPath := flag.String("expected", "/model/seed_example.expected.out.bin",
		"its expected output for torch.ones(1, 1, 10, 10): 256 little-endian float32")
	goroutines := flag.Int("goroutines", 4, "goroutines calling the model at once")
	calls := flag.Int("calls", 5, "calls per goroutine")
	flag.Parse()
	if err := run(*model, *expectedPath, *goroutines, *calls); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
}

func run(model, expectedPath string, goroutines, calls int) error {
	if goroutines < 2 || calls < 1 {
		return fmt.Errorf("-goroutines %d -calls %d: need 2 or more goroutines and 1 or more calls", goroutines, calls)
	}
	expected, err := readExpected(expectedPath)
	if err != nil {
		return err
	}
	fmt.Printf("manypy %s (Go package built against manypy.h %d.%d.%d)\n", manypy.Version(),
		manypy.HeaderVersionMajor, manypy.HeaderVersionMinor, manypy.HeaderVersionPatch)

	prof, err := manypy.StartProfiler(1.0)
	if err != nil {
		return fmt.Errorf("starting the profiler: %w", err)
	}
	defer prof.Close()
	registry := prometheus.NewRegistry()
	registry.MustRegister(manypyprom.NewCollector(prof))

	pool, err := manypy.NewPool(manypy.PoolOptions{Interpreters: 2})
	if err != nil {
		return fmt.Errorf("creating a pool of 2: %w", err)
	}
	defer pool.Close()
	if pool.Size() != 2 {
		return fmt.Errorf("the pool has %d interpreters, asked for 2", pool.Size())
	}
	pkg, err := pool.LoadPackage(model)
	if err != nil {
		return fmt.Errorf("loading %s: %w", model, err)
	}
	defer pkg.Close()
	obj, err := pkg.LoadPickle("model", "model.pkl")
	if err != nil {
		return fmt.Errorf("loading the pickle model/model.pkl of %s: %w", model, err)
	}
	defer obj.Close()

	// Half the goroutines pin their calls to each interpreter, so that both
	// are seen serving; all of them run at once.
	errs := make(chan error, goroutines*calls)
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := 0; c < calls; c++ {
				if err := callOnce(obj, g%2, expected); err != nil {
					errs <- fmt.Errorf("goroutine %d, call %d, interpreter %d: %w", g, c, g%2, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		fmt.Fprintln(os.Stderr, err)
		failed++
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d calls failed", failed, goroutines*calls)
	}
	fmt.Printf("%d goroutines x %d calls on interpreters 0 and 1: every output %v matched %s within 1e-4\n",
		goroutines, calls, outShape, expectedPath)
	return checkMetrics(registry)
}

// callOnce calls the model on torch.ones(1, 1, 10, 10), pinned to one
// interpreter, and compares the output with expected.
func callOnce(obj *manypy.Object, interpreter int, expected []float32) error {
	ones := make([]float32, 100)
	for i := range ones {
		ones[i] = 1
	}
	x, err := manypy.NewTensor(ones, 1, 1, 10, 10)
	if err != nil {
		return err
	}
	defer x.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ctx = manypy.WithCallOptions(ctx, manypy.CallOptions{Pinned: true, Interpreter: interpreter, ModelID: modelID})
	out, err := obj.Call(ctx, x)
	if err != nil {
		return err
	}
	y, ok := out.(*manypy.Tensor)
	if !ok {
		return fmt.Errorf("the model returned %T, not a tensor", out)
	}
	defer y.Close()
	if shape := y.Shape(); fmt.Sprint(shape) != fmt.Sprint(outShape) {
		return fmt.Errorf("output shape %v, expected %v", shape, outShape)
	}
	got, err := manypy.TensorView[float32](y)
	if err != nil {
		return fmt.Errorf("output as float32: %w", err)
	}
	for i, want := range expected {
		if diff := math.Abs(float64(got[i] - want)); diff > 1e-4+1e-4*math.Abs(float64(want)) {
			return fmt.Errorf("output[%d] = %g, expected %g", i, got[i], want)
		}
	}
	return nil
}

// readExpected reads the 256 float32 of a [1, 64, 2, 2] output.
func readExpected(path string) ([]float32, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("the expected output: %w", err)
	}
	n := int(outShape[0] * outShape[1] * outShape[2] * outShape[3])
	if len(data) != 4*n {
		return nil, fmt.Errorf("%s has %d bytes; a %v float32 output has %d", path, len(data), outShape, 4*n)
	}
	values := make([]float32, n)
	for i := range values {
		values[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
	}
	return values, nil
}

// checkMetrics gathers the registry and needs the convolutions the calls
// ran among the operators profiled for the model.
func checkMetrics(registry *prometheus.Registry) error {
	families, err := registry.Gather()
	if err != nil {
		return fmt.Errorf("gathering metrics through manypyprom: %w", err)
	}
	var convolutions uint64
	for _, family := range families {
		if family.GetName() != "manypy_operator_duration_seconds" {
			continue
		}
		for _, m := range family.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["model"] == modelID && labels["operator"] == "aten::conv2d" {
				convolutions += m.GetSummary().GetSampleCount()
			}
		}
	}
	if convolutions == 0 {
		return fmt.Errorf("manypyprom reported no aten::conv2d for model %q", modelID)
	}
	fmt.Printf("manypyprom (client_golang): %d aten::conv2d profiled for model %q\n", convolutions, modelID)
	return nil
}
