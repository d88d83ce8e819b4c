// Command serve is manypy's Go HTTP sample: it serves a packaged PyTorch
// model from a pool of N isolated interpreters (no shared GIL) behind
// net/http, with /metrics for Prometheus.
//
//	GLIBC_TUNABLES=glibc.rtld.optional_static_tls=16384 \
//	  serve -archive build/archives/python_heavy.pt -interpreters 4 -addr 127.0.0.1:8080
//
//	curl -s -H 'X-Request-Id: r1' localhost:8080/predict \
//	  -d '{"inputs": [{"shape": [1, 64], "data": [0.1, ...]}], "kwargs": {"steps": 5}}'
//	curl -s localhost:8080/metrics
//
// With -loadtest it measures itself instead: requests/s and p50/p99 latency
// from a loopback client, for 1 interpreter and for N, or with -batch for N
// interpreters unbatched and batched.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"manypy.dev/manypy"
)

func main() {
	cfg, addr, load, err := parseFlags(os.Args[1:])
	if err == nil {
		if load.enabled {
			err = runLoadTest(cfg, load, os.Stdout)
		} else {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			err = run(ctx, cfg, addr, os.Stdout)
		}
	}
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "serve:", err)
		os.Exit(1)
	}
}

type loadConfig struct {
	enabled  bool
	clients  int
	duration time.Duration
	steps    int
}

func parseFlags(args []string) (config, string, loadConfig, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	archives := os.Getenv("MANYPY_ARCHIVES")
	cfg := config{}
	var load loadConfig
	var mode string
	fs.StringVar(&cfg.Archive, "archive", filepath.Join(archives, "python_heavy.pt"), "torch.package to serve (model/model.pkl)")
	fs.StringVar(&cfg.ModelID, "model-id", "", "model id for metrics (default: the archive's name)")
	fs.IntVar(&cfg.Interpreters, "interpreters", 2, "interpreters in the pool")
	fs.StringVar(&mode, "thread-mode", "direct", "direct or handoff")
	fs.DurationVar(&cfg.Timeout, "timeout", 2*time.Second, "each request's deadline")
	fs.Float64Var(&cfg.SampleRate, "profile", 0.01, "profiler sampling probability, in (0, 1]")
	fs.IntVar(&cfg.QueueLimit, "queue-limit", 0, "calls that may wait for an interpreter; past it 503 (0: no limit)")
	fs.IntVar(&cfg.Batch, "batch", 0, "batch requests without a method, up to this many rows (0: no batching)")
	fs.DurationVar(&cfg.BatchWait, "batch-wait", 2*time.Millisecond, "the longest a batch waits to fill")
	addr := fs.String("addr", "127.0.0.1:8080", "listen address")
	fs.BoolVar(&load.enabled, "loadtest", false, "measure 1 interpreter vs -interpreters (with -batch: unbatched vs batched) under load, print a table, exit")
	fs.IntVar(&load.clients, "clients", 8, "load test: concurrent clients")
	fs.DurationVar(&load.duration, "duration", 3*time.Second, "load test: time per configuration")
	fs.IntVar(&load.steps, "steps", 5, "load test: python_heavy's steps kwarg")
	if err := fs.Parse(args); err != nil {
		return cfg, "", load, err
	}
	switch mode {
	case "direct":
		cfg.ThreadMode = manypy.Direct
	case "handoff":
		cfg.ThreadMode = manypy.Handoff
	default:
		return cfg, "", load, fmt.Errorf("-thread-mode %q: direct or handoff", mode)
	}
	if cfg.ModelID == "" {
		cfg.ModelID = filepath.Base(cfg.Archive)
	}
	return cfg, *addr, load, nil
}

// run serves until ctx is done, then shuts down gracefully: in-flight
// requests finish, then the model and pool are closed. It prints
// "listening on http://ADDR" once the port is open.
func run(ctx context.Context, cfg config, addr string, out io.Writer) error {
	svc, err := newService(cfg)
	if err != nil {
		return err
	}
	defer svc.close()
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	server := &http.Server{Handler: svc.handler(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(out, "listening on http://%s (%d interpreters, model %s)\n",
		listener.Addr(), cfg.Interpreters, cfg.ModelID)
	served := make(chan error, 1)
	go func() { served <- server.Serve(listener) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), cfg.Timeout+5*time.Second)
	defer cancel()
	if err := server.Shutdown(shutdown); err != nil {
		return err
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
