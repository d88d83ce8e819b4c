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

// lineWriter hands each line the service prints to a channel.
type lineWriter struct {
	mu      sync.Mutex
	partial string
	lines   chan string
}

func newLineWriter() *lineWriter { return &lineWriter{lines: make(chan string, 100)} }

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial += string(p)
	for {
		i := strings.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.lines <- w.partial[:i]
		w.partial = w.partial[i+1:]
	}
}

// next is the next line printed with the given prefix, skipping others.
func nextLine(t *testing.T, lines <-chan string, prefix string, done <-chan error) string {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the service's output ended before %q", prefix)
			}
			if strings.HasPrefix(line, prefix) {
				return line
			}
		case err := <-done:
			t.Fatalf("the service ended before printing %q: %v", prefix, err)
		case <-timeout:
			t.Fatalf("the service did not print %q within 60 s", prefix)
		}
	}
}

// address is the http://ADDR of a "listening on" or "admin on" line.
func address(line string) string {
	for _, field := range strings.Fields(line) {
		if strings.HasPrefix(field, "http://") {
			return field
		}
	}
	return ""
}

// inProcess runs the service (run) on loopback ports until the test ends
// or stop is called, and returns its base URL and its admin URL ("" without
// cfg.AdminAddr) once it is ready; stop returns what run returned.
func inProcess(t *testing.T, cfg config) (base, admin string, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := newLineWriter()
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, "127.0.0.1:0", out) }()
	base = address(nextLine(t, out.lines, "listening on ", done))
	if cfg.AdminAddr != "" {
		admin = address(nextLine(t, out.lines, "admin on ", done))
	}
	nextLine(t, out.lines, "ready: ", done)
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(60 * time.Second):
				err = fmt.Errorf("the service did not stop within 60 s")
			}
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return base, admin, stop
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
	base, _, stop := inProcess(t, cfg)
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

	if err := stop(); err != nil {
		t.Errorf("shutdown: %v", err)
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
		Refused   bool   `json:"refused"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return fmt.Errorf("%s: HTTP %d, a body that does not decode: %w", id, resp.StatusCode, err)
	}
	if resp.StatusCode == http.StatusServiceUnavailable && answer.Refused {
		return &refusedError{id: id, message: answer.Error}
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d: %s", id, resp.StatusCode, answer.Error)
	}
	if answer.RequestID != id || answer.Outputs.Steps != 5 {
		return fmt.Errorf("%s: request id %q, steps %d", id, answer.RequestID, answer.Outputs.Steps)
	}
	if v, g := resp.Header.Get("X-Model-Version"), resp.Header.Get("X-Model-Generation"); v != "python_heavy.pt" || g != "1" {
		return fmt.Errorf("%s: X-Model-Version %q, X-Model-Generation %q", id, v, g)
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

// refusedError is a request the service refused before any of it ran
// (503, "refused": true).
type refusedError struct{ id, message string }

func (e *refusedError) Error() string { return e.id + ": refused: " + e.message }

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
	// The pool's request metrics (manypyprom.ServingCollector): the model's
	// calls by code, the one past its deadline included, and its durations.
	calls := map[string]float64{}
	for _, m := range families["manypy_requests_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		calls[labels["model"]+" "+labels["code"]] = m.GetCounter().GetValue()
	}
	if calls["python_heavy ok"] != 33 || calls["python_heavy deadline_exceeded"] != 1 {
		t.Errorf("manypy_requests_total: %v, want 33 ok and 1 deadline_exceeded of python_heavy", calls)
	}
	for _, m := range families["manypy_request_duration_seconds"].GetMetric() {
		if h := m.GetHistogram(); h.GetSampleCount() < 34 || h.GetSampleSum() <= 0 {
			t.Errorf("manypy_request_duration_seconds: %v", h)
		}
	}
	ready := 0.0
	for _, m := range families["manypy_interpreters"].GetMetric() {
		if state := m.GetLabel()[0].GetValue(); state == "ready" || state == "busy" {
			ready += m.GetGauge().GetValue()
		}
	}
	if ready < 1 || families["manypy_draining"].GetMetric()[0].GetGauge().GetValue() != 0 {
		t.Errorf("manypy_interpreters %v, manypy_draining %v", families["manypy_interpreters"], families["manypy_draining"])
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
		{&manypy.Error{Code: manypy.CodeDraining}, http.StatusServiceUnavailable},
		{&manypy.Error{Code: manypy.CodeBadTensor}, http.StatusBadRequest},
		{&manypy.Error{Code: manypy.CodeInternal}, http.StatusInternalServerError},
	} {
		if got := statusOf(c.err); got != c.want {
			t.Errorf("%v: HTTP %d, want %d", c.err, got, c.want)
		}
	}
}
