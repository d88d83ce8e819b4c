package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
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
	ModelID      string // reported to the profiler and callbacks
	Interpreters int    // the pool's size
	ThreadMode   manypy.ThreadMode
	Timeout      time.Duration // each request's call deadline
	SampleRate   float64       // the profiler's sampling probability
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
}

// service owns the pool, the model, the profiler and the metrics registry.
type service struct {
	cfg      config
	pool     *manypy.Pool
	model    *manypy.Object
	batcher  *manypy.Batcher // nil unless cfg.Batch > 0
	profiler *manypy.Profiler
	registry *prometheus.Registry
	requests *prometheus.CounterVec
}

func newService(cfg config) (*service, error) {
	pool, err := manypy.NewPool(manypy.PoolOptions{Interpreters: cfg.Interpreters, ThreadMode: cfg.ThreadMode,
		QueueLimit: cfg.QueueLimit})
	if err != nil {
		return nil, err
	}
	s := &service{cfg: cfg, pool: pool}
	if err := s.load(); err != nil {
		s.close()
		return nil, err
	}
	s.registry = prometheus.NewRegistry()
	s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "predict_requests_total", Help: "POST /predict requests by HTTP status.",
	}, []string{"code"})
	s.registry.MustRegister(manypyprom.NewCollector(s.profiler), manypyprom.NewPoolCollector(pool, cfg.ModelID),
		s.requests, collectors.NewGoCollector())
	return s, nil
}

func (s *service) load() error {
	pkg, err := s.pool.LoadPackage(s.cfg.Archive)
	if err != nil {
		return err
	}
	defer pkg.Close() // the model keeps it
	if s.model, err = pkg.LoadPickle("model", "model.pkl"); err != nil {
		return err
	}
	if s.cfg.Batch > 0 {
		s.batcher, err = s.model.NewBatcher("", manypy.BatcherOptions{MaxBatch: s.cfg.Batch,
			MaxWait: s.cfg.BatchWait, Name: s.cfg.ModelID})
		if err != nil {
			return err
		}
	}
	// Starts every interpreter (each imports torch, about a second) before
	// the port opens, so that no request waits for one.
	if err := s.pool.ExecAll("import torch"); err != nil {
		return err
	}
	s.profiler, err = manypy.StartProfiler(s.cfg.SampleRate)
	return err
}

func (s *service) close() {
	if s.profiler != nil {
		s.profiler.Close()
	}
	if s.batcher != nil {
		s.batcher.Close()
	}
	if s.model != nil {
		s.model.Close()
	}
	s.pool.Close()
}

func (s *service) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /predict", s.predict)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}))
	return mux
}

// predict: JSON in (predictRequest), JSON out (predictResponse). Many
// requests run at once, each on a goroutine of net/http; the pool spreads
// them over its interpreters.
func (s *service) predict(w http.ResponseWriter, r *http.Request) {
	status, body := s.serve(r)
	s.requests.WithLabelValues(fmt.Sprint(status)).Inc()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func (s *service) serve(r *http.Request) (int, any) {
	requestID := r.Header.Get("X-Request-Id")
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
	if s.batcher != nil && req.Method == "" {
		// Concurrent requests share one forward call: each brings its rows
		// and gets its own rows back.
		out, err = s.batcher.CallKw(ctx, req.args, req.kwargs)
	} else {
		out, err = s.model.CallKw(ctx, req.Method, req.args, req.kwargs)
	}
	if err != nil {
		return statusOf(err), errorBody{Error: err.Error(), RequestID: requestID}
	}
	result, err := encodeResult(out)
	if err != nil {
		return http.StatusInternalServerError, errorBody{Error: err.Error(), RequestID: requestID}
	}
	return http.StatusOK, predictResponse{Outputs: result, RequestID: requestID}
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
	case errors.Is(err, manypy.ErrPython), errors.Is(err, manypy.ErrInvalidArgument),
		errors.Is(err, manypy.ErrNoSuchName), errors.Is(err, manypy.ErrBadTensor):
		return http.StatusBadRequest
	default:
		return http.StatusInternalServerError
	}
}
