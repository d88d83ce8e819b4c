//! A call that no stop can end (hostile.pt's `hold_gil`: C code that holds
//! the GIL for 3 s) makes its interpreter lost twice the stop grace after
//! its deadline: `PoolStats::lost` counts it, `check_interpreter` says why,
//! and a HANDOFF caller gets its deadline's error while the call still
//! runs. When the call returns, the interpreter serves again
//! (docs/serving.md, "Lost interpreters"). One pool of 1 interpreter.
mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::archive;
use manypy::{CallOptions, Code, Pool, ThreadMode, Value};

/// Polls `cond` until it holds; panics after 20 s (a hang, not a timing).
fn eventually(what: &str, cond: impl Fn() -> bool) {
    let bound = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < bound, "{what}: not within 20 s");
        thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_call_holding_the_gil_makes_its_interpreter_lost() {
    let pool = Pool::builder()
        .interpreters(1)
        .thread_mode(ThreadMode::Handoff)
        .build()
        .unwrap();
    let object = pool
        .load_package(archive("hostile.pt"))
        .unwrap()
        .load_pickle("model", "model.pkl")
        .unwrap();
    let options = CallOptions::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let e = thread::scope(|s| {
        let call = s.spawn(|| {
            object
                .call_with(
                    Some("evade_stop"),
                    &[Value::from("hold_gil")],
                    &(),
                    Some(&options),
                )
                .unwrap_err()
        });
        eventually("the interpreter lost", || pool.stats().unwrap().lost == 1);
        let s = pool.stats().unwrap();
        assert_eq!(
            s.starting + s.ready + s.busy + s.broken + s.lost,
            1,
            "{s:?}"
        );
        assert!(!s.serving(), "{s:?}");
        let broken = pool.check_interpreter(0).unwrap_err();
        assert_eq!(broken.code(), Code::InterpreterBroken);
        assert!(broken.message().contains("it is lost"), "{broken}");
        call.join().unwrap()
    });
    assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
    assert!(e.message().contains("did not end"), "{e}");
    assert_eq!(
        pool.stats().unwrap().lost,
        1,
        "the caller was told only after the call ended"
    );
    eventually("the interpreter back", || pool.stats().unwrap().lost == 0);
    pool.check_interpreter(0).unwrap();
}
