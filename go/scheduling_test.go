package manypy

import (
	"os"
	"runtime"
	"testing"
)

// NewPool raises GOMAXPROCS by its interpreters (scheduling.go), never
// lowers it, and leaves it alone when asked to.
func TestNewPoolReservesIdlePs(t *testing.T) {
	if os.Getenv("GOMAXPROCS") != "" {
		t.Fatal("run this suite without GOMAXPROCS in the environment: NewPool leaves it alone then")
	}
	before := runtime.GOMAXPROCS(0)
	newPool(t, PoolOptions{Interpreters: 2, KeepGOMAXPROCS: true})
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Fatalf("KeepGOMAXPROCS: GOMAXPROCS went from %d to %d", before, got)
	}
	newPool(t, PoolOptions{Interpreters: 2})
	got := runtime.GOMAXPROCS(0)
	gomaxprocs.Lock()
	base := gomaxprocs.base
	gomaxprocs.Unlock()
	if got < before || got < base+2 {
		t.Fatalf("GOMAXPROCS is %d after a pool of 2 interpreters (%d before it, %d before the first pool)",
			got, before, base)
	}
}
