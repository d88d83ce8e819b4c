//! `/metrics`: a `prometheus` registry with the service's HTTP requests and
//! latencies and the pool's collector (manypy-prometheus: requests by model
//! and status code, request and queue durations, calls in flight and
//! queued, interpreters by state, draining), followed by manypy's profiler
//! text (sampled operator durations per model, and `manypy_batch_size`, the
//! batches the Batcher formed).
use std::time::Duration;

use axum::http::StatusCode;
use manypy::{Pool, Profiler};
use manypy_prometheus::PoolCollector;
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry, TextEncoder,
};

pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    latency: HistogramVec,
    profiler: Profiler,
}

impl Metrics {
    /// `pool`'s metrics and the service's. `sampling`: the profiler's
    /// operator sampling probability, in (0, 1].
    pub fn new(pool: &Pool, sampling: f64) -> Result<Metrics, String> {
        let requests = IntCounterVec::new(
            Opts::new("http_requests_total", "HTTP requests by route and status"),
            &["route", "status"],
        )
        .map_err(|e| e.to_string())?;
        let latency = HistogramVec::new(
            HistogramOpts::new(
                "http_request_duration_seconds",
                "HTTP request latency by route",
            )
            .buckets(prometheus::exponential_buckets(0.001, 2.0, 14).map_err(|e| e.to_string())?),
            &["route"],
        )
        .map_err(|e| e.to_string())?;
        let registry = Registry::new();
        for c in [
            Box::new(requests.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(latency.clone()),
            // Read from the pool at each scrape.
            Box::new(PoolCollector::new(pool).map_err(|e| e.to_string())?),
        ] {
            registry.register(c).map_err(|e| e.to_string())?;
        }
        let profiler = Profiler::start(sampling).map_err(|e| e.to_string())?;
        Ok(Metrics {
            registry,
            requests,
            latency,
            profiler,
        })
    }

    pub fn observe(&self, route: &str, status: StatusCode, elapsed: Duration) {
        self.requests
            .with_label_values(&[route, status.as_str()])
            .inc();
        self.latency
            .with_label_values(&[route])
            .observe(elapsed.as_secs_f64());
    }

    /// The exposition text: the registry's (the pool read now), then the
    /// profiler's.
    pub fn render(&self) -> Result<String, String> {
        let mut out = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut out)
            .map_err(|e| e.to_string())?;
        let mut text = String::from_utf8(out).map_err(|e| e.to_string())?;
        text.push_str(&self.profiler.prometheus().map_err(|e| e.to_string())?);
        Ok(text)
    }
}
