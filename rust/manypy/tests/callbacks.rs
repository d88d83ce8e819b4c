//! Operator callbacks see the call's context, inputs and interpreter; a
//! panic in a callback stays on the Rust side; the profiler aggregates.
mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use common::archive;
use manypy::{CallOptions, DType, InputKind, OpCallbacks, Pool, Profiler, ScriptModule, Value};

#[derive(Debug, Clone)]
struct Seen {
    name: String,
    model: String,
    request: String,
    interpreter: Option<usize>,
    input_shapes: Vec<(InputKind, Option<DType>, Vec<i64>)>,
    ended: bool,
}

#[test]
fn callbacks_report_the_context_of_the_call() {
    let pool = Pool::new(2).unwrap();
    let heavy = pool
        .load_package(archive("python_heavy.pt"))
        .unwrap()
        .load_pickle("model", "model.pkl")
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::<Seen>::new()));
    let enters = Arc::new(AtomicU64::new(0));
    let (log, count) = (seen.clone(), enters.clone());
    let registration = OpCallbacks::new()
        .on_enter(move |e| {
            if e.request_id() == "req-cb" {
                count.fetch_add(1, Ordering::Relaxed);
                assert_eq!(e.end_ns(), 0);
            }
        })
        .on_exit(move |e| {
            if e.request_id() != "req-cb" {
                return; // another test's calls
            }
            log.lock().unwrap().push(Seen {
                name: e.name().to_owned(),
                model: e.model_id().to_owned(),
                request: e.request_id().to_owned(),
                interpreter: e.interpreter(),
                input_shapes: e
                    .inputs()
                    .map(|i| (i.kind(), i.dtype(), i.shape().to_vec()))
                    .collect(),
                ended: e.end_ns() >= e.start_ns() && e.start_ns() > 0,
            });
        })
        .needs_inputs(true)
        .register()
        .unwrap();
    let (x, kwargs) = common::python_heavy_case();
    let options = CallOptions::builder()
        .interpreter(1)
        .context("heavy-model", "req-cb")
        .build()
        .unwrap();
    common::check_python_heavy(
        &heavy
            .call_with(None, &[Value::from(&x)], &kwargs, Some(&options))
            .unwrap(),
    );
    registration.remove().unwrap();

    let seen = seen.lock().unwrap().clone();
    assert!(
        !seen.is_empty(),
        "no operator event reported the call's context"
    );
    assert!(enters.load(Ordering::Relaxed) >= seen.len() as u64);
    for s in &seen {
        assert_eq!(
            (s.model.as_str(), s.request.as_str()),
            ("heavy-model", "req-cb")
        );
        assert!(s.ended, "{s:?}");
        assert!(
            s.interpreter.is_some(),
            "python_heavy runs in an interpreter"
        );
    }
    // The model's first Linear sees the [4, 64] float input.
    let linear = seen
        .iter()
        .find(|s| s.name == "aten::linear")
        .expect("an aten::linear event");
    assert_eq!(
        linear.input_shapes[0],
        (InputKind::Tensor, Some(DType::Float32), vec![4, 64])
    );
    // After removal nothing more is recorded.
    let before = seen.len();
    heavy
        .call_with(None, &[Value::from(&x)], &kwargs, Some(&options))
        .unwrap();
    assert_eq!(before, seen.len());
}

#[test]
fn a_panicking_callback_does_not_cross_into_c() {
    let pool = Pool::new(1).unwrap();
    let identity = pool
        .load_package(archive("identity.pt"))
        .unwrap()
        .load_pickle("model", "model.pkl")
        .unwrap();
    pool.exec_all("import torch").unwrap();
    let before = manypy::callback_panics();
    let registration = OpCallbacks::new()
        .on_exit(|e| {
            if e.request_id() == "req-panic" {
                panic!("a callback panics on purpose");
            }
        })
        .register()
        .unwrap();
    let options = CallOptions::builder()
        .context("m", "req-panic")
        .build()
        .unwrap();
    let x = manypy::Tensor::from_vec(vec![1.0f32; 6], &[2, 3]).unwrap();
    identity
        .call_with(Some("forward"), &[Value::from(&x)], &(), Some(&options))
        .unwrap();
    // Through torch operators in the interpreter too.
    let heavy = pool
        .load_package(archive("python_heavy.pt"))
        .unwrap()
        .load_pickle("model", "model.pkl")
        .unwrap();
    let (x, kwargs) = common::python_heavy_case();
    let out = heavy
        .call_with(None, &[Value::from(&x)], &kwargs, Some(&options))
        .unwrap();
    common::check_python_heavy(&out);
    assert!(
        manypy::callback_panics() > before,
        "the panics were caught and counted"
    );
    drop(registration);
}

#[test]
fn the_profiler_aggregates_by_model_and_operator() {
    let script = ScriptModule::load(archive("python_heavy_script.pt")).unwrap();
    let profiler = Profiler::start(1.0).unwrap();
    let (x, kwargs) = common::python_heavy_case();
    let options = CallOptions::builder()
        .context("profiled-script", "r")
        .build()
        .unwrap();
    for _ in 0..3 {
        common::check_python_heavy(
            &script
                .call_with(None, &[Value::from(&x)], &kwargs, Some(&options))
                .unwrap(),
        );
    }
    let entries = profiler.snapshot().unwrap();
    let mine: Vec<_> = entries
        .iter()
        .filter(|e| e.model_id == "profiled-script")
        .collect();
    assert!(!mine.is_empty(), "{entries:?}");
    assert!(mine.iter().all(|e| e.count > 0 && e.p99_ns >= e.p50_ns));
    assert!(profiler
        .prometheus()
        .unwrap()
        .contains("manypy_operator_duration_seconds"));
    assert!(profiler.chrome_trace().unwrap().contains("traceEvents"));
}

#[test]
fn sampling_probability_out_of_range_is_an_err() {
    assert_eq!(
        OpCallbacks::new()
            .on_exit(|_| {})
            .sampling_probability(0.0)
            .register()
            .unwrap_err()
            .code(),
        manypy::Code::OutOfRange
    );
    assert_eq!(
        Profiler::start(2.0).unwrap_err().code(),
        manypy::Code::OutOfRange
    );
}
