//! serve_http: an HTTP service on axum and tokio that serves a packaged
//! model (resnet18.pt by default) with manypy's asynchronous calls, through
//! a dynamic Batcher, with Prometheus `/metrics`. No thread waits for
//! Python: each request's handler awaits a CallFuture, which manypy
//! completes from its own threads.
//!
//! Usage: serve_http [options]            serve until Ctrl-C
//!        serve_http --loadtest [options] serve unbatched, then batched, each
//!                                        under the same loopback load; print
//!                                        requests/s and p50/p99, exit non-zero
//!                                        on any failed or wrong answer
//!   --archives DIR      the build's sample archives (default: $MANYPY_ARCHIVES)
//!   --model NAME        serve DIR/NAME.pt (default resnet18)
//!   --shape DIMS        a request's default shape (default 1,3,224,224)
//!   --addr HOST:PORT    where to listen (default 127.0.0.1:8080; the load test
//!                       takes a free loopback port)
//!   --interpreters N    the pool's interpreters (default 2)
//!   --max-batch N       the Batcher's largest batch, 0 for none (default 8)
//!   --max-wait-ms F     the Batcher's longest wait for a batch (default 10: with
//!                       2, answers trickle back and batches of about 2 form;
//!                       docs/rust.md, "The HTTP sample")
//!   --queue-limit N     calls that may wait for an interpreter; past it 503
//!                       (default 64)
//!   --timeout-ms N      each call's bound, queueing included; past it 504
//!                       (default 10000)
//!   --clients N         the load test's concurrent clients (default 16)
//!   --seconds S         the load test's seconds per configuration (default 4)
//!   --rounds R          ... split into R alternating rounds (default 2)
mod loadtest;
mod metrics;
mod service;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use manypy::{Batcher, Pool};

use crate::metrics::Metrics;
use crate::service::Service;

pub struct Options {
    archives: PathBuf,
    model: String,
    shape: Vec<i64>,
    addr: String,
    interpreters: usize,
    max_batch: usize,
    max_wait: Duration,
    queue_limit: usize,
    timeout: Duration,
    loadtest: bool,
    clients: usize,
    seconds: f64,
    rounds: usize,
}

fn parse() -> Result<Options, String> {
    let mut o = Options {
        archives: std::env::var_os("MANYPY_ARCHIVES")
            .map(PathBuf::from)
            .unwrap_or_default(),
        model: "resnet18".into(),
        shape: vec![1, 3, 224, 224],
        addr: "127.0.0.1:8080".into(),
        interpreters: 2,
        max_batch: 8,
        max_wait: Duration::from_millis(10),
        queue_limit: 64,
        timeout: Duration::from_secs(10),
        loadtest: false,
        clients: 16,
        seconds: 4.0,
        rounds: 2,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--loadtest" {
            o.loadtest = true;
            continue;
        }
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = |v: &str| {
            v.parse::<f64>()
                .map_err(|e| format!("{flag}: {e}"))
                .and_then(|n| {
                    if n.is_finite() && n >= 0.0 {
                        Ok(n)
                    } else {
                        Err(format!("{flag}: {v} is not a non-negative number"))
                    }
                })
        };
        match flag.as_str() {
            "--archives" => o.archives = value.into(),
            "--model" => o.model = value,
            "--shape" => {
                o.shape = value
                    .split(',')
                    .map(|d| d.trim().parse().map_err(|e| format!("--shape: {e}")))
                    .collect::<Result<_, _>>()?
            }
            "--addr" => o.addr = value,
            "--interpreters" => o.interpreters = number(&value)? as usize,
            "--max-batch" => o.max_batch = number(&value)? as usize,
            "--max-wait-ms" => o.max_wait = Duration::from_secs_f64(number(&value)? / 1e3),
            "--queue-limit" => o.queue_limit = number(&value)? as usize,
            "--timeout-ms" => o.timeout = Duration::from_secs_f64(number(&value)? / 1e3),
            "--clients" => o.clients = number(&value)? as usize,
            "--seconds" => o.seconds = number(&value)?,
            "--rounds" => o.rounds = number(&value)? as usize,
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    if o.archives.as_os_str().is_empty() {
        return Err("give --archives DIR or set MANYPY_ARCHIVES".into());
    }
    if o.interpreters == 0 || o.clients == 0 || o.seconds <= 0.0 || o.rounds == 0 {
        return Err("--interpreters, --clients, --seconds and --rounds must be positive".into());
    }
    Ok(o)
}

/// The service over `pool`'s model, batched or not. Each has its own
/// metrics (and so its own profiler).
pub fn service(
    pool: &Pool,
    model: &Arc<manypy::Object>,
    options: &Options,
    batched: bool,
) -> Result<Service, String> {
    let batcher = if batched && options.max_batch > 0 {
        let batcher = Batcher::builder()
            .max_batch(options.max_batch)
            .max_wait(options.max_wait)
            .name(options.model.clone())
            .build(model, None)
            .map_err(|e| e.to_string())?;
        Some(batcher)
    } else {
        None
    };
    Ok(Service {
        pool: pool.clone(),
        model: model.clone(),
        batcher,
        default_shape: options.shape.clone(),
        timeout: options.timeout,
        model_id: options.model.clone(),
        // Operators are sampled rarely: the profiler is on in production.
        metrics: Metrics::new(pool, 0.01)?,
    })
}

fn main() {
    if let Err(e) = run() {
        eprintln!("serve_http: {e}");
        std::process::exit(1);
    }
}

#[tokio::main]
async fn run() -> Result<(), String> {
    let options = parse()?;
    let pool = Pool::builder()
        .interpreters(options.interpreters)
        .queue_limit(options.queue_limit)
        // The `pool` label of its metrics.
        .name(&options.model)
        .build()
        .map_err(|e| e.to_string())?;
    let archive = options.archives.join(format!("{}.pt", options.model));
    let model = pool
        .load_package(&archive)
        .and_then(|p| p.load_pickle("model", "model.pkl"))
        .map_err(|e| format!("{}: {e}", archive.display()))?;
    let model = Arc::new(model);
    if options.loadtest {
        return loadtest::run(&pool, &model, &options).await;
    }
    let service = Arc::new(service(&pool, &model, &options, true)?);
    let listener = tokio::net::TcpListener::bind(&options.addr)
        .await
        .map_err(|e| format!("{}: {e}", options.addr))?;
    println!(
        "serving {} on http://{} ({} interpreters, batches of up to {} within {:?}; POST /predict, GET /metrics)",
        archive.display(),
        listener.local_addr().map_err(|e| e.to_string())?,
        options.interpreters,
        options.max_batch,
        options.max_wait
    );
    axum::serve(listener, service::router(service))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(|e| e.to_string())?;
    // Stopping: the pool refuses new calls (Code::Draining, 503) and gets
    // up to 10 s to finish those it has; then they are cancelled. A drain
    // blocks, so not on a runtime thread.
    let drained = tokio::task::spawn_blocking(move || pool.drain(Some(Duration::from_secs(10))))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    println!(
        "drained: {} calls finished, {} cancelled",
        drained.finished, drained.cancelled
    );
    Ok(())
}
