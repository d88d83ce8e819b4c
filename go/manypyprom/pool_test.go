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
	go sleep(1.0)
	waitFor(t, "the sleep running", func() bool { return pool.InFlight() == 1 })
	go sleep(0)
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
