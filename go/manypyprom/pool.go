package manypyprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"manypy.dev/manypy"
)

// PoolCollector is a prometheus.Collector over a pool's load: the gauges
// manypy_pool_queued_calls (calls waiting for an interpreter, what
// manypy.PoolOptions.QueueLimit bounds) and manypy_pool_in_flight_calls
// (calls admitted and not yet complete, waiting or running), read at each
// scrape (manypy.Pool.Queued and InFlight), with the constant label pool.
// Safe for concurrent scrapes. It does not own the pool: a closed pool
// reports 0 for both.
//
// Deprecated: use ServingCollector, which reports the same two gauges as
// manypy_queued_requests and manypy_inflight_requests, named as the C
// library's text (manypy.Pool.PrometheusText) names them, with the
// requests, their durations and the interpreters' states. PoolCollector
// keeps its names for dashboards built on them; registering both exports
// the two numbers twice.
type PoolCollector struct {
	pool     *manypy.Pool
	queued   *prometheus.Desc
	inFlight *prometheus.Desc
}

// NewPoolCollector returns a collector over pool, labelled pool=name (a
// process may serve several pools).
func NewPoolCollector(pool *manypy.Pool, name string) *PoolCollector {
	labels := prometheus.Labels{"pool": name}
	return &PoolCollector{
		pool: pool,
		queued: prometheus.NewDesc("manypy_pool_queued_calls",
			"Calls waiting for an interpreter of the pool (what its queue limit bounds).", nil, labels),
		inFlight: prometheus.NewDesc("manypy_pool_in_flight_calls",
			"Calls admitted to the pool and not yet complete, waiting or running.", nil, labels),
	}
}

// Describe implements prometheus.Collector.
func (c *PoolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.queued
	ch <- c.inFlight
}

// Collect implements prometheus.Collector.
func (c *PoolCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(c.pool.Queued()))
	ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(c.pool.InFlight()))
}
