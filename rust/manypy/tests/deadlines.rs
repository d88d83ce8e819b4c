//! Timeouts and cancel tokens stop Python code that runs or waits, in both
//! thread modes; the interpreter then serves calls as before.
mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::archive;
use manypy::{CallOptions, CancelToken, Code, Object, Pool, Tensor, ThreadMode, Value};

fn stuck(mode: ThreadMode) -> (Pool, Object) {
    let pool = Pool::builder().thread_mode(mode).build().unwrap();
    let object = pool.load_package(archive("stuck.pt")).unwrap().load_pickle("model", "model.pkl").unwrap();
    (pool, object)
}

fn still_serves(object: &Object) {
    let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
    let out = object.call(&[Value::from(x)]).unwrap();
    assert_eq!(common::tensor_of(&out).as_slice::<f32>().unwrap(), &[2.0, 4.0]);
}

fn deadlines(mode: ThreadMode) {
    let (_pool, object) = stuck(mode);
    let options = CallOptions::builder().timeout(Duration::from_millis(200)).build().unwrap();
    for method in ["spin", "spin_catching"] {
        let start = Instant::now();
        let e = object.call_with(Some(method), &(), &(), Some(&options)).unwrap_err();
        assert_eq!(e.code(), Code::DeadlineExceeded, "{method}: {e}");
        assert!(start.elapsed() >= Duration::from_millis(200));
        assert!(e.traceback().unwrap_or("").contains(method), "{method}: the traceback shows where it stopped");
        still_serves(&object);
    }
    // A property that loops, bounded the same way.
    let e = object.getattr("spinning_property", Some(&options)).unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded);
}

fn cancellation(mode: ThreadMode) {
    let (_pool, object) = stuck(mode);
    let token = CancelToken::new().unwrap();
    let options = CallOptions::builder().cancel_token(&token).build().unwrap();
    thread::scope(|s| {
        let call = s.spawn(|| object.call_with(Some("spin"), &(), &(), Some(&options)));
        thread::sleep(Duration::from_millis(150));
        // Cancelled from another thread, through a clone.
        let other = token.clone();
        s.spawn(move || other.cancel()).join().unwrap();
        let e = call.join().unwrap().unwrap_err();
        assert_eq!(e.code(), Code::Cancelled);
    });
    assert!(token.is_cancelled());
    // A cancelled token fails later calls at once.
    let e = object.call_with(None, &[Value::from(Tensor::from_vec(vec![1.0f32], &[1]).unwrap())], &(), Some(&options));
    assert_eq!(e.unwrap_err().code(), Code::Cancelled);
    still_serves(&object);
}

#[test]
fn deadlines_direct() {
    deadlines(ThreadMode::Direct);
}

#[test]
fn deadlines_handoff() {
    deadlines(ThreadMode::Handoff);
}

#[test]
fn cancellation_direct() {
    cancellation(ThreadMode::Direct);
}

#[test]
fn cancellation_handoff() {
    cancellation(ThreadMode::Handoff);
}

#[test]
fn options_out_of_range_are_errs() {
    let e = CallOptions::builder().interpreter(usize::MAX).build().unwrap_err();
    assert_eq!(e.code(), Code::OutOfRange);
    let e = CallOptions::builder().timeout(Duration::MAX).build().unwrap_err();
    assert_eq!(e.code(), Code::OutOfRange);
    let e = CallOptions::builder().context("a\0", "b").build().unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
}
