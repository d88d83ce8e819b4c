package manypyprom

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"manypy.dev/manypy"
)

func archive(t *testing.T, name string) string {
	dir := os.Getenv("MANYPY_ARCHIVES")
	if dir == "" {
		dir = filepath.Join("..", "..", "build", "archives")
	}
	return filepath.Join(dir, name)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20 s", what)
		}
	}
}

// The pool's gauges on a registry, idle and under load: 1 interpreter
// busy with stuck.pt's sleep and one call queued behind it.
func TestPoolCollectorUnderLoad(t *testing.T) {
	pool, err := manypy.NewPool(manypy.PoolOptions{QueueLimit: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	pkg, err := pool.LoadPackage(archive(t, "stuck.pt"))
	if err != nil {
		t.Fatalf("%v (MANYPY_ARCHIVES must name <build>/archives)", err)
	}
	defer pkg.Close()
	model, err := pkg.LoadPickle("model", "model.pkl")
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()

	registry := prometheus.NewPedanticRegistry()
	registry.MustRegister(NewPoolCollector(pool, "main"))
	expect := func(queued, inFlight int) {
		t.Helper()
		want := `# HELP manypy_pool_in_flight_calls Calls admitted to the pool and not yet complete, waiting or running.
# TYPE manypy_pool_in_flight_calls gauge
manypy_pool_in_flight_calls{pool="main"} ` + strconv.Itoa(inFlight) + `
# HELP manypy_pool_queued_calls Calls waiting for an interpreter of the pool (what its queue limit bounds).
# TYPE manypy_pool_queued_calls gauge
manypy_pool_queued_calls{pool="main"} ` + strconv.Itoa(queued) + `
`
		if err := testutil.GatherAndCompare(registry, strings.NewReader(want)); err != nil {
			t.Error(err)
		}
	}
	if _, err := model.CallMethod(context.Background(), "sleep", 0.0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "an idle pool", func() bool { return pool.InFlight() == 0 })
	expect(0, 0)

	done := make(chan error, 2)
	sleep := func(seconds float64) {
		_, err := model.CallMethod(context.Background(), "sleep", seconds)
		done <- err
	}
	// In DIRECT mode the second runs while the first sleeps (time.sleep
	// releases the GIL) but counts as waiting until it completes.
	go sleep(3.0)
	waitFor(t, "the sleep running", func() bool { return pool.InFlight() == 1 })
	go sleep(2.5)
	waitFor(t, "a call queued", func() bool { return pool.Queued() == 1 })
	expect(1, 2)
	for i := 0; i < 2; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the pool drained", func() bool { return pool.InFlight() == 0 })
	expect(0, 0)
	pool.Close()
	expect(0, 0) // a closed pool reports nothing waiting or running
}

// The batch sizes a batcher formed reach the registry as the histogram
// manypy_batch_size{batcher}: 8 concurrent one-row requests with a
// MaxBatch of 8 make one batch of 8 rows.
func TestCollectorBatchSizes(t *testing.T) {
	prof, err := manypy.StartProfiler(1.0)
	if err != nil {
		t.Fatal(err)
	}
	defer prof.Close()
	pool, err := manypy.NewPool(manypy.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	pkg, err := pool.LoadPackage(archive(t, "batching.pt"))
	if err != nil {
		t.Fatalf("%v (MANYPY_ARCHIVES must name <build>/archives)", err)
	}
	defer pkg.Close()
	model, err := pkg.LoadPickle("model", "model.pkl")
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	// The histograms are the process's: a name of this run's own.
	name := "collector_test_" + strconv.FormatInt(time.Now().UnixNano(), 10)
	batcher, err := model.NewBatcher("", manypy.BatcherOptions{MaxBatch: 8, MaxWait: time.Minute, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	defer batcher.Close()
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		go func() {
			x, err := manypy.NewTensor([]float32{float32(i)}, 1, 1)
			if err != nil {
				errs <- err
				return
			}
			defer x.Close()
			out, err := batcher.Call(context.Background(), x)
			if err == nil {
				out.(*manypy.Tensor).Close()
			}
			errs <- err
		}()
	}
	for i := 0; i < 8; i++ {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the batch of 8 did not run")
		}
	}

	registry := prometheus.NewPedanticRegistry()
	registry.MustRegister(NewCollector(prof))
	families, err := registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, f := range families {
		if f.GetName() != "manypy_batch_size" {
			continue
		}
		for _, m := range f.GetMetric() {
			if m.GetLabel()[0].GetValue() != name {
				continue
			}
			found = true
			h := m.GetHistogram()
			if h.GetSampleCount() != 1 || h.GetSampleSum() != 8 {
				t.Errorf("batches: count %d, sum %v; want 1 batch of 8 rows", h.GetSampleCount(), h.GetSampleSum())
			}
			for _, b := range h.GetBucket() {
				if want := uint64(0); b.GetUpperBound() >= 8 {
					if b.GetCumulativeCount() != 1 {
						t.Errorf("bucket le=%v: %d, want 1", b.GetUpperBound(), b.GetCumulativeCount())
					}
				} else if b.GetCumulativeCount() != want {
					t.Errorf("bucket le=%v: %d, want 0", b.GetUpperBound(), b.GetCumulativeCount())
				}
			}
		}
	}
	if !found {
		t.Fatalf("no manypy_batch_size{batcher=%q} in the registry", name)
	}
}
