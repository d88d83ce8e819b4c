package manypyprom

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"manypy.dev/manypy"
)

// ServingCollector is a prometheus.Collector over a pool's standard
// request metrics and health, the series the C library writes
// (manypy.Pool.PrometheusText, manypy_pool_prometheus), with the same
// names, labels and help:
//
//	manypy_requests_total{model,code}           counter: calls completed or refused
//	manypy_request_duration_seconds{model}      histogram: admission to completion
//	manypy_queue_duration_seconds{model}        histogram: admission until running
//	manypy_inflight_requests                    gauge: calls admitted and not complete
//	manypy_queued_requests                      gauge: calls waiting for an interpreter
//	manypy_interpreters{state}                  gauge: starting, ready, busy, broken
//	manypy_draining                             gauge: 1 once the pool drains
//	manypy_interpreters_replaced_total          counter: retired interpreters replaced
//	manypy_replacement_no_room                  gauge: 1 while one waits for room
//
// model is the calls' manypy.CallOptions.ModelID ("" without one); code is
// the status code's C name in lower case without MANYPY_ERR_ (or
// MANYPY_): "ok", "python", "deadline_exceeded", "overloaded",
// "draining". The histograms have the library's buckets (100 us to 10 s).
// Every series carries the constant label pool="<name>" when the pool has
// a name (manypy.PoolOptions.Name), as in the C text.
//
// It reads the pool at each scrape (Pool.Stats, Pool.RequestMetrics). Safe
// for concurrent scrapes. It does not own the pool: once the pool is
// closed a scrape reports an invalid metric, which client_golang turns into
// a scrape error; unregister it first.
//
// It supersedes PoolCollector, whose manypy_pool_queued_calls and
// manypy_pool_in_flight_calls are manypy_queued_requests and
// manypy_inflight_requests here. The names differ, so both may be
// registered on one registry, but they would export the same two numbers
// twice: register one.
type ServingCollector struct {
	pool                            *manypy.Pool
	requests, requestDuration       *prometheus.Desc
	queueDuration, inFlight, queued *prometheus.Desc
	interpreters, draining          *prometheus.Desc
	replaced, noRoom                *prometheus.Desc
}

// NewServingCollector returns a collector over pool, labelled with its
// name (manypy.PoolOptions.Name) when it has one.
func NewServingCollector(pool *manypy.Pool) *ServingCollector {
	var labels prometheus.Labels
	if name := pool.Name(); name != "" {
		labels = prometheus.Labels{"pool": name}
	}
	desc := func(name, help string, variable ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, variable, labels)
	}
	// The help texts are the C library's (core/src/request_metrics.cpp).
	return &ServingCollector{
		pool:     pool,
		requests: desc("manypy_requests_total", "Calls completed or refused, by model and status code.", "model", "code"),
		requestDuration: desc("manypy_request_duration_seconds",
			"Time from admission to completion.", "model"),
		queueDuration: desc("manypy_queue_duration_seconds",
			"Time from admission until the call began running in its interpreter.", "model"),
		inFlight:     desc("manypy_inflight_requests", "Calls admitted and not complete."),
		queued:       desc("manypy_queued_requests", "Calls waiting for an interpreter."),
		interpreters: desc("manypy_interpreters", "The pool's interpreters by state.", "state"),
		draining:     desc("manypy_draining", "1 once the pool drains (manypy_pool_drain)."),
		replaced: desc("manypy_interpreters_replaced_total",
			"Retired interpreters the pool replaced with new ones."),
		noRoom: desc("manypy_replacement_no_room",
			"1 while a retired interpreter could not be replaced for want of room in the process."),
	}
}

// Describe implements prometheus.Collector.
func (c *ServingCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.requests, c.requestDuration, c.queueDuration, c.inFlight,
		c.queued, c.interpreters, c.draining, c.replaced, c.noRoom} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *ServingCollector) Collect(ch chan<- prometheus.Metric) {
	// Stats first, then the requests, as the C text reads them.
	stats, err := c.pool.Stats()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.inFlight, err)
		return
	}
	metrics, err := c.pool.RequestMetrics()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.requests, err)
		return
	}
	for _, m := range metrics {
		// Codes this package does not know share the label "unknown".
		byLabel := make(map[string]uint64, len(m.Completed))
		for code, n := range m.Completed {
			byLabel[CodeLabel(code)] += n
		}
		for code, n := range byLabel {
			ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue, float64(n), m.Model, code)
		}
		ch <- constHistogram(c.requestDuration, m.Request, m.Model)
		ch <- constHistogram(c.queueDuration, m.Queue, m.Model)
	}
	gauge := func(d *prometheus.Desc, v int, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	gauge(c.inFlight, stats.InFlight)
	gauge(c.queued, stats.Queued)
	gauge(c.interpreters, stats.Starting, "starting")
	gauge(c.interpreters, stats.Ready, "ready")
	gauge(c.interpreters, stats.Busy, "busy")
	gauge(c.interpreters, stats.Broken, "broken")
	gauge(c.interpreters, stats.Lost, "lost")
	draining := 0
	if stats.Draining {
		draining = 1
	}
	gauge(c.draining, draining)
	ch <- prometheus.MustNewConstMetric(c.replaced, prometheus.CounterValue, float64(stats.Replaced))
	noRoom := 0
	if stats.NoRoom {
		noRoom = 1
	}
	gauge(c.noRoom, noRoom)
}

func constHistogram(d *prometheus.Desc, h manypy.Histogram, model string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.Buckets))
	for _, b := range h.Buckets {
		buckets[b.UpperBound] = b.Count
	}
	return prometheus.MustNewConstHistogram(d, h.Count, h.Sum, buckets, model)
}

// CodeLabel is a status code as the label code of manypy_requests_total:
// its C name in lower case, without MANYPY_ERR_ (or MANYPY_), e.g. "ok",
// "python", "deadline_exceeded"; "unknown" for a code this package does
// not know, as the C library writes it.
func CodeLabel(code manypy.Code) string {
	name := code.String()
	if strings.HasPrefix(name, "MANYPY_UNKNOWN") {
		return "unknown"
	}
	name = strings.TrimPrefix(name, "MANYPY_ERR_")
	name = strings.TrimPrefix(name, "MANYPY_")
	return strings.ToLower(name)
}
