//! The HTTP service: `POST /predict` runs the model on a request's tensor
//! with an asynchronous call, through the Batcher when batching is on;
//! `GET /metrics` and `GET /healthz`.
//!
//! Tensors travel as raw bytes (little-endian float32 in C order) with their
//! shape in a header, as Triton's binary tensor extension does: a
//! 224x224 image is 602 KB of floats, which JSON would triple.
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use manypy::{Batcher, CallOptions, Code, Object, Pool, Tensor, Value};

use crate::metrics::Metrics;

/// The shape header of requests and answers: `1,3,224,224`.
pub const SHAPE_HEADER: &str = "x-shape";
/// The caller's request id: the call's context (operator callbacks and the
/// profiler see it), echoed in the answer.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// What every request shares. The handlers only borrow it: `Object`,
/// `Batcher` and `CallOptions` are `Send + Sync` and take `&self`.
pub struct Service {
    pub pool: Pool,
    pub model: Arc<Object>,
    /// `Some`: requests go through it; `None`: one call each.
    pub batcher: Option<Batcher>,
    /// The shape of a request without a shape header.
    pub default_shape: Vec<i64>,
    /// Each call's bound, from submission: queueing included.
    pub timeout: Duration,
    /// The `model_id` of every call's context.
    pub model_id: String,
    pub metrics: Metrics,
}

pub fn router(service: Arc<Service>) -> Router {
    Router::new()
        .route("/predict", post(predict))
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .with_state(service)
}

async fn predict(State(service): State<Arc<Service>>, headers: HeaderMap, body: Bytes) -> Response {
    let start = Instant::now();
    let request_id = headers
        .get(REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut response = match service
        .predict(&headers, &body, request_id.as_deref())
        .await
    {
        Ok((shape, data)) => {
            let shape = shape
                .iter()
                .map(i64::to_string)
                .collect::<Vec<_>>()
                .join(",");
            let shape = HeaderValue::from_str(&shape).expect("digits and commas");
            (StatusCode::OK, [(SHAPE_HEADER, shape)], data).into_response()
        }
        Err((status, message)) if status == StatusCode::SERVICE_UNAVAILABLE => {
            (status, [("retry-after", "1")], message).into_response()
        }
        Err(failure) => failure.into_response(),
    };
    if let Some(id) = request_id.and_then(|id| HeaderValue::from_str(&id).ok()) {
        response.headers_mut().insert(REQUEST_ID_HEADER, id);
    }
    service
        .metrics
        .observe("predict", response.status(), start.elapsed());
    response
}

type Failure = (StatusCode, String);

impl Service {
    /// One prediction: the request's tensor in, the model's output tensor
    /// out. Dropping this future (the client went away, so axum drops the
    /// handler) drops the CallFuture, which cancels the call.
    async fn predict(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        request_id: Option<&str>,
    ) -> Result<(Vec<i64>, Vec<u8>), Failure> {
        let shape = match headers.get(SHAPE_HEADER) {
            Some(v) => parse_shape(
                v.to_str()
                    .map_err(|_| bad_request("the shape header is not text"))?,
            )?,
            None => self.default_shape.clone(),
        };
        let x = tensor(&shape, body)?;
        let options = CallOptions::builder()
            .timeout(self.timeout)
            .context(self.model_id.clone(), request_id.unwrap_or_default())
            .build()
            .map_err(|e| status_of(&e))?;
        let args = [Value::from(x)];
        // Refused at submission (OVERLOADED past the queue limit, a request
        // the batcher cannot split): Err here, before any await.
        let call = match &self.batcher {
            Some(batcher) => batcher.call_with_async(&args, &(), Some(&options)),
            None => self.model.call_with_async(None, &args, &(), Some(&options)),
        }
        .map_err(|e| status_of(&e))?;
        let out = call.await.map_err(|e| status_of(&e))?;
        let out = Tensor::try_from(out)
            .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")))?;
        let data = out
            .to_vec::<f32>()
            .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")))?;
        Ok((
            out.shape().to_vec(),
            data.iter().flat_map(|f| f.to_le_bytes()).collect(),
        ))
    }
}

fn bad_request(message: impl Into<String>) -> Failure {
    (StatusCode::BAD_REQUEST, message.into() + "\n")
}

fn parse_shape(text: &str) -> Result<Vec<i64>, Failure> {
    let shape: Vec<i64> = text
        .split(',')
        .map(|d| d.trim().parse::<i64>().ok().filter(|&d| d >= 0))
        .collect::<Option<_>>()
        .ok_or_else(|| bad_request(format!("bad shape {text:?}: comma-separated sizes")))?;
    if shape.is_empty() || shape.len() > 8 {
        return Err(bad_request(format!(
            "bad shape {text:?}: 1 to 8 dimensions"
        )));
    }
    Ok(shape)
}

/// The body as a float32 tensor of `shape`: its length must match.
fn tensor(shape: &[i64], body: &[u8]) -> Result<Tensor, Failure> {
    let elements = shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d as usize));
    if elements.and_then(|n| n.checked_mul(4)) != Some(body.len()) {
        return Err(bad_request(format!(
            "a {shape:?} float32 tensor is not {} bytes",
            body.len()
        )));
    }
    let data: Vec<f32> = body
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    Tensor::from_vec(data, shape).map_err(|e| bad_request(e.to_string()))
}

/// An HTTP status for a failed call: the client's fault, the load, or ours.
pub fn status_of(e: &manypy::Error) -> Failure {
    let status = match e.code() {
        Code::Overloaded | Code::Draining | Code::InterpreterBroken => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
        Code::InvalidArgument
        | Code::BadTensor
        | Code::Python
        | Code::WrongKind
        | Code::OutOfRange => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    (status, format!("{e}\n"))
}

async fn metrics(State(service): State<Arc<Service>>) -> Response {
    match service.metrics.render() {
        Ok(text) => ([("content-type", "text/plain; version=0.0.4")], text).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response(),
    }
}

/// A readiness probe: 200 while an interpreter can serve; 503 once every
/// one is broken, and once the pool drains (the service is stopping).
async fn healthz(State(service): State<Arc<Service>>) -> Response {
    let stats = match service.pool.stats() {
        Ok(stats) => stats,
        Err(e) => return (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response(),
    };
    let serving = stats.ready + stats.busy;
    let status = if serving > 0 && !stats.draining {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let draining = if stats.draining { ", draining" } else { "" };
    (
        status,
        format!(
            "{serving} of {} interpreters serving{draining}\n",
            stats.interpreters
        ),
    )
        .into_response()
}
