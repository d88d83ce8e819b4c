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
// probability p they are about p times the operators run. It also reports
// the histogram manypy_batch_size{batcher} of the batch sizes (in rows)
// that manypy.Batcher formed, as the profiler's text has it.
//
// NewServingCollector reports a pool's standard request metrics and
// health, the series of the C library's manypy_pool_prometheus:
// manypy_requests_total{model,code}, the histograms
// manypy_request_duration_seconds{model} and
// manypy_queue_duration_seconds{model}, the gauges manypy_inflight_requests,
// manypy_queued_requests, manypy_interpreters{state} and manypy_draining.
//
//	registry.MustRegister(manypyprom.NewServingCollector(pool))
//
// NewPoolCollector, from before it, reports a pool's load as the gauges
// manypy_pool_queued_calls and manypy_pool_in_flight_calls; the serving
// collector has the same two numbers, so register one or the other.
package manypyprom

import (
	"fmt"
	"math"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"manypy.dev/manypy"
)

// Collector is a prometheus.Collector over a manypy.Profiler. Safe for
// concurrent scrapes. It does not own the profiler: close the profiler
// after unregistering the collector (a scrape of a closed profiler reports
// an invalid metric, which client_golang turns into a scrape error).
type Collector struct {
	profiler  *manypy.Profiler
	duration  *prometheus.Desc
	batchSize *prometheus.Desc
}

// NewCollector returns a collector over profiler.
func NewCollector(profiler *manypy.Profiler) *Collector {
	return &Collector{
		profiler: profiler,
		duration: prometheus.NewDesc("manypy_operator_duration_seconds",
			"Duration of sampled torch operators run by manypy interpreters and TorchScript on the host.",
			[]string{"model", "operator"}, nil),
		batchSize: prometheus.NewDesc(batchSizeName,
			"Rows in the batches formed by manypy batchers.", []string{"batcher"}, nil),
	}
}

// The profiler's histogram of batch sizes (manypy_profiler_prometheus).
const batchSizeName = "manypy_batch_size"

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.duration
	ch <- c.batchSize
}

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
	c.collectBatchSizes(ch)
}

// collectBatchSizes reports the profiler's batch size histograms. The
// C API has them only in its text format, which is parsed here with
// Prometheus's own parser.
func (c *Collector) collectBatchSizes(ch chan<- prometheus.Metric) {
	text, err := c.profiler.Prometheus()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.batchSize, err)
		return
	}
	if !strings.Contains(text, batchSizeName) {
		return // no batcher has formed a batch
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.batchSize, fmt.Errorf("the profiler's text: %w", err))
		return
	}
	for _, m := range families[batchSizeName].GetMetric() {
		h := m.GetHistogram()
		if h == nil {
			continue
		}
		buckets := make(map[float64]uint64, len(h.GetBucket()))
		for _, b := range h.GetBucket() {
			if !math.IsInf(b.GetUpperBound(), 1) { // +Inf is the count
				buckets[b.GetUpperBound()] = b.GetCumulativeCount()
			}
		}
		batcher := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == "batcher" {
				batcher = l.GetValue()
			}
		}
		metric, err := prometheus.NewConstHistogram(c.batchSize, h.GetSampleCount(), h.GetSampleSum(),
			buckets, batcher)
		if err != nil {
			metric = prometheus.NewInvalidMetric(c.batchSize, err)
		}
		ch <- metric
	}
}
