package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"manypy.dev/manypy"
)

// lineWriter hands the first line the service prints to a channel.
type lineWriter struct {
	once  sync.Once
	lines chan string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { w.lines <- strings.TrimSpace(string(p)) })
	return len(p), nil
}

func archives(t *testing.T) string {
	dir := os.Getenv("MANYPY_ARCHIVES")
	if dir == "" {
		t.Fatal("MANYPY_ARCHIVES must name <build>/archives")
	}
	return dir
}

func readFloats(t *testing.T, path string) []float64 {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float64, len(raw)/4)
	for i := range out {
		out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])))
	}
	return out
}

// The service on a loopback port, checked with Go's HTTP client: eager
// Python's predictions from 8 goroutines at once, a /metrics scrape parsed
// by Prometheus's text parser, a 504 for a call past its deadline while the
// service goes on serving; then it stops.
func TestServiceOverHTTP(t *testing.T) {
	dir := archives(t)
	cfg := config{Archive: filepath.Join(dir, "python_heavy.pt"), ModelID: "python_heavy",
		Interpreters: 2, Timeout: time.Second, SampleRate: 1.0}
	ctx, stop := context.WithCancel(context.Background())
	out := &lineWriter{lines: make(chan string, 1)}
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, "127.0.0.1:0", out) }()
	var base string
	select {
	case line := <-out.lines:
		base = strings.Fields(strings.TrimPrefix(line, "listening on "))[0]
	case err := <-done:
		t.Fatalf("the service did not start: %v", err)
	}
	client := &http.Client{Timeout: 30 * time.Second}

	input := readFloats(t, filepath.Join(dir, "python_heavy.input.bin"))
	wantLogits := readFloats(t, filepath.Join(dir, "python_heavy.expected.logits.bin"))
	wantNorm := readFloats(t, filepath.Join(dir, "python_heavy.expected.norm.bin"))
	body, _ := json.Marshal(map[string]any{
		"inputs": []tensorJSON{{Shape: []int64{4, 64}, Data: input}},
		"kwargs": map[string]any{"steps": 5, "normalize": false},
	})

	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 4; i++ {
				id := fmt.Sprintf("req-%d-%d", g, i)
				errs <- checkPrediction(client, base, id, body, wantLogits, wantNorm)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}

	// A call that runs past the request's deadline: 504, promptly.
	slow, _ := json.Marshal(map[string]any{
		"inputs": []tensorJSON{{Shape: []int64{4, 64}, Data: input}},
		"kwargs": map[string]any{"steps": 100_000_000},
	})
	start := time.Now()
	status, answer := postJSON(t, client, base, "slow", slow)
	if status != http.StatusGatewayTimeout {
		t.Errorf("slow request: HTTP %d %s", status, answer)
	}
	if elapsed := time.Since(start); elapsed > cfg.Timeout+time.Second {
		t.Errorf("slow request took %v (timeout %v)", elapsed, cfg.Timeout)
	}
	// ... and the service goes on serving, correctly.
	if err := checkPrediction(client, base, "after", body, wantLogits, wantNorm); err != nil {
		t.Error(err)
	}
	if status, answer := postJSON(t, client, base, "bad", []byte(`{"inputs": [{"shape": [2], "data": [1]}]}`)); status != http.StatusBadRequest {
		t.Errorf("bad input: HTTP %d %s", status, answer)
	}
	if status, _ := postJSON(t, client, base, "junk", []byte(`{`)); status != http.StatusBadRequest {
		t.Errorf("bad JSON: HTTP %d", status)
	}

	checkMetrics(t, client, base)

	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("shutdown: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the service did not stop")
	}
}

func postJSON(t *testing.T, client *http.Client, base, id string, body []byte) (int, []byte) {
	req, _ := http.NewRequest(http.MethodPost, base+"/predict", bytes.NewReader(body))
	req.Header.Set("X-Request-Id", id)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.Bytes()
}

func checkPrediction(client *http.Client, base, id string, body []byte, wantLogits, wantNorm []float64) error {
	req, _ := http.NewRequest(http.MethodPost, base+"/predict", bytes.NewReader(body))
	req.Header.Set("X-Request-Id", id)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var answer struct {
		Outputs struct {
			Logits tensorJSON `json:"logits"`
			Norm   tensorJSON `json:"norm"`
			Steps  int        `json:"steps"`
		} `json:"outputs"`
		RequestID string `json:"request_id"`
		Error     string `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d: %s", id, resp.StatusCode, answer.Error)
	}
	if answer.RequestID != id || answer.Outputs.Steps != 5 {
		return fmt.Errorf("%s: request id %q, steps %d", id, answer.RequestID, answer.Outputs.Steps)
	}
	for _, c := range []struct {
		name      string
		got, want []float64
	}{{"logits", answer.Outputs.Logits.Data, wantLogits}, {"norm", answer.Outputs.Norm.Data, wantNorm}} {
		if len(c.got) != len(c.want) {
			return fmt.Errorf("%s: %s has %d values, want %d", id, c.name, len(c.got), len(c.want))
		}
		for i := range c.got {
			if math.Abs(c.got[i]-c.want[i]) > 1e-5 {
				return fmt.Errorf("%s: %s[%d] = %g, want %g", id, c.name, i, c.got[i], c.want[i])
			}
		}
	}
	return nil
}

func checkMetrics(t *testing.T, client *http.Client, base string) {
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The classic (legacy) name rules: what every Prometheus server accepts.
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	duration := families["manypy_operator_duration_seconds"]
	if duration == nil || len(duration.GetMetric()) == 0 {
		t.Fatal("no manypy_operator_duration_seconds in /metrics")
	}
	var sampled uint64
	for _, m := range duration.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "model" && l.GetValue() == "python_heavy" {
				sampled += m.GetSummary().GetSampleCount()
			}
		}
	}
	if sampled == 0 {
		t.Error("no sampled operators for model python_heavy")
	}
	requests := families["predict_requests_total"]
	ok := 0.0
	for _, m := range requests.GetMetric() {
		if m.GetLabel()[0].GetValue() == "200" {
			ok = m.GetCounter().GetValue()
		}
	}
	if ok != 33 {
		t.Errorf("predict_requests_total{code=\"200\"} = %v, want 33", ok)
	}
}

// What each kind of failed call answers.
func TestStatusOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{&manypy.Error{Code: manypy.CodeDeadlineExceeded}, http.StatusGatewayTimeout},
		{&manypy.Error{Code: manypy.CodeCancelled}, 499},
		{&manypy.Error{Code: manypy.CodePython}, http.StatusBadRequest},
		{&manypy.Error{Code: manypy.CodeInterpreterBroken}, http.StatusServiceUnavailable},
		{&manypy.Error{Code: manypy.CodeOverloaded}, http.StatusServiceUnavailable},
		{&manypy.Error{Code: manypy.CodeBadTensor}, http.StatusBadRequest},
		{&manypy.Error{Code: manypy.CodeInternal}, http.StatusInternalServerError},
	} {
		if got := statusOf(c.err); got != c.want {
			t.Errorf("%v: HTTP %d, want %d", c.err, got, c.want)
		}
	}
}
