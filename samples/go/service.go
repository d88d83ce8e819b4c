package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"manypy.dev/manypy"
	"manypy.dev/manypy/manypyprom"
)

// config is what the service serves and how.
type config struct {
	Archive      string // a torch.package; model/model.pkl is called
	ModelID      string // reported to the profiler, callbacks and request metrics
	PoolName     string // the pool label of the manypy_* request metrics ("": none)
	Interpreters int    // the pool's size
	// MinServing is the capacity /readyz asks for: at least this many
	// interpreters ready or busy (at least 1). Below it (interpreters
	// lost or retired, or still starting) the pod takes no traffic.
	MinServing int
	// MaxInterpreters lets the pool grow, when calls wait, up to this many
	// (0: no growth).
	MaxInterpreters int
	ThreadMode      manypy.ThreadMode
	Timeout         time.Duration // each request's call deadline
	SampleRate      float64       // the profiler's sampling probability
	// QueueLimit bounds the calls waiting for an interpreter (0: no
	// bound); past it a request is refused at once with 503.
	QueueLimit int
	// Batch > 0 puts a manypy.Batcher of up to Batch rows, waiting up to
	// BatchWait for a batch to fill, in front of the model's forward: the
	// requests without a method are batched. Only for a model whose rows
	// are independent (resnet18.pt; not python_heavy.pt, whose branch on
	// the mean of the whole batch would change with the batch).
	Batch     int
	BatchWait time.Duration
	// Grace bounds the drain after SIGTERM: the calls still running then
	// are cancelled (main.go, run).
	Grace time.Duration
	// AdminAddr is where GET and POST /admin/model are served ("": not
	// at all). Loading an archive runs its code: keep it off the network
	// the service is reachable from.
	AdminAddr string
}

// service owns the pool, the model version serving, the profiler and the
// metrics registry. Its pool and first version come from start, after the
// port is open, so that /healthz answers while the pool starts.
type service struct {
	cfg      config
	pool     atomic.Pointer[manypy.Pool] // nil until start has made it
	profiler *manypy.Profiler
	registry *prometheus.Registry
	requests *prometheus.CounterVec

	mu      sync.Mutex // guards current
	current *version
	swapMu  sync.Mutex // one swap at a time
	swaps   atomic.Int64

	// stopping turns readiness off at once on SIGTERM, before the drain.
	stopping atomic.Bool
	// What became of the POST /predict requests: answered 200, refused
	// before anything ran (not ready, draining, overloaded: safe to retry
	// elsewhere), or failed otherwise. Printed when the service stops.
	answeredOK, failed, refused atomic.Int64
}

// version is one loaded version of the model. Requests hold it while they
// call it, so that a swap can replace it at any time: the old version is
// closed when its last request ends (refs drops to 0).
type version struct {
	Archive    string    `json:"archive"`
	Label      string    `json:"version"` // X-Model-Version: the model's version() if it has one, else the file name
	Generation int64     `json:"generation"`
	LoadedAt   time.Time `json:"loaded_at"`
	model      *manypy.Object
	batcher    *manypy.Batcher // nil unless cfg.Batch > 0
	refs       atomic.Int64    // 1 while current, plus 1 per request holding it
}

func (v *version) release() {
	if v.refs.Add(-1) == 0 {
		if v.batcher != nil {
			v.batcher.Close() // what it accepted completes first
		}
		v.model.Close()
	}
}

func newService(cfg config) (*service, error) {
	s := &service{cfg: cfg, registry: prometheus.NewRegistry()}
	var err error
	if s.profiler, err = manypy.StartProfiler(cfg.SampleRate); err != nil {
		return nil, err
	}
	s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "predict_requests_total", Help: "POST /predict requests by HTTP status.",
	}, []string{"code"})
	s.registry.MustRegister(manypyprom.NewCollector(s.profiler), s.requests, collectors.NewGoCollector())
	return s, nil
}

// start creates the pool, serving as soon as its first interpreter has
// started (the others start in the background), and loads the first
// version of the model.
func (s *service) start() error {
	pool, err := manypy.NewPool(manypy.PoolOptions{Interpreters: s.cfg.Interpreters, ThreadMode: s.cfg.ThreadMode,
		MaxInterpreters: s.cfg.MaxInterpreters, QueueLimit: s.cfg.QueueLimit, ServeEarly: true, Name: s.cfg.PoolName,
		OnInterpreterFailed: func(index int, err error) {
			log.Printf("interpreter %d failed to start: %v", index, err)
		}})
	if err != nil {
		return err
	}
	s.pool.Store(pool)
	s.registry.MustRegister(manypyprom.NewServingCollector(pool))
	_, _, err = s.swap(s.cfg.Archive)
	return err
}

// close frees what the service holds, in any state.
func (s *service) close() {
	s.mu.Lock()
	v := s.current
	s.current = nil
	s.mu.Unlock()
	if v != nil {
		v.release()
	}
	if pool := s.pool.Load(); pool != nil {
		pool.Close()
	}
	s.profiler.Close()
}

// acquire holds the version serving now (nil before the first is loaded).
func (s *service) acquire() *version {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current != nil {
		s.current.refs.Add(1)
	}
	return s.current
}

// load loads a version of the model from archive, beside the one serving.
func (s *service) load(archive string) (*version, error) {
	pool := s.pool.Load()
	if pool == nil {
		return nil, errors.New("the pool is not started")
	}
	pkg, err := pool.LoadPackage(archive)
	if err != nil {
		return nil, err
	}
	defer pkg.Close() // the model keeps it
	v := &version{Archive: archive, LoadedAt: time.Now()}
	if v.model, err = pkg.LoadPickle("model", "model.pkl"); err != nil {
		return nil, err
	}
	v.Label, err = versionLabel(v.model, archive, s.cfg.Timeout)
	if err == nil && s.cfg.Batch > 0 {
		v.batcher, err = v.model.NewBatcher("", manypy.BatcherOptions{MaxBatch: s.cfg.Batch,
			MaxWait: s.cfg.BatchWait, Name: s.cfg.ModelID})
	}
	if err != nil {
		v.model.Close()
		return nil, err
	}
	return v, nil
}

// versionLabel is what the model's version() method returns, if it has
// one, else the archive's file name.
func versionLabel(model *manypy.Object, archive string, timeout time.Duration) (string, error) {
	has, err := model.HasAttr("version")
	if err != nil || !has {
		return fileName(archive), err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	v, err := model.CallMethod(ctx, "version")
	if err != nil {
		return "", fmt.Errorf("the model's version(): %w", err)
	}
	return fmt.Sprint(v), nil
}

// swap loads archive and makes it the version serving: requests that
// start after it returns call the new version, those running go on with
// the old one, which is closed when the last of them ends. A load that
// fails leaves the old version serving.
func (s *service) swap(archive string) (now, before *version, err error) {
	s.swapMu.Lock()
	defer s.swapMu.Unlock()
	if s.stopping.Load() {
		return nil, nil, manypy.ErrDraining
	}
	v, err := s.load(archive)
	if err != nil {
		return nil, nil, err
	}
	v.Generation = s.swaps.Add(1)
	v.refs.Store(1)
	s.mu.Lock()
	old := s.current
	s.current = v
	s.mu.Unlock()
	if old != nil {
		old.release()
	}
	return v, old, nil
}

// readiness is what /readyz answers: the service can take requests (the
// model is loaded, at least MinServing interpreters are ready or busy, the
// pool is not draining) and is not stopping.
func (s *service) readiness() (bool, string) {
	if s.stopping.Load() {
		return false, "stopping"
	}
	pool := s.pool.Load()
	if pool == nil || !s.loaded() {
		return false, "starting"
	}
	stats, err := pool.Stats()
	if err != nil {
		return false, err.Error()
	}
	return ready(stats, s.cfg.MinServing)
}

// ready is readiness once the model is loaded: the pool serves with at
// least min interpreters (PoolStats.ServingAtLeast).
func ready(stats manypy.PoolStats, min int) (bool, string) {
	if !stats.ServingAtLeast(min) {
		return false, fmt.Sprintf("not serving: %d of %d interpreters serve, at least %d needed "+
			"(%d starting, %d broken, %d lost), draining %v", stats.Ready+stats.Busy,
			stats.Interpreters, max(min, 1), stats.Starting, stats.Broken, stats.Lost, stats.Draining)
	}
	return true, "ready"
}

// loaded tells whether a version of the model is loaded.
func (s *service) loaded() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current != nil
}

func fileName(path string) string { return filepath.Base(path) }

// liveness is what /healthz answers: the process serves HTTP, unless every
// interpreter of its pool is broken or lost. Retired interpreters never
// serve again in the process, so only a restart helps then (docs/go.md,
// "Stops and retired interpreters"); a lost one serves again only if the
// call stuck in it ends, which the probe's failure threshold gives time to
// (docs/serving.md, "Readiness, liveness and restarts").
func liveness(stats manypy.PoolStats) (bool, string) {
	if stats.Interpreters > 0 && stats.Broken+stats.Lost == stats.Interpreters {
		return false, fmt.Sprintf("all %d interpreters are broken (%d) or lost (%d): restart the process",
			stats.Interpreters, stats.Broken, stats.Lost)
	}
	return true, "ok"
}

func (s *service) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /predict", s.predict)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		ok, why := true, "ok"
		if pool := s.pool.Load(); pool != nil {
			if stats, err := pool.Stats(); err == nil {
				ok, why = liveness(stats)
			}
		}
		probe(w, ok, why)
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ok, why := s.readiness()
		probe(w, ok, why)
	})
	return mux
}

func probe(w http.ResponseWriter, ok bool, why string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	fmt.Fprintln(w, why)
}

// adminHandler serves the model version: GET /admin/model says which
// serves, POST /admin/model {"archive": "/path/to/model.pt"} swaps to
// another (hot swap: no request fails or waits for it).
func (s *service) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /admin/model", func(w http.ResponseWriter, r *http.Request) {
		v := s.acquire()
		if v == nil {
			writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: "no model loaded yet"})
			return
		}
		defer v.release()
		writeJSON(w, http.StatusOK, v)
	})
	mux.HandleFunc("POST /admin/model", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Archive string `json:"archive"`
		}
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || req.Archive == "" {
			writeJSON(w, http.StatusBadRequest, errorBody{Error: fmt.Sprintf(
				`want {"archive": "/path/to/model.pt"} (%v)`, err)})
			return
		}
		now, before, err := s.swap(req.Archive)
		if err != nil {
			writeJSON(w, swapStatus(err), errorBody{Error: err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, struct {
			Serving  *version `json:"serving"`
			Replaced *version `json:"replaced"`
		}{now, before})
	})
	return mux
}

// swapStatus maps a failed swap to an HTTP status: the old version serves
// on in every case.
func swapStatus(err error) int {
	switch {
	case errors.Is(err, manypy.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, manypy.ErrDraining):
		return http.StatusServiceUnavailable
	case errors.Is(err, manypy.ErrBadArchive), errors.Is(err, manypy.ErrNotAPackage),
		errors.Is(err, manypy.ErrUnsupportedVersion), errors.Is(err, manypy.ErrUntrustedArchive),
		errors.Is(err, manypy.ErrModuleNotFound), errors.Is(err, manypy.ErrPython),
		errors.Is(err, manypy.ErrInvalidArgument):
		return http.StatusBadRequest
	default:
		return http.StatusInternalServerError
	}
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// predict: JSON in (predictRequest), JSON out (predictResponse). Many
// requests run at once, each on a goroutine of net/http; the pool spreads
// them over its interpreters. The answer's X-Model-Version and
// X-Model-Generation headers say which version served it.
func (s *service) predict(w http.ResponseWriter, r *http.Request) {
	status, body := s.serve(w, r)
	s.requests.WithLabelValues(strconv.Itoa(status)).Inc()
	if e, ok := body.(errorBody); ok && e.Refused {
		s.refused.Add(1)
	} else if status == http.StatusOK {
		s.answeredOK.Add(1)
	} else {
		s.failed.Add(1)
	}
	writeJSON(w, status, body)
}

func (s *service) serve(w http.ResponseWriter, r *http.Request) (int, any) {
	requestID := r.Header.Get("X-Request-Id")
	v := s.acquire()
	if v == nil {
		return http.StatusServiceUnavailable, errorBody{Error: "not ready: the model is loading",
			RequestID: requestID, Refused: true}
	}
	defer v.release()
	w.Header().Set("X-Model-Version", v.Label)
	w.Header().Set("X-Model-Generation", strconv.FormatInt(v.Generation, 10))
	req, err := decodeRequest(r.Body)
	if err != nil {
		return http.StatusBadRequest, errorBody{Error: err.Error(), RequestID: requestID}
	}
	defer req.close()
	// The request's deadline is the call's: a model that runs past it is
	// stopped in its interpreter, which goes on serving unless the model
	// catches the stop (then the interpreter is retired and the pool serves
	// on the others). A client that goes away cancels the call the same
	// way (r.Context()).
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	ctx = manypy.WithCallOptions(ctx, manypy.CallOptions{ModelID: s.cfg.ModelID, RequestID: requestID})
	var out any
	if v.batcher != nil && req.Method == "" {
		// Concurrent requests share one forward call: each brings its rows
		// and gets its own rows back.
		out, err = v.batcher.CallKw(ctx, req.args, req.kwargs)
	} else {
		out, err = v.model.CallKw(ctx, req.Method, req.args, req.kwargs)
	}
	if err != nil {
		status := statusOf(err)
		if errors.Is(err, manypy.ErrCancelled) && ctx.Err() == nil {
			// Cancelled, though neither the client nor the deadline did:
			// the drain's grace ran out while the call ran.
			status = http.StatusServiceUnavailable
		}
		return status, errorBody{Error: err.Error(), RequestID: requestID, Refused: refusal(err)}
	}
	result, err := encodeResult(out)
	if err != nil {
		return http.StatusInternalServerError, errorBody{Error: err.Error(), RequestID: requestID}
	}
	return http.StatusOK, predictResponse{Outputs: result, RequestID: requestID}
}

// refusal tells whether a call's error refused it before it ran: the pool
// was draining or its queue was full. Such a request may be retried
// elsewhere.
func refusal(err error) bool {
	return errors.Is(err, manypy.ErrDraining) || errors.Is(err, manypy.ErrOverloaded)
}

// statusOf maps a call's error to an HTTP status.
func statusOf(err error) int {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	case errors.Is(err, context.Canceled):
		return 499 // the client closed the request (nginx's convention)
	case errors.Is(err, manypy.ErrInterpreterBroken):
		// No interpreter of the pool can serve: a model that caught its
		// stops retired them (Pool.CheckInterpreter says why).
		return http.StatusServiceUnavailable
	case errors.Is(err, manypy.ErrOverloaded):
		// The pool's queue is full (-queue-limit): refused at once, so the
		// client (or its load balancer) can try elsewhere or later.
		return http.StatusServiceUnavailable
	case errors.Is(err, manypy.ErrDraining):
		// The service is stopping (SIGTERM): refused at once, before
		// running; another replica serves it.
		return http.StatusServiceUnavailable
	case errors.Is(err, manypy.ErrPython), errors.Is(err, manypy.ErrInvalidArgument),
		errors.Is(err, manypy.ErrNoSuchName), errors.Is(err, manypy.ErrBadTensor):
		return http.StatusBadRequest
	default:
		return http.StatusInternalServerError
	}
}
