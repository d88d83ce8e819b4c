package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
)

// runLoadTest serves the model with 1 interpreter, then with
// cfg.Interpreters, each under the same load from a loopback client
// (load.clients goroutines with keep-alive connections, for load.duration),
// and prints requests/s and p50/p99 latency side by side.
func runLoadTest(cfg config, load loadConfig, out io.Writer) error {
	body, err := loadTestBody(load.steps)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "POST /predict, %s, steps=%d, %d clients, %v per row, thread mode %d\n",
		cfg.ModelID, load.steps, load.clients, load.duration, cfg.ThreadMode)
	fmt.Fprintf(out, "%-13s %10s %10s %10s %8s\n", "interpreters", "req/s", "p50 ms", "p99 ms", "errors")
	var base float64
	for _, n := range []int{1, cfg.Interpreters} {
		row := cfg
		row.Interpreters = n
		r, err := measure(row, load, body)
		if err != nil {
			return err
		}
		speedup := ""
		if base == 0 {
			base = r.rate
		} else {
			speedup = fmt.Sprintf("  (%.2fx)", r.rate/base)
		}
		fmt.Fprintf(out, "%-13d %10.1f %10.2f %10.2f %8d%s\n", n, r.rate,
			ms(r.p50), ms(r.p99), r.errors, speedup)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func loadTestBody(steps int) ([]byte, error) {
	rng := rand.New(rand.NewSource(1))
	data := make([]float64, 4*64)
	for i := range data {
		data[i] = rng.NormFloat64()
	}
	return json.Marshal(map[string]any{
		"inputs": []tensorJSON{{Shape: []int64{4, 64}, Data: data}},
		"kwargs": map[string]any{"steps": steps, "normalize": false},
	})
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
