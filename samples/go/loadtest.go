package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// runLoadTest serves the model under the same load from a loopback client
// (load.clients goroutines with keep-alive connections, for load.duration)
// in two configurations, and prints requests/s and p50/p99 latency side by
// side: 1 interpreter and cfg.Interpreters; or, with cfg.Batch > 0,
// cfg.Interpreters unbatched and batched (manypy.Batcher).
func runLoadTest(cfg config, load loadConfig, out io.Writer) error {
	body, what, err := loadTestBody(cfg.Archive, load.steps)
	if err != nil {
		return err
	}
	type row struct {
		label string
		cfg   config
	}
	var rows []row
	if cfg.Batch > 0 {
		unbatched := cfg
		unbatched.Batch = 0
		rows = []row{{"unbatched", unbatched},
			{fmt.Sprintf("batched %d/%v", cfg.Batch, cfg.BatchWait), cfg}}
	} else {
		one := cfg
		one.Interpreters = 1
		rows = []row{{"", one}, {"", cfg}}
	}
	fmt.Fprintf(out, "POST /predict, %s, %s, %d clients, %v per row, thread mode %d\n",
		cfg.ModelID, what, load.clients, load.duration, cfg.ThreadMode)
	fmt.Fprintf(out, "%-18s %-13s %10s %10s %10s %8s\n", "mode", "interpreters", "req/s", "p50 ms", "p99 ms", "errors")
	var base float64
	for _, row := range rows {
		if row.label == "" {
			row.label = "unbatched"
		}
		r, err := measure(row.cfg, load, body)
		if err != nil {
			return err
		}
		speedup := ""
		if base == 0 {
			base = r.rate
		} else {
			speedup = fmt.Sprintf("  (%.2fx)", r.rate/base)
		}
		fmt.Fprintf(out, "%-18s %-13d %10.1f %10.2f %10.2f %8d%s\n", row.label, row.cfg.Interpreters, r.rate,
			ms(r.p50), ms(r.p99), r.errors, speedup)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// loadTestBody is one request for the archive: its test case (NAME.json
// next to NAME.pt: the input file, its shape and the kwargs, as
// samples/models writes them), with the kwarg steps set to steps when it
// has one (python_heavy.pt); without a test case, a random [1, 64] input
// and no kwargs. It also says what the request is.
func loadTestBody(archive string, steps int) ([]byte, string, error) {
	desc, err := os.ReadFile(strings.TrimSuffix(archive, ".pt") + ".json")
	if errors.Is(err, fs.ErrNotExist) {
		rng := rand.New(rand.NewSource(1))
		data := make([]float64, 64)
		for i := range data {
			data[i] = rng.NormFloat64()
		}
		body, err := json.Marshal(map[string]any{"inputs": []tensorJSON{{Shape: []int64{1, 64}, Data: data}}})
		return body, "random input [1 64]", err
	}
	if err != nil {
		return nil, "", err
	}
	var test struct {
		Input struct {
			Shape []int64 `json:"shape"`
			File  string  `json:"file"`
		} `json:"input"`
		Kwargs map[string]any `json:"kwargs"`
	}
	if err := json.Unmarshal(desc, &test); err != nil {
		return nil, "", err
	}
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(archive), test.Input.File))
	if err != nil {
		return nil, "", err
	}
	data := make([]float64, len(raw)/4)
	for i := range data {
		data[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])))
	}
	what := fmt.Sprintf("input %v", test.Input.Shape)
	if _, ok := test.Kwargs["steps"]; ok {
		test.Kwargs["steps"] = steps
		what += fmt.Sprintf(", steps=%d", steps)
	}
	body, err := json.Marshal(map[string]any{
		"inputs": []tensorJSON{{Shape: test.Input.Shape, Data: data}},
		"kwargs": test.Kwargs,
	})
	return body, what, err
}

type loadResult struct {
	rate     float64
	p50, p99 time.Duration
	errors   int
}

func measure(cfg config, load loadConfig, body []byte) (loadResult, error) {
	svc, err := newService(cfg)
	if err != nil {
		return loadResult{}, err
	}
	defer svc.close()
	if err := svc.start(); err != nil {
		return loadResult{}, err
	}
	// The pool serves early: measure once every interpreter has started.
	for {
		stats, err := svc.pool.Load().Stats()
		if err != nil {
			return loadResult{}, err
		}
		if stats.Starting == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return loadResult{}, err
	}
	server := &http.Server{Handler: svc.handler()}
	go server.Serve(listener)
	defer server.Close()
	url := "http://" + listener.Addr().String() + "/predict"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: load.clients}}
	defer client.CloseIdleConnections()

	// Warm up: every interpreter replicates the model on its first call.
	for i := 0; i < 4*cfg.Interpreters; i++ {
		if _, err := post(client, url, body); err != nil {
			return loadResult{}, fmt.Errorf("warm-up: %w", err)
		}
	}
	var mu sync.Mutex
	var latencies []time.Duration
	var failures int
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(load.duration)
	for c := 0; c < load.clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			bad := 0
			for time.Now().Before(end) {
				t0 := time.Now()
				if _, err := post(client, url, body); err != nil {
					bad++
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			latencies = append(latencies, mine...)
			failures += bad
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if len(latencies) == 0 {
		return loadResult{}, fmt.Errorf("no request succeeded (%d failed)", failures)
	}
	slices.Sort(latencies)
	return loadResult{
		rate:   float64(len(latencies)) / elapsed.Seconds(),
		p50:    latencies[len(latencies)/2],
		p99:    latencies[len(latencies)*99/100],
		errors: failures,
	}, nil
}

func post(client *http.Client, url string, body []byte) ([]byte, error) {
	resp, err := client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, answer)
	}
	return answer, nil
}
