//! `/metrics`: the service's requests and latencies and the pool's load
//! (a `prometheus` registry), followed by manypy's profiler text (sampled
//! operator durations per model, and `manypy_batch_size`, the batches the
//! Batcher formed).
use std::time::Duration;

use axum::http::StatusCode;
use manypy::{Pool, Profiler};
use prometheus::{Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts, Registry, TextEncoder};

pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    latency: HistogramVec,
    queued: IntGauge,
    in_flight: IntGauge,
    profiler: Profiler,
}

impl Metrics {
    /// `sampling`: the profiler's operator sampling probability, in (0, 1].
    pub fn new(sampling: f64) -> Result<Metrics, String> {
        let requests = IntCounterVec::new(
            Opts::new("http_requests_total", "HTTP requests by route and status"),
            &["route", "status"],
        )
        .map_err(|e| e.to_string())?;
        let latency = HistogramVec::new(
            HistogramOpts::new("http_request_duration_seconds", "HTTP request latency by route")
                .buckets(prometheus::exponential_buckets(0.001, 2.0, 14).map_err(|e| e.to_string())?),
            &["route"],
        )
        .map_err(|e| e.to_string())?;
        let queued = IntGauge::new("manypy_pool_queued", "Calls waiting for an interpreter (the queue limit bounds it)")
            .map_err(|e| e.to_string())?;
        let in_flight = IntGauge::new("manypy_pool_in_flight", "Calls admitted and not complete (waiting or running)")
            .map_err(|e| e.to_string())?;
        let registry = Registry::new();
        for c in [
            Box::new(requests.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(latency.clone()),
            Box::new(queued.clone()),
            Box::new(in_flight.clone()),
        ] {
            registry.register(c).map_err(|e| e.to_string())?;
        }
        let profiler = Profiler::start(sampling).map_err(|e| e.to_string())?;
        Ok(Metrics { registry, requests, latency, queued, in_flight, profiler })
    }

    pub fn observe(&self, route: &str, status: StatusCode, elapsed: Duration) {
        self.requests.with_label_values(&[route, status.as_str()]).inc();
        self.latency.with_label_values(&[route]).observe(elapsed.as_secs_f64());
    }

    /// The exposition text: the pool's load read now, then the profiler's.
    pub fn render(&self, pool: &Pool) -> Result<String, String> {
        self.queued.set(pool.queued() as i64);
        self.in_flight.set(pool.in_flight() as i64);
        let mut out = Vec::new();
        TextEncoder::new().encode(&self.registry.gather(), &mut out).map_err(|e| e.to_string())?;
        let mut text = String::from_utf8(out).map_err(|e| e.to_string())?;
        text.push_str(&self.profiler.prometheus().map_err(|e| e.to_string())?);
        Ok(text)
    }
}
