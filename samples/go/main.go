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
// It is the reference deployment of docs/deploy.md: /healthz (live) and
// /readyz (ready: the model is loaded, an interpreter serves, the pool is
// not draining), a pool that serves as soon as one interpreter has
// started, a graceful drain on SIGTERM within -grace, a model hot swap on
// -admin-addr (POST /admin/model {"archive": "..."}), and the pool's
// request metrics on /metrics.
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
	fs.StringVar(&cfg.ModelID, "model-id", "", "model id for metrics, kept across hot swaps (default: the archive's name)")
	fs.IntVar(&cfg.Interpreters, "interpreters", 2, "interpreters in the pool")
	fs.IntVar(&cfg.MinServing, "min-serving", 1, "/readyz answers 503 while fewer interpreters than this serve (lost or retired ones do not)")
	fs.IntVar(&cfg.MaxInterpreters, "max-interpreters", 0, "let the pool grow to this many when calls wait (0: -interpreters, no growth)")
	fs.StringVar(&mode, "thread-mode", "direct", "direct or handoff")
	fs.DurationVar(&cfg.Timeout, "timeout", 2*time.Second, "each request's deadline")
	fs.Float64Var(&cfg.SampleRate, "profile", 0.01, "profiler sampling probability, in (0, 1]")
	fs.IntVar(&cfg.QueueLimit, "queue-limit", 0, "calls that may wait for an interpreter; past it 503 (0: no limit)")
	fs.DurationVar(&cfg.Grace, "grace", 25*time.Second, "after SIGTERM, how long the calls in flight may run before they are cancelled")
	fs.StringVar(&cfg.AdminAddr, "admin-addr", "", "where to serve GET and POST /admin/model (model hot swap; empty: nowhere). Loading an archive runs its code: keep it private")
	fs.StringVar(&cfg.PoolName, "pool-name", "", "the pool label of the manypy_* request metrics (empty: none)")
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

// run serves until ctx is done, then stops gracefully. It opens the port
// first, printing "listening on http://ADDR" (and "admin on http://ADDR"
// with an admin address), so that /healthz answers while the pool starts;
// /readyz answers 200 once the model is loaded and an interpreter serves
// ("ready: ..." is printed then). When ctx is done (SIGTERM, SIGINT):
// readiness goes off at once, the pool drains (the calls in flight finish;
// new ones are refused with 503, "refused": true), for at most cfg.Grace,
// after which the calls left are cancelled; then the HTTP servers shut
// down, the model and pool are closed, and run returns nil.
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
	servers := []*http.Server{{Handler: svc.handler(), ReadHeaderTimeout: 10 * time.Second}}
	listeners := []net.Listener{listener}
	fmt.Fprintf(out, "listening on http://%s (%d interpreters, model %s)\n",
		listener.Addr(), cfg.Interpreters, cfg.ModelID)
	if cfg.AdminAddr != "" {
		admin, err := net.Listen("tcp", cfg.AdminAddr)
		if err != nil {
			listener.Close()
			return err
		}
		servers = append(servers, &http.Server{Handler: svc.adminHandler(), ReadHeaderTimeout: 10 * time.Second})
		listeners = append(listeners, admin)
		fmt.Fprintf(out, "admin on http://%s\n", admin.Addr())
	}
	served := make(chan error, len(servers))
	for i, server := range servers {
		go func() { served <- server.Serve(listeners[i]) }()
	}
	shutdown := func() error {
		stop, cancel := context.WithTimeout(context.Background(), cfg.Timeout+5*time.Second)
		defer cancel()
		var first error
		for _, server := range servers {
			if err := server.Shutdown(stop); err != nil && first == nil {
				first = err
			}
		}
		for range servers {
			if err := <-served; !errors.Is(err, http.ErrServerClosed) && first == nil {
				first = err
			}
		}
		return first
	}
	started := time.Now()
	if err := svc.start(); err != nil {
		shutdown()
		return err
	}
	v := svc.acquire()
	fmt.Fprintf(out, "ready: version %s of %s after %v\n", v.Label, v.Archive, time.Since(started).Round(time.Millisecond))
	v.release()

	select {
	case err := <-served:
		shutdown()
		return err
	case <-ctx.Done():
	}
	// Readiness off first, so that the load balancer stops sending (the
	// requests it still sends are refused by the drain: 503).
	svc.stopping.Store(true)
	grace := cfg.Grace
	if grace <= 0 {
		grace = 25 * time.Second // -grace's default
	}
	drainCtx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	start := time.Now()
	result, err := svc.pool.Load().Drain(drainCtx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "drained in %v: %d calls finished, %d cancelled\n",
		time.Since(start).Round(time.Millisecond), result.Finished, result.Cancelled)
	err = shutdown()
	fmt.Fprintf(out, "stopped: %d requests answered 200, %d failed, %d refused\n",
		svc.answeredOK.Load(), svc.failed.Load(), svc.refused.Load())
	return err
}
