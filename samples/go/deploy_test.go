package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"manypy.dev/manypy"
)

// The reference deployment (docs/deploy.md): probes, the drain on SIGTERM
// of the real binary under load, and the model hot swap under load.

func TestLiveness(t *testing.T) {
	for _, c := range []struct {
		stats manypy.PoolStats
		live  bool
	}{
		{manypy.PoolStats{}, true}, // no interpreter yet
		{manypy.PoolStats{Interpreters: 2, Starting: 2}, true},
		{manypy.PoolStats{Interpreters: 2, Ready: 1, Broken: 1}, true},
		{manypy.PoolStats{Interpreters: 2, Busy: 2, Draining: true}, true},
		{manypy.PoolStats{Interpreters: 2, Broken: 2}, false},
		{manypy.PoolStats{Interpreters: 2, Ready: 1, Lost: 1}, true},
		{manypy.PoolStats{Interpreters: 2, Broken: 1, Lost: 1}, false},
	} {
		if live, why := liveness(c.stats); live != c.live {
			t.Errorf("%+v: live %v (%s)", c.stats, live, why)
		}
	}
}

// /readyz once the model is loaded: at least -min-serving interpreters
// ready or busy, never fewer than 1, not draining.
func TestReadinessThreshold(t *testing.T) {
	for _, c := range []struct {
		stats manypy.PoolStats
		min   int
		ready bool
	}{
		{manypy.PoolStats{Interpreters: 4, Ready: 2, Broken: 1, Lost: 1}, 2, true},
		{manypy.PoolStats{Interpreters: 4, Ready: 2, Broken: 1, Lost: 1}, 3, false},
		{manypy.PoolStats{Interpreters: 2, Starting: 1, Lost: 1}, 0, false},
		{manypy.PoolStats{Interpreters: 2, Busy: 1, Lost: 1}, 1, true},
		{manypy.PoolStats{Interpreters: 2, Ready: 2, Draining: true}, 1, false},
	} {
		if ok, why := ready(c.stats, c.min); ok != c.ready {
			t.Errorf("%+v, min %d: ready %v (%s)", c.stats, c.min, ok, why)
		}
	}
}

// inFlight is the service's manypy_inflight_requests.
func inFlight(t *testing.T, client *http.Client, base string) int {
	t.Helper()
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^manypy_inflight_requests (\d+)$`).FindSubmatch(raw)
	if m == nil {
		t.Fatalf("no manypy_inflight_requests in /metrics:\n%s", raw)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// waitInFlight waits until the service has n calls in flight.
func waitInFlight(t *testing.T, client *http.Client, base string, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		got := inFlight(t, client, base)
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls in flight after 30 s, want %d", got, n)
		}
	}
}

// probeStatus is GET base+path's status (0 if the request failed).
func probeStatus(client *http.Client, base, path string) (int, string) {
	resp, err := client.Get(base + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(body))
}

// buildServe builds the sample's binary into a temporary directory.
func buildServe(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "serve")
	// go test puts its own go first on PATH.
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// process is the sample's binary running.
type process struct {
	cmd    *exec.Cmd
	base   string      // http://ADDR
	lines  chan string // what it prints, line by line
	exited chan error  // for nextLine: never written
	waited chan error  // cmd.Wait's result, once it exits
	mu     sync.Mutex
	all    []string
}

// startBinary builds the sample, starts it with args (and -addr on a
// loopback port), and returns once it listens.
func startBinary(t *testing.T, args ...string) *process {
	t.Helper()
	bin := buildServe(t)
	p := &process{lines: make(chan string, 1000), exited: make(chan error), waited: make(chan error, 1)}
	p.cmd = exec.Command(bin, append(args, "-addr", "127.0.0.1:0")...)
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = os.Stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.cmd.Process.Kill() })
	read := make(chan struct{})
	go func() {
		defer close(read)
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			p.mu.Lock()
			p.all = append(p.all, scanner.Text())
			p.mu.Unlock()
			p.lines <- scanner.Text()
		}
		close(p.lines)
	}()
	go func() {
		<-read // Wait closes the pipe: read it all first
		p.waited <- p.cmd.Wait()
	}()
	p.base = address(nextLine(t, p.lines, "listening on ", p.exited))
	return p
}

// output is everything the process printed, once it has exited.
func (p *process) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.all, "\n")
}

// checkDoubled posts x to stuck.pt's forward and checks the answer, twice
// x. A refusal is a *refusedError; a request that got no answer, the
// client's *url.Error.
func checkDoubled(client *http.Client, base, id string, x []float64) error {
	body, _ := json.Marshal(map[string]any{"inputs": []tensorJSON{{Shape: []int64{1, int64(len(x))}, Data: x}}})
	req, _ := http.NewRequest(http.MethodPost, base+"/predict", bytes.NewReader(body))
	req.Header.Set("X-Request-Id", id)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var answer struct {
		Outputs   tensorJSON `json:"outputs"`
		RequestID string     `json:"request_id"`
		Error     string     `json:"error"`
		Refused   bool       `json:"refused"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return fmt.Errorf("%s: HTTP %d, a body that does not decode: %w", id, resp.StatusCode, err)
	}
	if resp.StatusCode == http.StatusServiceUnavailable && answer.Refused {
		return &refusedError{id: id, message: answer.Error}
	}
	if resp.StatusCode != http.StatusOK || answer.RequestID != id || len(answer.Outputs.Data) != len(x) {
		return fmt.Errorf("%s: HTTP %d: %+v", id, resp.StatusCode, answer)
	}
	for i, v := range x {
		if answer.Outputs.Data[i] != 2*v {
			return fmt.Errorf("%s: %v, want twice %v", id, answer.Outputs.Data, x)
		}
	}
	return nil
}

// outcomes counts what the clients of a load got.
type outcomes struct {
	ok, refused, afterSignal atomic.Int64 // 200; 503 "refused"; no answer, after SIGTERM
}

// TestDrainOnSIGTERM starts the built binary as a process, serving
// stuck.pt (forward(x) = x * 2; sleep(seconds)) from 2 interpreters, and
// checks:
//
//   - /healthz answers 200 from the start, /readyz 200 once it serves;
//   - 8 clients send requests (each answer checked: twice its input), plus
//     one slow request (sleep(3)), and the process gets SIGTERM;
//   - at once /readyz answers 503 while /healthz still answers 200, until
//     the drain ends;
//   - no accepted request fails. A request is accepted when the pool admits
//     its call; it must then be answered 200 with the right outputs. Any
//     other request must be refused before any of it ran: answered 503
//     with "refused": true (the pool draining), or, once the process stops
//     listening, not connected at all (a transport error, only after
//     SIGTERM). The service's own count at exit ("stopped: N answered
//     200, 0 failed, R refused") must equal the clients' counts, so no
//     answer it gave was lost;
//   - the drain finished every call in flight, cancelled none, and the
//     process exits 0 within the grace period.
func TestDrainOnSIGTERM(t *testing.T) {
	dir := archives(t)
	const grace = 20 * time.Second
	p := startBinary(t, "-archive", filepath.Join(dir, "stuck.pt"), "-model-id", "stuck",
		"-interpreters", "2", "-timeout", "20s", "-grace", grace.String())
	cmd, lines, exited, base := p.cmd, p.lines, p.exited, p.base
	client := &http.Client{Timeout: 60 * time.Second}
	// Live while it starts; ready once it serves.
	if status, body := probeStatus(client, base, "/healthz"); status != http.StatusOK {
		t.Errorf("/healthz while starting: %d %s", status, body)
	}
	nextLine(t, lines, "ready: ", exited)
	if status, body := probeStatus(client, base, "/readyz"); status != http.StatusOK || body != "ready" {
		t.Fatalf("/readyz once serving: %d %s", status, body)
	}

	var signalled, paused atomic.Bool
	var got outcomes
	var wg sync.WaitGroup
	stop := make(chan struct{})
	failures := make(chan error, 100)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				for paused.Load() {
					time.Sleep(time.Millisecond)
				}
				id := fmt.Sprintf("load-%d-%d", g, i)
				after := signalled.Load()
				err := checkDoubled(client, base, id, []float64{float64(g), float64(i), -0.5})
				var refused *refusedError
				var transport *url.Error
				switch {
				case err == nil:
					got.ok.Add(1)
				case errors.As(err, &refused):
					got.refused.Add(1)
					if !after && !signalled.Load() {
						failures <- fmt.Errorf("refused before SIGTERM: %v", err)
					}
				case errors.As(err, &transport) && (after || signalled.Load()):
					got.afterSignal.Add(1)
					return // the process is going away
				default:
					failures <- err
					return
				}
			}
		}()
	}
	// Let the load run, then a slow request, in flight when SIGTERM comes:
	// the clients pause until no call is in flight, the slow request is
	// sent, and they go on once it is in flight (admitted).
	time.Sleep(1500 * time.Millisecond)
	paused.Store(true)
	waitInFlight(t, client, base, 0)
	slow := make(chan error, 1)
	go func() {
		raw := []byte(`{"method": "sleep", "kwargs": {"seconds": 3.0}}`)
		status, answer := postJSONErr(client, base, "slow", raw)
		if status != http.StatusOK || !strings.Contains(string(answer), `"outputs":3`) {
			slow <- fmt.Errorf("the slow request: HTTP %d %s", status, answer)
			return
		}
		slow <- nil
	}()
	waitInFlight(t, client, base, 1)
	paused.Store(false)
	time.Sleep(200 * time.Millisecond)
	signalled.Store(true)
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Not ready at once (as soon as the signal is handled), and still
	// live, while the drain runs (the slow request keeps it running).
	for {
		status, why := probeStatus(client, base, "/readyz")
		if status == http.StatusOK && time.Since(sent) < 5*time.Second {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if status != http.StatusServiceUnavailable || why != "stopping" {
			t.Errorf("/readyz %v after SIGTERM: %d %s", time.Since(sent), status, why)
		}
		break
	}
	if status, why := probeStatus(client, base, "/healthz"); status != http.StatusOK {
		t.Errorf("/healthz while draining: %d %s", status, why)
	}
	// A new request while it drains is refused before it runs. (The
	// clients' requests may be too, or, routed to the interpreter the slow
	// call holds, admitted and served once it ends.)
	var refusal *refusedError
	if err := checkDoubled(client, base, "during-drain", []float64{1}); !errors.As(err, &refusal) {
		t.Errorf("a request during the drain: %v", err)
	} else {
		got.refused.Add(1)
	}
	select {
	case err := <-p.waited:
		took := time.Since(sent)
		t.Logf("exited %v after SIGTERM: %v", took.Round(time.Millisecond), err)
		if err != nil {
			t.Errorf("exit: %v", err)
		}
		if took > grace {
			t.Errorf("exited %v after SIGTERM, past the grace of %v", took, grace)
		}
	case <-time.After(grace + 30*time.Second):
		t.Fatal("the process did not exit")
	}
	close(stop)
	wg.Wait()
	close(failures)
	for err := range failures {
		t.Error(err)
	}
	if err := <-slow; err != nil {
		t.Error(err)
	}
	output := p.output()
	t.Logf("clients: %d answered 200, %d refused with 503, %d not connected after SIGTERM\n%s",
		got.ok.Load(), got.refused.Load(), got.afterSignal.Load(), output)

	drained := regexp.MustCompile(`drained in \S+: (\d+) calls finished, (\d+) cancelled`).FindStringSubmatch(output)
	if drained == nil || drained[1] == "0" || drained[2] != "0" {
		t.Errorf("the drain: %v (want calls finished, none cancelled)", drained)
	}
	stopped := regexp.MustCompile(`stopped: (\d+) requests answered 200, (\d+) failed, (\d+) refused`).FindStringSubmatch(output)
	if stopped == nil {
		t.Fatalf("no summary in the output")
	}
	answered, _ := strconv.ParseInt(stopped[1], 10, 64)
	refused, _ := strconv.ParseInt(stopped[3], 10, 64)
	// The clients' 200s, plus the slow request.
	if stopped[2] != "0" || answered != got.ok.Load()+1 || refused != got.refused.Load() {
		t.Errorf("the service says %s answered 200, %s failed, %s refused; the clients got %d + 1 slow, %d refused",
			stopped[1], stopped[2], stopped[3], got.ok.Load(), got.refused.Load())
	}
	if got.ok.Load() == 0 {
		t.Error("no request served")
	}
}

// versionedAnswer is one POST /predict to a Versioned model: the version
// the service says served it, and the values it answered.
func versionedPredict(client *http.Client, base, id string) (string, []float64, error) {
	body := []byte(`{"inputs": [{"shape": [2, 3], "data": [0, 1, 2, 3, 4, 5]}]}`)
	req, _ := http.NewRequest(http.MethodPost, base+"/predict", bytes.NewReader(body))
	req.Header.Set("X-Request-Id", id)
	resp, err := client.Do(req)
	if err != nil {
		return "", nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return "", nil, fmt.Errorf("%s: HTTP %d %s", id, resp.StatusCode, raw)
	}
	var answer struct {
		Outputs tensorJSON `json:"outputs"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil {
		return "", nil, fmt.Errorf("%s: %v: %s", id, err, raw)
	}
	if len(answer.Outputs.Data) != 6 {
		return "", nil, fmt.Errorf("%s: %s", id, raw)
	}
	return resp.Header.Get("X-Model-Version"), answer.Outputs.Data, nil
}

// admin sends a request to the admin port and decodes its JSON.
func admin(client *http.Client, method, url, body string) (int, map[string]any, error) {
	req, _ := http.NewRequest(method, url+"/admin/model", strings.NewReader(body))
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	err = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out, err
}

// TestHotSwapOverHTTP: the service serves version_1.pt (Versioned: forward
// fills x's shape with the version number) while 8 clients call it, and
// every 200 ms, 20 times, POST /admin/model swaps to the other of
// version_1.pt and version_2.pt. No request fails, and each answer's values are the version
// its X-Model-Version says served it. A swap to a file that is not there
// (404) or not an archive (400) leaves the version serving. GET
// /admin/model says which serves.
func TestHotSwapOverHTTP(t *testing.T) {
	dir := archives(t)
	versions := map[string]string{"1": filepath.Join(dir, "version_1.pt"), "2": filepath.Join(dir, "version_2.pt")}
	cfg := config{Archive: versions["1"], ModelID: "versioned", Interpreters: 2, Timeout: 10 * time.Second,
		SampleRate: 0.01, AdminAddr: "127.0.0.1:0"}
	base, adminURL, stop := inProcess(t, cfg)
	client := &http.Client{Timeout: 30 * time.Second}

	status, serving, err := admin(client, http.MethodGet, adminURL, "")
	if err != nil || status != http.StatusOK || serving["version"] != "1" || serving["archive"] != versions["1"] ||
		serving["generation"] != 1.0 {
		t.Fatalf("GET /admin/model: %d %v %v", status, serving, err)
	}

	var wg sync.WaitGroup
	done := make(chan struct{})
	var calls atomic.Int64
	seen := map[string]*atomic.Int64{"1": new(atomic.Int64), "2": new(atomic.Int64)}
	errs := make(chan error, 100)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				label, values, err := versionedPredict(client, base, fmt.Sprintf("swap-%d-%d", g, i))
				if err != nil {
					errs <- err
					return
				}
				counter, ok := seen[label]
				if !ok {
					errs <- fmt.Errorf("X-Model-Version %q", label)
					return
				}
				want, _ := strconv.ParseFloat(label, 64)
				for _, v := range values {
					if v != want {
						errs <- fmt.Errorf("version %s answered %v", label, values)
						return
					}
				}
				counter.Add(1)
				calls.Add(1)
			}
		}()
	}
	// 20 swaps, one every 200 ms (later when a load takes longer).
	const swaps = 20
	next := "2"
	ticker := time.NewTicker(200 * time.Millisecond)
	defer ticker.Stop()
	for swap := 0; swap < swaps; swap++ {
		<-ticker.C
		status, out, err := admin(client, http.MethodPost, adminURL, fmt.Sprintf(`{"archive": %q}`, versions[next]))
		now, _ := out["serving"].(map[string]any)
		if err != nil || status != http.StatusOK || now["version"] != next {
			t.Fatalf("swap %d to version %s: %d %v %v", swap, next, status, out, err)
		}
		next = map[string]string{"1": "2", "2": "1"}[next]
	}
	// Swaps that fail leave the version serving.
	last := map[string]string{"1": "2", "2": "1"}[next]
	for _, c := range []struct {
		body   string
		status int
	}{
		{`{"archive": "/no/such/model.pt"}`, http.StatusNotFound},
		{fmt.Sprintf(`{"archive": %q}`, filepath.Join(dir, "malformed", "not_a_zip.pt")), http.StatusBadRequest},
		{`{"path": "x"}`, http.StatusBadRequest},
		{`{`, http.StatusBadRequest},
	} {
		status, out, err := admin(client, http.MethodPost, adminURL, c.body)
		if err != nil || status != c.status || out["error"] == nil {
			t.Errorf("swap %s: %d %v %v, want %d", c.body, status, out, err, c.status)
		}
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	status, serving, err = admin(client, http.MethodGet, adminURL, "")
	if err != nil || status != http.StatusOK || serving["version"] != last || serving["archive"] != versions[last] ||
		serving["generation"] != float64(swaps+1) {
		t.Errorf("GET /admin/model after %d swaps: %d %v %v, want version %s", swaps, status, serving, err, last)
	}
	if label, values, err := versionedPredict(client, base, "after"); err != nil || label != last || values[0] != float64(label[0]-'0') {
		t.Errorf("after the failed swaps: version %q, %v, %v", label, values, err)
	}
	t.Logf("%d requests over %d swaps: %d by version 1, %d by version 2", calls.Load(), swaps,
		seen["1"].Load(), seen["2"].Load())
	if seen["1"].Load() == 0 || seen["2"].Load() == 0 {
		t.Error("a version served nothing")
	}
	if err := stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
}

// TestDrainGraceRunsOut: a call that outlasts -grace (1 s) is cancelled at
// its end; its request is answered 503 (not "refused": it ran), the drain
// says so, and the process still exits 0, soon after the grace.
func TestDrainGraceRunsOut(t *testing.T) {
	dir := archives(t)
	p := startBinary(t, "-archive", filepath.Join(dir, "python_heavy.pt"), "-interpreters", "1",
		"-timeout", "60s", "-grace", "1s")
	nextLine(t, p.lines, "ready: ", p.exited)
	client := &http.Client{Timeout: 60 * time.Second}
	input := readFloats(t, filepath.Join(dir, "python_heavy.input.bin"))
	endless, _ := json.Marshal(map[string]any{
		"inputs": []tensorJSON{{Shape: []int64{4, 64}, Data: input}},
		"kwargs": map[string]any{"steps": 100_000_000},
	})
	type answer struct {
		status int
		body   []byte
	}
	answered := make(chan answer, 1)
	go func() {
		status, body := postJSONErr(client, p.base, "endless", endless)
		answered <- answer{status, body}
	}()
	waitInFlight(t, client, p.base, 1)
	sent := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.waited:
		took := time.Since(sent)
		t.Logf("exited %v after SIGTERM: %v\n%s", took.Round(time.Millisecond), err, p.output())
		if err != nil || took > 10*time.Second {
			t.Errorf("exit %v, %v after SIGTERM", err, took)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the process did not exit")
	}
	a := <-answered
	var body errorBody
	if err := json.Unmarshal(a.body, &body); err != nil || a.status != http.StatusServiceUnavailable || body.Refused ||
		!strings.Contains(body.Error, "MANYPY_ERR_CANCELLED") || !strings.Contains(body.Error, "manypy_pool_drain") {
		t.Errorf("the endless request: HTTP %d %s", a.status, a.body)
	}
	output := p.output()
	if !regexp.MustCompile(`drained in \S+: 0 calls finished, 1 cancelled`).MatchString(output) ||
		!strings.Contains(output, "stopped: 0 requests answered 200, 1 failed, 0 refused") {
		t.Errorf("the output:\n%s", output)
	}
}
