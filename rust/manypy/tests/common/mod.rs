//! Shared by the integration tests: where the sample archives are, reading
//! their expected outputs, and comparing tensors.
#![allow(dead_code)]
use std::path::PathBuf;

use manypy::{CallFuture, CallOptions, CancelToken, Code, Object, Pool, Tensor, Value};

/// The build's sample archives (samples/models/make_archives.py), from
/// MANYPY_ARCHIVES, which the ctest entry sets. Missing is a test failure,
/// never a skip.
pub fn archives() -> PathBuf {
    let dir = std::env::var_os("MANYPY_ARCHIVES").expect(
        "MANYPY_ARCHIVES is not set: run through ctest (ctest -R rust_tests in the build \
         directory), or set it to <build>/archives",
    );
    let dir = PathBuf::from(dir);
    assert!(
        dir.join("identity.pt").exists(),
        "no identity.pt in {}",
        dir.display()
    );
    dir
}

pub fn archive(name: &str) -> PathBuf {
    archives().join(name)
}

/// A raw little-endian float32 file of the archives.
pub fn read_f32(name: &str) -> Vec<f32> {
    let bytes = std::fs::read(archive(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(bytes.len() % 4, 0, "{name}: not float32");
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// Asserts `got` is close to `expected` (as the C tests compare: relative
/// to each element plus the largest magnitude).
pub fn assert_close(got: &[f32], expected: &[f32], rtol: f64, what: &str) {
    assert_eq!(got.len(), expected.len(), "{what}: length");
    let scale = expected.iter().fold(0f64, |m, &e| m.max((e as f64).abs()));
    for (k, (&g, &e)) in got.iter().zip(expected).enumerate() {
        let diff = (g as f64 - e as f64).abs();
        assert!(
            diff <= rtol * ((e as f64).abs() + scale),
            "{what}: element {k} is {g}, expected {e}"
        );
    }
}

pub fn tensor_of(v: &Value) -> Tensor {
    Tensor::try_from(v).unwrap_or_else(|e| panic!("expected a tensor, got {v:?}: {e}"))
}

/// python_heavy's input and the kwargs its expected outputs were made with
/// (not the defaults: a host that drops kwargs fails).
pub fn python_heavy_case() -> (Tensor, Vec<(&'static str, Value)>) {
    let x = Tensor::from_vec(read_f32("python_heavy.input.bin"), &[4, 64]).unwrap();
    (
        x,
        vec![("steps", Value::Int(5)), ("normalize", Value::Bool(false))],
    )
}

/// Checks python_heavy's output dict against its expected files.
pub fn check_python_heavy(out: &Value) {
    let logits = tensor_of(out.get("logits").expect("no logits"));
    assert_eq!(logits.shape(), &[4, 10]);
    assert_close(
        &logits.to_vec::<f32>().unwrap(),
        &read_f32("python_heavy.expected.logits.bin"),
        1e-4,
        "logits",
    );
    let norm = tensor_of(out.get("norm").expect("no norm"));
    assert_eq!(norm.shape(), &[4]);
    assert_close(
        &norm.to_vec::<f32>().unwrap(),
        &read_f32("python_heavy.expected.norm.bin"),
        1e-4,
        "norm",
    );
    assert_eq!(out.get("steps"), Some(&Value::Int(5)));
}

pub fn resnet_input() -> Tensor {
    Tensor::from_vec(read_f32("resnet18.input.bin"), &[1, 3, 224, 224]).unwrap()
}

pub fn check_resnet(out: &Value) {
    let t = tensor_of(out);
    assert_eq!(t.shape(), &[1, 1000]);
    assert_close(
        &t.to_vec::<f32>().unwrap(),
        &read_f32("resnet18.expected.out.bin"),
        1e-4,
        "resnet18",
    );
}

/// Runs the tests of one file one at a time (each takes the guard): a
/// process has 15 interpreters at most, and tests that fill a
/// pool's queue on purpose must not share the machine with each other.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Waits for `done` to hold, checking every few milliseconds; a minute
/// without it is a failure (a bound against hangs, not a timing check).
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !done() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "waited a minute for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// A [1, n] float tensor of `v`s: one request's rows for batching.pt.
pub fn row(v: f32, n: usize) -> Tensor {
    Tensor::from_vec(vec![v; n], &[1, n as i64]).unwrap()
}

pub fn load(pool: &Pool, name: &str) -> Object {
    pool.load_package(archive(name))
        .unwrap()
        .load_pickle("model", "model.pkl")
        .unwrap()
}

/// batching.pt's forward on [1, 4] rows of `v`: 2v + 1.
pub fn expect_forward(out: &Value, v: f32) {
    let t = tensor_of(out);
    assert_eq!(t.shape(), &[1, 4]);
    assert_eq!(
        t.as_slice::<f32>().unwrap(),
        &[2.0 * v + 1.0; 4],
        "forward of {v}"
    );
}

/// A pool of one interpreter held by stuck.pt's `spin` until the returned
/// token is cancelled (the returned future then gives Cancelled).
pub struct Held {
    pub pool: Pool,
    pub stuck: Object,
    pub token: CancelToken,
    pub spin: CallFuture,
}

pub fn held_pool(queue_limit: usize) -> Held {
    let pool = Pool::builder()
        .interpreters(1)
        .queue_limit(queue_limit)
        .build()
        .unwrap();
    let stuck = load(&pool, "stuck.pt");
    let token = CancelToken::new().unwrap();
    let options = CallOptions::builder().cancel_token(&token).build().unwrap();
    let spin = stuck
        .call_with_async(Some("spin"), &(), &(), Some(&options))
        .unwrap();
    wait_until("spin to run", || {
        pool.in_flight() == 1 && pool.queued() == 0
    });
    Held {
        pool,
        stuck,
        token,
        spin,
    }
}

impl Held {
    pub fn release(self) {
        self.token.cancel();
        let e = futures::executor::block_on(self.spin).unwrap_err();
        assert_eq!(e.code(), Code::Cancelled, "{e}");
        drop(self.stuck);
    }
}
