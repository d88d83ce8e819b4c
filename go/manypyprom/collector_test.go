package manypyprom

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"manypy.dev/manypy"
)

// A registry with the collector, after real calls: the summary for the
// model's operators is there, valid by client_golang's own checks.
func TestCollectorOnARegistry(t *testing.T) {
	dir := os.Getenv("MANYPY_ARCHIVES")
	if dir == "" {
		dir = filepath.Join("..", "..", "build", "archives")
	}
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
	pkg, err := pool.LoadPackage(filepath.Join(dir, "python_heavy.pt"))
	if err != nil {
		t.Fatalf("%v (MANYPY_ARCHIVES must name <build>/archives)", err)
	}
	defer pkg.Close()
	model, err := pkg.LoadPickle("model", "model.pkl")
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	x, err := manypy.NewTensor(make([]float32, 4*64), 4, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	ctx := manypy.WithCallOptions(context.Background(), manypy.CallOptions{ModelID: "heavy"})
	if _, err := model.Call(ctx, x); err != nil {
		t.Fatal(err)
	}

	registry := prometheus.NewPedanticRegistry()
	registry.MustRegister(NewCollector(prof))
	families, err := registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var heavy int
	for _, f := range families {
		if f.GetName() != "manypy_operator_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["model"] == "heavy" {
				heavy++
				s := m.GetSummary()
				if s.GetSampleCount() == 0 || s.GetSampleSum() <= 0 || len(s.GetQuantile()) != 2 {
					t.Errorf("summary %v", s)
				}
			}
		}
	}
	if heavy == 0 {
		t.Fatal("no summary for model heavy")
	}
	if n, err := testutil.GatherAndCount(registry, "manypy_operator_duration_seconds"); err != nil || n < heavy {
		t.Errorf("count %d, %v", n, err)
	}
	// A closed profiler makes the scrape fail, not panic.
	prof.Close()
	if _, err := registry.Gather(); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("scrape of a closed profiler: %v", err)
	}
}
