//! The load test: the service runs on a free loopback port, first without
//! batching (one asynchronous call per request), then with the Batcher,
//! each under the same load: `--clients` concurrent clients, each on its own
//! HTTP/1 keep-alive connection, sending the model's sample input as
//! batch-1 requests for `--seconds`. Every answer is checked against eager
//! Python's output; a failed or wrong answer fails the run. The two run at
//! once on one pool and take turns under the load, in `--rounds` rounds.
//! It prints requests/s and p50/p99 latency for both, and the mean batch
//! formed.
use std::future::IntoFuture;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use manypy::{CallOptions, Object, Pool, Tensor, Value};

use crate::service::{router, REQUEST_ID_HEADER, SHAPE_HEADER};
use crate::Options;

fn read_f32(path: &Path) -> Result<Vec<f32>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}

/// As the tests compare: relative to each element plus the largest magnitude.
fn close(got: &[f32], expected: &[f32]) -> bool {
    let scale = expected.iter().fold(0f32, |m, e| m.max(e.abs()));
    got.len() == expected.len()
        && got
            .iter()
            .zip(expected)
            .all(|(g, e)| (g - e).abs() <= 1e-4 * (e.abs() + scale))
}

/// One client's keep-alive connection.
struct Client {
    sender: SendRequest<Full<Bytes>>,
    host: String,
}

impl Client {
    async fn connect(addr: SocketAddr) -> Result<Client, String> {
        let stream = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect {addr}: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
        // Drives the connection; ends when the sender is dropped.
        tokio::spawn(connection);
        Ok(Client {
            sender,
            host: addr.to_string(),
        })
    }

    async fn send(
        &mut self,
        method: Method,
        path: &str,
        headers: &[(&str, String)],
        body: Bytes,
    ) -> Result<(StatusCode, hyper::HeaderMap, Bytes), String> {
        self.sender.ready().await.map_err(|e| e.to_string())?;
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header("host", &self.host);
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let request = request.body(Full::new(body)).map_err(|e| e.to_string())?;
        let response = self
            .sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
        let (parts, body) = response.into_parts();
        let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
        Ok((parts.status, parts.headers, body))
    }
}

/// The model's sample input and eager Python's output for it.
struct Case {
    input: Bytes,
    shape: String,
    expected: Vec<f32>,
}

impl Case {
    async fn predict(&self, client: &mut Client, id: String) -> Result<(), String> {
        let headers = [
            (SHAPE_HEADER, self.shape.clone()),
            (REQUEST_ID_HEADER, id.clone()),
        ];
        let (status, headers, body) = client
            .send(Method::POST, "/predict", &headers, self.input.clone())
            .await?;
        if status != StatusCode::OK {
            return Err(format!(
                "request {id}: {status}: {}",
                String::from_utf8_lossy(&body).trim()
            ));
        }
        if headers.get(REQUEST_ID_HEADER).and_then(|v| v.to_str().ok()) != Some(id.as_str()) {
            return Err(format!(
                "request {id}: the answer does not echo its request id"
            ));
        }
        let got: Vec<f32> = body
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        if !close(&got, &self.expected) {
            return Err(format!(
                "request {id}: the output differs from eager Python's"
            ));
        }
        Ok(())
    }
}

struct Run {
    elapsed: Duration,
    latencies: Vec<Duration>,
}

/// `clients` clients sending requests for `seconds`; the first failure
/// ends the run with it.
async fn load(
    addr: SocketAddr,
    case: &Arc<Case>,
    clients: usize,
    seconds: f64,
    label: &str,
) -> Result<Run, String> {
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(seconds);
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let case = case.clone();
            let label = label.to_owned();
            tokio::spawn(async move {
                let mut client = Client::connect(addr).await?;
                let mut latencies = Vec::new();
                while Instant::now() < end {
                    let t = Instant::now();
                    case.predict(&mut client, format!("{label}-{c}-{}", latencies.len()))
                        .await?;
                    latencies.push(t.elapsed());
                }
                Ok::<_, String>(latencies)
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(
            task.await
                .map_err(|e| format!("a client panicked: {e}"))??,
        );
    }
    Ok(Run {
        elapsed: start.elapsed(),
        latencies,
    })
}

fn percentile_ms(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize].as_secs_f64() * 1e3
}

/// The sum and count of a metric's samples in exposition text (a summary
/// or histogram's `_sum` and `_count`, over every label set).
fn sum_and_count(text: &str, metric: &str) -> (f64, f64) {
    let value = |line: &str| {
        line.rsplit(' ')
            .next()
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let total = |suffix: &str| {
        let name = format!("{metric}{suffix}");
        text.lines()
            .filter(|l| {
                l.strip_prefix(&name)
                    .is_some_and(|rest| rest.starts_with(['{', ' ']))
            })
            .map(value)
            .sum::<f64>()
    };
    (total("_sum"), total("_count"))
}

/// What the service answers besides predictions, checked before the load.
async fn check_service(addr: SocketAddr) -> Result<(), String> {
    let mut client = Client::connect(addr).await?;
    let (status, _, _) = client
        .send(
            Method::POST,
            "/predict",
            &[(SHAPE_HEADER, "1,3".into())],
            Bytes::from_static(b"abc"),
        )
        .await?;
    if status != StatusCode::BAD_REQUEST {
        return Err(format!(
            "a body that is not a [1, 3] float32 tensor got {status}, not 400"
        ));
    }
    let (status, _, _) = client
        .send(
            Method::POST,
            "/predict",
            &[(SHAPE_HEADER, "x".into())],
            Bytes::new(),
        )
        .await?;
    if status != StatusCode::BAD_REQUEST {
        return Err(format!("a bad shape header got {status}, not 400"));
    }
    // A tensor of the wrong shape for the model: the model's error, 400.
    let wrong = Bytes::from(vec![0u8; 4 * 5]);
    let (status, _, body) = client
        .send(
            Method::POST,
            "/predict",
            &[(SHAPE_HEADER, "1,5".into())],
            wrong,
        )
        .await?;
    if status != StatusCode::BAD_REQUEST {
        return Err(format!(
            "a [1, 5] input got {status}, not 400: {}",
            String::from_utf8_lossy(&body)
        ));
    }
    let (status, _, _) = client
        .send(Method::GET, "/healthz", &[], Bytes::new())
        .await?;
    if status != StatusCode::OK {
        return Err(format!("/healthz: {status}"));
    }
    Ok(())
}

/// A service whose pool drains: not ready, and predictions refused (503).
async fn check_draining(addr: SocketAddr, case: &Case) -> Result<(), String> {
    let mut client = Client::connect(addr).await?;
    let (status, _, body) = client
        .send(Method::GET, "/healthz", &[], Bytes::new())
        .await?;
    if status != StatusCode::SERVICE_UNAVAILABLE {
        return Err(format!(
            "/healthz of a draining pool: {status}: {}",
            String::from_utf8_lossy(&body)
        ));
    }
    let (status, _, body) = client
        .send(
            Method::POST,
            "/predict",
            &[(SHAPE_HEADER, case.shape.clone())],
            case.input.clone(),
        )
        .await?;
    let text = String::from_utf8_lossy(&body);
    if status != StatusCode::SERVICE_UNAVAILABLE || !text.contains("MANYPY_ERR_DRAINING") {
        return Err(format!("a prediction on a draining pool: {status}: {text}"));
    }
    Ok(())
}

async fn scrape(addr: SocketAddr) -> Result<String, String> {
    let (status, _, body) = Client::connect(addr)
        .await?
        .send(Method::GET, "/metrics", &[], Bytes::new())
        .await?;
    let text = String::from_utf8(body.to_vec()).map_err(|e| e.to_string())?;
    if status != StatusCode::OK {
        return Err(format!("/metrics: {status}: {text}"));
    }
    for metric in [
        "http_requests_total",
        "manypy_requests_total{",
        "manypy_request_duration_seconds_bucket{",
        "manypy_queue_duration_seconds_count{",
        "manypy_inflight_requests{",
        "manypy_queued_requests{",
        "manypy_interpreters{pool=",
        "manypy_draining{",
    ] {
        if !text.contains(metric) {
            return Err(format!("/metrics has no {metric}"));
        }
    }
    Ok(text)
}

pub async fn run(pool: &Pool, model: &Arc<Object>, options: &Options) -> Result<(), String> {
    let name = &options.model;
    let case = Arc::new(Case {
        input: read_f32(&options.archives.join(format!("{name}.input.bin")))?
            .iter()
            .flat_map(|f| f.to_le_bytes())
            .collect::<Vec<u8>>()
            .into(),
        shape: options
            .shape
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(","),
        expected: read_f32(&options.archives.join(format!("{name}.expected.out.bin")))?,
    });
    // Every interpreter gives eager Python's output (and is started).
    let floats: Vec<f32> = case
        .input
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let x = Tensor::from_vec(floats, &options.shape).map_err(|e| e.to_string())?;
    for i in 0..pool.size() {
        let pinned = CallOptions::builder()
            .interpreter(i)
            .build()
            .map_err(|e| e.to_string())?;
        let out = model
            .call_with_async(None, &[Value::from(&x)], &(), Some(&pinned))
            .map_err(|e| e.to_string())?;
        let out =
            Tensor::try_from(out.await.map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
        if !close(
            &out.to_vec::<f32>().map_err(|e| e.to_string())?,
            &case.expected,
        ) {
            return Err(format!(
                "interpreter {i}: the output differs from eager Python's"
            ));
        }
    }
    println!(
        "{name}.pt, batch-1 requests [{}] from {} loopback clients over HTTP, {} interpreters, {:.1} s per configuration in {} alternating rounds (libmanypy {})",
        case.shape,
        options.clients,
        pool.size(),
        options.seconds,
        options.rounds,
        manypy::library_version().map_err(|e| e.to_string())?
    );
    // Both services at once, on one pool: the rounds alternate between
    // them, so that a machine whose load changes weighs on both alike.
    let mut served = Vec::new();
    for batched in [false, true] {
        let served_one = Served::start(crate::service(pool, model, options, batched)?).await?;
        check_service(served_one.addr).await?;
        served.push((
            batched,
            served_one,
            Run {
                elapsed: Duration::ZERO,
                latencies: Vec::new(),
            },
        ));
    }
    let slice = options.seconds / options.rounds as f64;
    for round in 0..options.rounds {
        let n = served.len();
        for k in 0..n {
            let (batched, served_one, total) =
                &mut served[if round % 2 == 0 { k } else { n - 1 - k }];
            let label = if *batched { "batched" } else { "unbatched" };
            let run = load(served_one.addr, &case, options.clients, slice, label).await?;
            total.elapsed += run.elapsed;
            total.latencies.extend(run.latencies);
        }
    }
    // Stopping as a service stops (SIGTERM): the pool drains, after which
    // both services say they are not ready and refuse predictions with 503.
    let draining = pool.clone();
    let drained =
        tokio::task::spawn_blocking(move || draining.drain(Some(Duration::from_secs(10))))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
    if drained.cancelled != 0 {
        return Err(format!(
            "the drain after the load cancelled {} calls",
            drained.cancelled
        ));
    }
    for (_, served_one, _) in &served {
        check_draining(served_one.addr, &case).await?;
    }
    println!(
        "{:<36} {:>9} {:>9} {:>9} {:>11}",
        "configuration", "req/s", "p50 ms", "p99 ms", "mean batch"
    );
    let mut rates = Vec::new();
    for (batched, served_one, mut run) in served {
        let metrics = scrape(served_one.addr).await?;
        served_one.stop().await?;
        // The pool's collector: calls that succeeded, by model. Both
        // services share the pool, so each sees at least its own (a batch
        // is one call).
        let ok_calls: f64 = metrics
            .lines()
            .filter(|l| l.starts_with("manypy_requests_total{code=\"ok\","))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        if ok_calls
            < if batched {
                1.0
            } else {
                run.latencies.len() as f64
            }
        {
            return Err(format!(
                "/metrics counts {ok_calls} successful calls after {} requests",
                run.latencies.len()
            ));
        }
        if !metrics.contains(&format!("manypy_draining{{pool=\"{name}\"}} 1")) {
            return Err("/metrics does not show the pool draining".into());
        }
        let (batch_rows, batches) = sum_and_count(&metrics, "manypy_batch_size");
        if batched && batches == 0.0 {
            return Err("the batched service's /metrics shows no manypy_batch_size samples".into());
        }
        run.latencies.sort();
        let rate = run.latencies.len() as f64 / run.elapsed.as_secs_f64();
        rates.push(rate);
        let configuration = if batched {
            format!(
                "batched (max {}, wait {:?})",
                options.max_batch, options.max_wait
            )
        } else {
            "unbatched (one call_async each)".to_owned()
        };
        // The histogram is the process's, whichever service is scraped.
        let mean_batch = if batched {
            format!("{:.2}", batch_rows / batches)
        } else {
            "-".to_owned()
        };
        println!(
            "{configuration:<36} {rate:>9.1} {:>9.2} {:>9.2} {mean_batch:>11}",
            percentile_ms(&run.latencies, 0.50),
            percentile_ms(&run.latencies, 0.99)
        );
    }
    println!(
        "batched / unbatched throughput: {:.2}x",
        rates[1] / rates[0]
    );
    Ok(())
}

/// A service on a free loopback port, until `stop`.
struct Served {
    addr: SocketAddr,
    stop: Arc<tokio::sync::Notify>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Served {
    async fn start(service: crate::service::Service) -> Result<Served, String> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| e.to_string())?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let stop = Arc::new(tokio::sync::Notify::new());
        let stopped = stop.clone();
        let server = tokio::spawn(
            axum::serve(listener, router(Arc::new(service)))
                .with_graceful_shutdown(async move { stopped.notified().await })
                .into_future(),
        );
        Ok(Served { addr, stop, server })
    }

    /// Stops accepting and waits for the open connections to end.
    async fn stop(self) -> Result<(), String> {
        self.stop.notify_one();
        self.server
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())
    }
}
