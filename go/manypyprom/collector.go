// Package manypyprom exposes manypy's built-in profiler to a
// github.com/prometheus/client_golang registry: a service registers a
// Collector on the registry it already serves, instead of pasting
// Profiler.Prometheus text into its own handler.
//
//	prof, _ := manypy.StartProfiler(0.01)
//	registry.MustRegister(manypyprom.NewCollector(prof))
//
// Each scrape takes one Profiler.Snapshot and reports, per (model,
// operator), the summary manypy_operator_duration_seconds: count and sum of
// the sampled calls, and the 0.5 and 0.99 quantiles over the latest 4096
// samples of the pair. Counts are of sampled operators, so at a sampling
// probability p they are about p times the operators run.
package manypyprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"manypy.dev/manypy"
)

// Collector is a prometheus.Collector over a manypy.Profiler. Safe for
// concurrent scrapes. It does not own the profiler: close the profiler
// after unregistering the collector (a scrape of a closed profiler reports
// an invalid metric, which client_golang turns into a scrape error).
type Collector struct {
	profiler *manypy.Profiler
	duration *prometheus.Desc
}

// NewCollector returns a collector over profiler.
func NewCollector(profiler *manypy.Profiler) *Collector {
	return &Collector{
		profiler: profiler,
		duration: prometheus.NewDesc("manypy_operator_duration_seconds",
			"Duration of sampled torch operators run by manypy interpreters and TorchScript on the host.",
			[]string{"model", "operator"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) { ch <- c.duration }

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	entries, err := c.profiler.Snapshot()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.duration, err)
		return
	}
	for _, e := range entries {
		ch <- prometheus.MustNewConstSummary(c.duration, e.Count, float64(e.TotalNS)/1e9,
			map[float64]float64{0.5: float64(e.P50NS) / 1e9, 0.99: float64(e.P99NS) / 1e9},
			e.ModelID, e.Operator)
	}
}
