//! A [`prometheus`] crate [`Collector`] for a manypy [`Pool`]: the pool's
//! standard request metrics, read from the pool at each scrape, under the
//! names and labels of the C library's own exposition
//! (`manypy_pool_prometheus`, [`Pool::prometheus_text`]):
//!
//! | metric | type | labels |
//! | --- | --- | --- |
//! | `manypy_requests_total` | counter | `model`, `code` (`"ok"`, `"python"`, `"deadline_exceeded"`, ...: [`manypy::code_label`]) |
//! | `manypy_request_duration_seconds` | histogram | `model` |
//! | `manypy_queue_duration_seconds` | histogram | `model` |
//! | `manypy_inflight_requests` | gauge | |
//! | `manypy_queued_requests` | gauge | |
//! | `manypy_interpreters` | gauge | `state` (`starting`, `ready`, `busy`, `broken`, `lost`) |
//! | `manypy_draining` | gauge | |
//! | `manypy_interpreters_replaced_total` | counter | |
//! | `manypy_replacement_no_room` | gauge | |
//!
//! Every series also carries the constant label `pool` when the collector
//! has one: by default the pool's name ([`manypy::PoolBuilder::name`]), as
//! in the C exposition. A call's `model` is the model id of its context
//! ([`manypy::CallOptionsBuilder::context`]), `""` without one. The
//! histograms' buckets are the C library's (0.1 ms to 10 s).
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use manypy::Pool;
//! use manypy_prometheus::PoolCollector;
//! use prometheus::{Encoder, Registry, TextEncoder};
//!
//! let pool = Pool::builder().interpreters(4).name("ranker").build()?;
//! let registry = Registry::new();
//! registry.register(Box::new(PoolCollector::new(&pool)?))?;
//! // At each scrape:
//! let mut text = Vec::new();
//! TextEncoder::new().encode(&registry.gather(), &mut text)?;
//! # Ok(()) }
//! ```
//!
//! The collector holds a clone of the pool, so a registered collector keeps
//! its pool alive: unregister it to let the pool go. Several pools in one
//! registry need a `pool` label each (name them), or registration fails
//! with `AlreadyReg`.
use std::collections::HashMap;

use manypy::{code_label, Pool, PoolStats, RequestMetrics};
use prometheus::core::{Collector, Desc};
use prometheus::proto::{
    Bucket, Counter, Gauge, Histogram, LabelPair, Metric, MetricFamily, MetricType,
};

const REQUESTS: &str = "manypy_requests_total";
const REQUEST_DURATION: &str = "manypy_request_duration_seconds";
const QUEUE_DURATION: &str = "manypy_queue_duration_seconds";
const INFLIGHT: &str = "manypy_inflight_requests";
const QUEUED: &str = "manypy_queued_requests";
const INTERPRETERS: &str = "manypy_interpreters";
const DRAINING: &str = "manypy_draining";
const REPLACED: &str = "manypy_interpreters_replaced_total";
const NO_ROOM: &str = "manypy_replacement_no_room";

/// The families: name, help (the C library's), type and variable labels.
const FAMILIES: [(&str, &str, MetricType, &[&str]); 9] = [
    (
        REQUESTS,
        "Calls completed or refused, by model and status code.",
        MetricType::COUNTER,
        &["model", "code"],
    ),
    (
        REQUEST_DURATION,
        "Time from admission to completion.",
        MetricType::HISTOGRAM,
        &["model"],
    ),
    (
        QUEUE_DURATION,
        "Time from admission until the call began running in its interpreter.",
        MetricType::HISTOGRAM,
        &["model"],
    ),
    (
        INFLIGHT,
        "Calls admitted and not complete.",
        MetricType::GAUGE,
        &[],
    ),
    (
        QUEUED,
        "Calls waiting for an interpreter.",
        MetricType::GAUGE,
        &[],
    ),
    (
        INTERPRETERS,
        "The pool's interpreters by state.",
        MetricType::GAUGE,
        &["state"],
    ),
    (
        DRAINING,
        "1 once the pool drains (manypy_pool_drain).",
        MetricType::GAUGE,
        &[],
    ),
    (
        REPLACED,
        "Retired interpreters the pool replaced with new ones.",
        MetricType::COUNTER,
        &[],
    ),
    (
        NO_ROOM,
        "1 while a retired interpreter could not be replaced for want of room in the process.",
        MetricType::GAUGE,
        &[],
    ),
];

/// Exports a pool's request metrics, load and interpreters at each scrape
/// (see the crate's documentation for the metrics). `Send + Sync`, as the
/// `prometheus` crate requires; each `collect` reads the pool's stats and
/// request metrics once, a moment apart, lock-free.
#[derive(Debug)]
pub struct PoolCollector {
    pool: Pool,
    pool_label: Option<String>,
    descs: Vec<Desc>,
}

impl PoolCollector {
    /// A collector for `pool`, whose series carry `pool="<name>"` when the
    /// pool has a name ([`Pool::name`]), as the C exposition does.
    pub fn new(pool: &Pool) -> prometheus::Result<PoolCollector> {
        PoolCollector::with_pool_label(pool, pool.name())
    }

    /// A collector for `pool` with the `pool` label `label` (`None`: no
    /// `pool` label), whatever the pool's name.
    pub fn with_pool_label(pool: &Pool, label: Option<&str>) -> prometheus::Result<PoolCollector> {
        let const_labels: HashMap<String, String> = label
            .map(|l| ("pool".to_owned(), l.to_owned()))
            .into_iter()
            .collect();
        let descs = FAMILIES
            .iter()
            .map(|(name, help, _, labels)| {
                Desc::new(
                    (*name).to_owned(),
                    (*help).to_owned(),
                    labels.iter().map(|l| (*l).to_owned()).collect(),
                    const_labels.clone(),
                )
            })
            .collect::<prometheus::Result<_>>()?;
        Ok(PoolCollector {
            pool: pool.clone(),
            pool_label: label.map(str::to_owned),
            descs,
        })
    }

    /// The pool collected.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// A metric with these labels and the `pool` label, sorted by name (as
    /// the `prometheus` crate's own metrics sort theirs).
    fn metric(&self, labels: &[(&str, &str)]) -> Metric {
        let mut pairs: Vec<LabelPair> = labels
            .iter()
            .copied()
            .chain(self.pool_label.as_deref().map(|p| ("pool", p)))
            .map(|(name, value)| {
                let mut pair = LabelPair::default();
                pair.set_name(name.to_owned());
                pair.set_value(value.to_owned());
                pair
            })
            .collect();
        pairs.sort_by(|a, b| a.name().cmp(b.name()));
        let mut metric = Metric::default();
        metric.set_label(pairs);
        metric
    }

    fn gauge(&self, labels: &[(&str, &str)], value: f64) -> Metric {
        let mut gauge = Gauge::default();
        gauge.set_value(value);
        let mut metric = self.metric(labels);
        metric.set_gauge(gauge);
        metric
    }

    fn histogram(&self, model: &str, h: &manypy::DurationHistogram) -> Metric {
        let buckets = h
            .bounds
            .iter()
            .zip(&h.cumulative)
            .map(|(&bound, &count)| {
                let mut bucket = Bucket::default();
                bucket.set_upper_bound(bound);
                bucket.set_cumulative_count(count);
                bucket
            })
            .collect();
        let mut histogram = Histogram::default();
        histogram.set_sample_count(h.count);
        histogram.set_sample_sum(h.sum_seconds);
        histogram.set_bucket(buckets);
        let mut metric = self.metric(&[("model", model)]);
        metric.set_histogram(histogram);
        metric
    }

    /// The families from one reading of the pool. Request families are
    /// left empty when `requests` is `None` (reading them failed), the
    /// others when `stats` is.
    fn families(
        &self,
        stats: Option<&PoolStats>,
        requests: Option<&[RequestMetrics]>,
    ) -> Vec<MetricFamily> {
        FAMILIES
            .iter()
            .map(|&(name, help, kind, _)| {
                let metrics: Vec<Metric> = match (name, stats, requests) {
                    (REQUESTS, _, Some(requests)) => requests
                        .iter()
                        .flat_map(|m| {
                            m.completed.iter().map(move |(code, n)| {
                                let mut counter = Counter::default();
                                counter.set_value(n as f64);
                                let mut metric =
                                    self.metric(&[("model", &m.model), ("code", code_label(code))]);
                                metric.set_counter(counter);
                                metric
                            })
                        })
                        .collect(),
                    (REQUEST_DURATION, _, Some(requests)) => requests
                        .iter()
                        .map(|m| self.histogram(&m.model, &m.request))
                        .collect(),
                    (QUEUE_DURATION, _, Some(requests)) => requests
                        .iter()
                        .map(|m| self.histogram(&m.model, &m.queue))
                        .collect(),
                    (INFLIGHT, Some(s), _) => vec![self.gauge(&[], s.in_flight as f64)],
                    (QUEUED, Some(s), _) => vec![self.gauge(&[], s.queued as f64)],
                    (INTERPRETERS, Some(s), _) => [
                        ("starting", s.starting),
                        ("ready", s.ready),
                        ("busy", s.busy),
                        ("broken", s.broken),
                        ("lost", s.lost),
                    ]
                    .iter()
                    .map(|&(state, n)| self.gauge(&[("state", state)], n as f64))
                    .collect(),
                    (DRAINING, Some(s), _) => {
                        vec![self.gauge(&[], if s.draining { 1.0 } else { 0.0 })]
                    }
                    (REPLACED, Some(s), _) => {
                        let mut counter = Counter::default();
                        counter.set_value(s.replaced as f64);
                        let mut metric = self.metric(&[]);
                        metric.set_counter(counter);
                        vec![metric]
                    }
                    (NO_ROOM, Some(s), _) => {
                        vec![self.gauge(&[], if s.no_room { 1.0 } else { 0.0 })]
                    }
                    _ => Vec::new(),
                };
                let mut family = MetricFamily::default();
                family.set_name(name.to_owned());
                family.set_help(help.to_owned());
                family.set_field_type(kind);
                family.set_metric(metrics);
                family
            })
            .collect()
    }
}

impl Collector for PoolCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    /// Reads the pool now. A reading that fails (the C library's `Err`,
    /// which a live pool does not give) leaves its families empty, and the
    /// registry then leaves them out: a scrape never panics.
    fn collect(&self) -> Vec<MetricFamily> {
        let stats = self.pool.stats().ok();
        let requests = self.pool.request_metrics().ok();
        self.families(stats.as_ref(), requests.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send_sync<T: Send + Sync>() {}

    #[test]
    fn the_collector_can_be_registered_anywhere() {
        // prometheus's Collector requires Sync + Send.
        send_sync::<PoolCollector>();
    }

    #[test]
    fn names_and_labels_are_valid() {
        for (name, help, _, labels) in FAMILIES {
            Desc::new(
                name.into(),
                help.into(),
                labels.iter().map(|l| l.to_string()).collect(),
                HashMap::new(),
            )
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
}
