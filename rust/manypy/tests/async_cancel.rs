//! Dropping a CallFuture cancels its call: one still waiting for its
//! interpreter never runs, a running one is stopped. The caller's own
//! cancel token and timeout stop asynchronous calls too, while queued and
//! while running.
//!
//! Whether a call ran is seen by operator callbacks: every torch operator a
//! call runs reports the call's request id, and batching.pt's forward runs
//! `x * 2 + 1`. A pool of one interpreter is held by stuck.pt's `spin`
//! until a token is cancelled, so a call submitted meanwhile certainly
//! waits, whatever the timing; a call is certainly running once stuck.pt's
//! `spin_torch` (a loop of torch operators) reports operators.
mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{expect_forward, held_pool, load, row, serial, wait_until};
use futures::executor::block_on;
use manypy::{
    CallFuture, CallOptions, CallOptionsBuilder, CancelToken, Code, Object, OpCallbackRegistration,
    OpCallbacks, Tensor, Value,
};

/// Counts the operators run per request id.
struct Ran {
    counts: Arc<Mutex<HashMap<String, usize>>>,
    _registration: OpCallbackRegistration,
}

impl Ran {
    fn watch() -> Ran {
        let counts = Arc::new(Mutex::new(HashMap::<String, usize>::new()));
        let log = counts.clone();
        let registration = OpCallbacks::new()
            .on_enter(move |e| {
                if e.request_id().starts_with("async-cancel-") {
                    *log.lock()
                        .unwrap()
                        .entry(e.request_id().to_owned())
                        .or_default() += 1;
                }
            })
            .register()
            .unwrap();
        Ran {
            counts,
            _registration: registration,
        }
    }

    fn operators(&self, request: &str) -> usize {
        self.counts
            .lock()
            .unwrap()
            .get(request)
            .copied()
            .unwrap_or(0)
    }
}

fn context(request: &str) -> CallOptions {
    CallOptions::builder()
        .context("batching", request)
        .build()
        .unwrap()
}

/// Submits stuck.pt's `spin_torch` (a loop of torch operators, stopped
/// between two of them) with `options`, whose request id starts with
/// "async-cancel-", and returns once its operators run: certainly running.
fn running(ran: &Ran, stuck: &Object, request: &str, options: CallOptionsBuilder) -> CallFuture {
    let x = Tensor::from_vec(vec![0.5f32, 0.0, 0.0, 0.5], &[2, 2]).unwrap();
    let options = options.context("stuck", request).build().unwrap();
    let call = stuck
        .call_with_async(Some("spin_torch"), &[Value::from(x)], &(), Some(&options))
        .unwrap();
    wait_until("spin_torch to run", || ran.operators(request) > 0);
    call
}

#[test]
fn a_dropped_future_whose_call_waits_never_runs() {
    let _serial = serial();
    let ran = Ran::watch();
    let held = held_pool(0);
    let batching = load(&held.pool, "batching.pt");
    let x = || [Value::from(row(1.0, 4))];
    let dropped = batching
        .call_with_async(None, &x(), &(), Some(&context("async-cancel-dropped")))
        .unwrap();
    assert_eq!(held.pool.queued(), 1);
    drop(dropped);
    // Its completion (Cancelled, not run) arrives while spin still runs.
    wait_until("the dropped call to complete", || {
        held.pool.in_flight() == 1
    });
    let pool = held.pool.clone();
    held.release();
    // A later call on the one interpreter runs after anything queued before it.
    let after = batching
        .call_with_async(None, &x(), &(), Some(&context("async-cancel-after")))
        .unwrap();
    expect_forward(&block_on(after).unwrap(), 1.0);
    assert!(
        ran.operators("async-cancel-after") > 0,
        "the callbacks see forward's operators"
    );
    assert_eq!(
        ran.operators("async-cancel-dropped"),
        0,
        "the dropped call ran"
    );
    wait_until("the pool to drain", || pool.in_flight() == 0);
}

#[test]
fn a_dropped_future_stops_its_running_call() {
    let _serial = serial();
    let ran = Ran::watch();
    let pool = manypy::Pool::new(1).unwrap();
    let stuck = load(&pool, "stuck.pt");
    let token = CancelToken::new().unwrap();
    let call = running(
        &ran,
        &stuck,
        "async-cancel-running",
        CallOptions::builder().cancel_token(&token),
    );
    // Dropping its future stops it, and the interpreter serves.
    drop(call);
    wait_until("the stopped call to complete", || pool.in_flight() == 0);
    let batching = load(&pool, "batching.pt");
    let bounded = CallOptions::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let out = block_on(
        batching
            .call_with_async(None, &[Value::from(row(2.0, 4))], &(), Some(&bounded))
            .unwrap(),
    );
    expect_forward(&out.unwrap(), 2.0);
    // The caller's token was never cancelled: only the dropped call stopped.
    assert!(!token.is_cancelled());
    // A future dropped after its call completed cancels nothing.
    let done = batching.call_async(&[Value::from(row(3.0, 4))]).unwrap();
    wait_until("the call to complete", || done.is_complete());
    drop(done);
    wait_until("the pool to drain", || pool.in_flight() == 0);
}

#[test]
fn the_callers_token_stops_queued_and_running_async_calls() {
    let _serial = serial();
    let ran = Ran::watch();
    let held = held_pool(0);
    let batching = load(&held.pool, "batching.pt");
    // One token shared by a queued call and, later, a running one.
    let token = CancelToken::new().unwrap();
    let options = CallOptions::builder()
        .cancel_token(&token)
        .context("batching", "async-cancel-token")
        .build()
        .unwrap();
    let queued = batching
        .call_with_async(None, &[Value::from(row(1.0, 4))], &(), Some(&options))
        .unwrap();
    let spinning = held
        .stuck
        .call_with_async(Some("spin"), &(), &(), Some(&options))
        .unwrap();
    assert_eq!(held.pool.queued(), 2);
    // Cancelled from another thread.
    let other = token.clone();
    std::thread::spawn(move || other.cancel()).join().unwrap();
    assert_eq!(block_on(queued).unwrap_err().code(), Code::Cancelled);
    let pool = held.pool.clone();
    held.release();
    assert_eq!(block_on(spinning).unwrap_err().code(), Code::Cancelled);
    assert_eq!(
        ran.operators("async-cancel-token"),
        0,
        "a cancelled queued call ran"
    );

    // The token stops a running call, asked after it started.
    let token = CancelToken::new().unwrap();
    let options = CallOptions::builder().cancel_token(&token).build().unwrap();
    let stuck = load(&pool, "stuck.pt");
    let call = running(
        &ran,
        &stuck,
        "async-cancel-running-token",
        CallOptions::builder().cancel_token(&token),
    );
    token.cancel();
    let e = block_on(call).unwrap_err();
    assert_eq!(e.code(), Code::Cancelled, "{e}");
    assert_eq!(
        e.python_type(),
        Some("manypy.Cancelled"),
        "stopped in Python: {e:?}"
    );
    // Calls made with the cancelled token are refused at once.
    assert_eq!(
        stuck
            .call_with_async(None, &[Value::from(row(1.0, 1))], &(), Some(&options))
            .unwrap_err()
            .code(),
        Code::Cancelled
    );
    // Many calls through one token: dropping their futures does not cancel it.
    let token = CancelToken::new().unwrap();
    let options = CallOptions::builder().cancel_token(&token).build().unwrap();
    for i in 0..300 {
        let call = batching
            .call_with_async(None, &[Value::from(row(i as f32, 4))], &(), Some(&options))
            .unwrap();
        if i % 2 == 0 {
            expect_forward(&block_on(call).unwrap(), i as f32);
        }
    }
    assert!(!token.is_cancelled());
    wait_until("the pool to drain", || pool.in_flight() == 0);
}

#[test]
fn a_deadline_passing_while_queued_completes_without_running() {
    let _serial = serial();
    let ran = Ran::watch();
    let held = held_pool(0);
    let batching = load(&held.pool, "batching.pt");
    let options = CallOptions::builder()
        .timeout(Duration::from_millis(100))
        .context("batching", "async-cancel-late")
        .build()
        .unwrap();
    let late = batching
        .call_with_async(None, &[Value::from(row(1.0, 4))], &(), Some(&options))
        .unwrap();
    // Spin holds the interpreter until after the deadline has passed and
    // been reported.
    let e = block_on(late).unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
    assert!(held.pool.in_flight() >= 1, "spin still runs");
    held.release();
    assert_eq!(ran.operators("async-cancel-late"), 0, "the late call ran");

    // A running call's timeout stops it: spin_torch never returns by itself,
    // so operators run and then DeadlineExceeded mean it was stopped running
    // (3 s: a generous bound for it to start, not a timing check).
    let pool = batching.package().pool().clone();
    let stuck = load(&pool, "stuck.pt");
    let options = CallOptions::builder()
        .timeout(Duration::from_secs(3))
        .context("stuck", "async-cancel-running-late")
        .build()
        .unwrap();
    let x = Tensor::from_vec(vec![0.5f32, 0.0, 0.0, 0.5], &[2, 2]).unwrap();
    let call = stuck
        .call_with_async(Some("spin_torch"), &[Value::from(x)], &(), Some(&options))
        .unwrap();
    let e = block_on(call).unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
    assert!(
        ran.operators("async-cancel-running-late") > 0,
        "spin_torch never ran: {e:?}"
    );
}

#[test]
fn a_dropped_future_stops_a_script_call_on_the_host() {
    let _serial = serial();
    let ran = Ran::watch();
    // loop_script.pt: forward(x, n) adds 1 n times, stopped before its next
    // operator; here it would run for days.
    let script = manypy::ScriptModule::load(common::archive("loop_script.pt")).unwrap();
    let options = CallOptions::builder()
        .context("loop", "async-cancel-script")
        .build()
        .unwrap();
    let x = Tensor::from_vec(vec![0.0f32], &[1]).unwrap();
    let call = script
        .call_with_async(
            None,
            &[Value::from(&x), Value::Int(1 << 50)],
            &(),
            Some(&options),
        )
        .unwrap();
    wait_until("the script to run", || {
        ran.operators("async-cancel-script") > 0
    });
    drop(call);
    // Stopped: its operators stop coming (checked over a few intervals, so
    // that one still running when the cancel came is not counted).
    let mut last = ran.operators("async-cancel-script");
    let mut stable = 0;
    wait_until("the script's operators to stop", || {
        std::thread::sleep(Duration::from_millis(50));
        let now = ran.operators("async-cancel-script");
        stable = if now == last { stable + 1 } else { 0 };
        last = now;
        stable >= 4
    });
    // The host's workers serve on.
    let out = block_on(
        script
            .call_async(&[Value::from(&x), Value::Int(3)])
            .unwrap(),
    )
    .unwrap();
    assert_eq!(common::tensor_of(&out).as_slice::<f32>().unwrap(), &[3.0]);
}
