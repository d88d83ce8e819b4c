//! Timeouts and cancel tokens stop Python code that runs or waits, in both
//! thread modes. A model that lets the stop end it leaves its interpreter
//! serving as before; one that catches the stop and goes on (stuck.pt's
//! `spin_catching`) is cut short after the pool's stop grace, and its
//! interpreter is retired for the rest of the process.
//!
//! Each thread mode has one pool of 2 interpreters, and its stops run in one
//! test, in order: the retirement comes last, because interpreter 1 never
//! serves again. Cargo runs the two modes at once: 4 interpreters, within
//! the 7 a torch 2.x process has.
mod common;

use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use common::archive;
use manypy::{CallOptions, CancelToken, Code, Error, Object, Pool, Tensor, ThreadMode, Value};

/// stuck.pt in a pool of 2 interpreters, each with its replica made (so
/// that no timeout below includes making one).
fn stuck(mode: ThreadMode, stop_grace: Option<Duration>) -> (Pool, Object) {
    let mut builder = Pool::builder().interpreters(2).thread_mode(mode);
    if let Some(grace) = stop_grace {
        builder = builder.stop_grace(grace);
    }
    let pool = builder.build().unwrap();
    let object = pool
        .load_package(archive("stuck.pt"))
        .unwrap()
        .load_pickle("model", "model.pkl")
        .unwrap();
    serves(&object, Some(0));
    serves(&object, Some(1));
    (pool, object)
}

fn pinned(interpreter: usize) -> CallOptions {
    CallOptions::builder()
        .interpreter(interpreter)
        .build()
        .unwrap()
}

/// stuck's forward(x) gives x * 2 on `interpreter` (`None`: any).
fn serves(object: &Object, interpreter: Option<usize>) {
    let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
    let options = interpreter.map(pinned);
    let out = object
        .call_with(None, &[Value::from(x)], &(), options.as_ref())
        .unwrap();
    assert_eq!(
        common::tensor_of(&out).as_slice::<f32>().unwrap(),
        &[2.0, 4.0]
    );
}

fn expect_stop(e: &Error, code: Code, python_type: &str, method: &str) {
    assert_eq!(e.code(), code, "{method}: {e}");
    assert_eq!(e.python_type(), Some(python_type), "{method}: {e}");
    assert!(
        e.traceback().unwrap_or("").contains(method),
        "{method}: the traceback shows where it stopped"
    );
}

/// Stops that the model lets end it: the interpreter serves on.
fn deadlines(object: &Object) {
    let timeout = Duration::from_millis(200);
    let options = CallOptions::builder()
        .interpreter(0)
        .timeout(timeout)
        .build()
        .unwrap();
    let start = Instant::now();
    let e = object
        .call_with(Some("spin"), &(), &(), Some(&options))
        .unwrap_err();
    assert!(start.elapsed() >= timeout);
    expect_stop(
        &e,
        Code::DeadlineExceeded,
        "manypy.DeadlineExceeded",
        "spin",
    );
    assert!(!e.message().contains("retired"), "{e}");
    // A property that loops, bounded the same way.
    let e = object
        .getattr("spinning_property", Some(&options))
        .unwrap_err();
    expect_stop(
        &e,
        Code::DeadlineExceeded,
        "manypy.DeadlineExceeded",
        "spinning_property",
    );
    serves(object, Some(0));
}

fn cancellation(object: &Object) {
    let token = CancelToken::new().unwrap();
    let options = CallOptions::builder().cancel_token(&token).build().unwrap();
    thread::scope(|s| {
        let call = s.spawn(|| object.call_with(Some("spin"), &(), &(), Some(&options)));
        thread::sleep(Duration::from_millis(150));
        // Cancelled from another thread, through a clone.
        let other = token.clone();
        s.spawn(move || other.cancel()).join().unwrap();
        let e = call.join().unwrap().unwrap_err();
        expect_stop(&e, Code::Cancelled, "manypy.Cancelled", "spin");
    });
    assert!(token.is_cancelled());
    // A cancelled token fails later calls at once.
    let e = object.call_with(
        None,
        &[Value::from(Tensor::from_vec(vec![1.0f32], &[1]).unwrap())],
        &(),
        Some(&options),
    );
    assert_eq!(e.unwrap_err().code(), Code::Cancelled);
    serves(object, Some(0));
    serves(object, Some(1));
}

/// A model that catches every stop: the stop escalates after `grace`, the
/// call ends, and interpreter 1 is retired; the pool replaces it in the
/// same index before the call returns. Last: the replacement's start is
/// what follows.
fn catching_the_stop_retires_the_interpreter(pool: &Pool, object: &Object, grace: Duration) {
    let timeout = Duration::from_millis(200);
    let options = CallOptions::builder()
        .interpreter(1)
        .timeout(timeout)
        .build()
        .unwrap();
    let start = Instant::now();
    let e = object
        .call_with(Some("spin_catching"), &(), &(), Some(&options))
        .unwrap_err();
    let elapsed = start.elapsed();
    expect_stop(
        &e,
        Code::DeadlineExceeded,
        "manypy.DeadlineExceeded",
        "spin_catching",
    );
    assert!(
        elapsed >= timeout + grace,
        "escalated after {elapsed:?}, before the grace ({grace:?}) had passed"
    );
    assert!(
        elapsed <= timeout + grace + Duration::from_millis(500),
        "escalated after {elapsed:?}"
    );
    assert!(e.message().contains("the interpreter was retired"), "{e}");
    let grace_text = format!("within its {} ms grace period", grace.as_millis());
    assert!(e.message().contains(&grace_text), "{e}");

    // Replaced before the call returned (docs/serving.md, "Retired
    // interpreters"): index 1 names the replacement, which serves once it
    // has started (calls pinned to it wait for it).
    let stats = pool.stats().unwrap();
    assert_eq!(stats.replaced, 1, "{stats:?}");
    assert!(!stats.no_room, "{stats:?}");
    pool.check_interpreter(1).unwrap();
    pool.check_interpreter(0).unwrap();
    assert_eq!(
        pool.check_interpreter(2).unwrap_err().code(),
        Code::OutOfRange
    );
    assert_eq!(
        pool.check_interpreter(usize::MAX).unwrap_err().code(),
        Code::OutOfRange
    );

    for _ in 0..4 {
        serves(object, None);
    }
    serves(object, Some(0));
    serves(object, Some(1));
}

/// One `stops` at a time: each ends by retiring an interpreter, which the
/// pool replaces with a new one starting in the background (a second of
/// CPU and of the dynamic loader), and the other's stops have time bounds.
/// Dropping the pool waits for the replacement's start, so the next one
/// begins on a quiet process.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn stops(mode: ThreadMode, stop_grace: Option<Duration>) {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (pool, object) = stuck(mode, stop_grace);
    deadlines(&object);
    cancellation(&object);
    // The C library's default grace is 100 ms.
    let grace = stop_grace.unwrap_or(Duration::from_millis(100));
    catching_the_stop_retires_the_interpreter(&pool, &object, grace);
}

/// The default stop grace.
#[test]
fn stops_direct() {
    stops(ThreadMode::Direct, None);
}

/// A grace set on the pool.
#[test]
fn stops_handoff() {
    stops(ThreadMode::Handoff, Some(Duration::from_millis(250)));
}

#[test]
fn options_out_of_range_are_errs() {
    let e = CallOptions::builder()
        .interpreter(usize::MAX)
        .build()
        .unwrap_err();
    assert_eq!(e.code(), Code::OutOfRange);
    let e = CallOptions::builder()
        .timeout(Duration::MAX)
        .build()
        .unwrap_err();
    assert_eq!(e.code(), Code::OutOfRange);
    let e = CallOptions::builder()
        .context("a\0", "b")
        .build()
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    // Refused before a pool is made: no interpreter starts.
    let e = Pool::builder()
        .stop_grace(Duration::MAX)
        .build()
        .unwrap_err();
    assert_eq!(e.code(), Code::OutOfRange);
    assert!(e.message().contains("stop grace"), "{e}");
}
