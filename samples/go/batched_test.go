package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"manypy.dev/manypy"
)

// The service with -batch, serving batching.pt (forward(x) = x*2+1;
// rows(x) gives each row its batch's row count): 16 concurrent clients
// each get their own rows back from batched forward calls; a request with
// a method bypasses the batcher; /metrics has the pool's gauges and the
// batch sizes.
func TestBatchedServiceOverHTTP(t *testing.T) {
	dir := archives(t)
	cfg := config{Archive: filepath.Join(dir, "batching.pt"), ModelID: "batching",
		Interpreters: 2, Timeout: 10 * time.Second, SampleRate: 1.0, QueueLimit: 64,
		Batch: 8, BatchWait: 50 * time.Millisecond}
	base, _, stop := inProcess(t, cfg)
	client := &http.Client{Timeout: 30 * time.Second}

	var wg sync.WaitGroup
	errs := make(chan error, 16*4)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 4; i++ {
				x := []float64{float64(100*g + i), float64(-g), 0.5}
				errs <- checkForward(client, base, fmt.Sprintf("b-%d-%d", g, i), x)
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
	// A method goes to the object, unbatched: a batch of its own one row.
	body, _ := json.Marshal(map[string]any{
		"inputs": []tensorJSON{{Shape: []int64{1, 3}, Data: []float64{1, 2, 3}}}, "method": "rows"})
	if status, answer := postJSON(t, client, base, "rows", body); status != http.StatusOK ||
		!strings.Contains(string(answer), `"data":[1]`) {
		t.Errorf("rows: HTTP %d %s", status, answer)
	}
	// Two rows with a different count each: refused by the batcher, 400.
	body, _ = json.Marshal(map[string]any{"inputs": []tensorJSON{
		{Shape: []int64{1, 1}, Data: []float64{1}}, {Shape: []int64{2, 1}, Data: []float64{1, 2}}}})
	if status, answer := postJSON(t, client, base, "mismatch", body); status != http.StatusBadRequest {
		t.Errorf("inputs with different rows: HTTP %d %s", status, answer)
	}

	resp, err := client.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	// The pool's gauges (manypyprom.ServingCollector), of a pool without a
	// name: no labels.
	for _, name := range []string{"manypy_queued_requests", "manypy_inflight_requests", "manypy_draining"} {
		f := families[name]
		if f == nil || len(f.GetMetric()) != 1 || len(f.GetMetric()[0].GetLabel()) != 0 {
			t.Errorf("%s: %v", name, f)
		}
	}
	// The pool's calls by model id and code: the batches of the 64 batched
	// requests (a batch is one call) and the call with a method.
	requests := map[string]float64{}
	for _, m := range families["manypy_requests_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		requests[labels["model"]+" "+labels["code"]] = m.GetCounter().GetValue()
	}
	if n := requests["batching ok"]; n < 2 || n > 65 {
		t.Errorf("manypy_requests_total: %v, want 2 to 65 ok calls of model batching", requests)
	}
	t.Logf("manypy_requests_total: %v", requests)
	// The batches the 64 forward requests made, by the batcher's name.
	var batched uint64
	for _, m := range families["manypy_batch_size"].GetMetric() {
		if m.GetLabel()[0].GetValue() == "batching" {
			batched = uint64(m.GetHistogram().GetSampleSum())
		}
	}
	if batched < 64 {
		t.Errorf("manypy_batch_size{batcher=\"batching\"} counts %d rows, want at least 64", batched)
	}

	if err := stop(); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

// postJSON for goroutines other than the test's.
func postJSONErr(client *http.Client, base, id string, body []byte) (int, []byte) {
	req, _ := http.NewRequest(http.MethodPost, base+"/predict", bytes.NewReader(body))
	req.Header.Set("X-Request-Id", id)
	resp, err := client.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, []byte(err.Error())
	}
	return resp.StatusCode, answer
}

func checkForward(client *http.Client, base, id string, x []float64) error {
	body, _ := json.Marshal(map[string]any{"inputs": []tensorJSON{{Shape: []int64{1, int64(len(x))}, Data: x}}})
	status, answer := postJSONErr(client, base, id, body)
	if status != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d %s", id, status, answer)
	}
	var got struct {
		Outputs   tensorJSON `json:"outputs"`
		RequestID string     `json:"request_id"`
	}
	if err := json.Unmarshal(answer, &got); err != nil {
		return fmt.Errorf("%s: %v", id, err)
	}
	want := make([]float64, len(x))
	for i, v := range x {
		want[i] = v*2 + 1
	}
	if got.RequestID != id || !reflect.DeepEqual(got.Outputs.Data, want) ||
		!reflect.DeepEqual(got.Outputs.Shape, []int64{1, int64(len(x))}) {
		return fmt.Errorf("%s: %s, want %v", id, answer, want)
	}
	return nil
}

// The load test's batched mode, briefly: both rows are measured and
// printed, and no request fails.
func TestBatchedLoadTest(t *testing.T) {
	cfg := config{Archive: filepath.Join(archives(t), "batching.pt"), ModelID: "batching",
		Interpreters: 2, Timeout: 10 * time.Second, SampleRate: 0.01, Batch: 8, BatchWait: time.Millisecond,
		ThreadMode: manypy.Direct}
	var out strings.Builder
	if err := runLoadTest(cfg, loadConfig{enabled: true, clients: 8, duration: 300 * time.Millisecond}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[2], "unbatched") || !strings.HasPrefix(lines[3], "batched 8/1ms") {
		t.Fatalf("load test output:\n%s", out.String())
	}
	speedup := regexp.MustCompile(`\(\d+\.\d+x\)$`)
	for _, line := range lines[2:] {
		if !strings.HasSuffix(strings.TrimSpace(speedup.ReplaceAllString(line, "")), " 0") {
			t.Errorf("failed requests in %q", line)
		}
	}
	t.Log("\n" + out.String())
}
