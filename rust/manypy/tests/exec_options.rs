//! `Pool::exec_with` and `Pool::eval_with`: source run with call options is
//! bounded as an object call is. Plain Python that lets the stop end it
//! (`while True:` / `pass`) leaves its interpreter serving, so nothing here
//! retires one; this file has its own pool of 2 interpreters. The stop is
//! raised at the next line, so the loops span two lines.
use std::thread;
use std::time::Duration;

use manypy::{CallOptions, CancelToken, Code, Pool, Value};

/// A function that never returns, for expressions.
const SPIN: &str = "def spin():\n    while True:\n        pass\n";

fn pinned(interpreter: usize) -> CallOptions {
    CallOptions::builder()
        .interpreter(interpreter)
        .build()
        .unwrap()
}

#[test]
fn exec_and_eval_with_options() {
    let pool = Pool::new(2).unwrap();

    // The options' interpreter: each interpreter keeps its own globals.
    pool.exec_with("where = 'zero'", Some(&pinned(0))).unwrap();
    pool.exec_with("where = 'one'", Some(&pinned(1))).unwrap();
    assert_eq!(
        pool.eval_with("where", Some(&pinned(0))).unwrap(),
        Value::from("zero")
    );
    assert_eq!(
        pool.eval_with("where", Some(&pinned(1))).unwrap(),
        Value::from("one")
    );
    // No options: any interpreter, unbounded.
    pool.exec_with("x = 1", None).unwrap();
    assert_eq!(pool.eval_with("6 * 7", None).unwrap(), Value::Int(42));
    let e = pool
        .exec_with(
            "pass",
            Some(&CallOptions::builder().interpreter(2).build().unwrap()),
        )
        .unwrap_err();
    assert_eq!(e.code(), Code::OutOfRange, "{e}");

    // A timeout stops a loop that never ends.
    let bounded = CallOptions::builder()
        .interpreter(0)
        .timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let e = pool
        .exec_with("while True:\n    pass\n", Some(&bounded))
        .unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
    assert_eq!(e.python_type(), Some("manypy.DeadlineExceeded"), "{e}");
    assert!(!e.message().contains("retired"), "{e}");
    // The same for an expression.
    pool.exec_with(SPIN, Some(&pinned(0))).unwrap();
    let e = pool.eval_with("spin()", Some(&bounded)).unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
    // The interpreter serves on, its globals intact.
    pool.check_interpreter(0).unwrap();
    assert_eq!(
        pool.eval_with("where", Some(&pinned(0))).unwrap(),
        Value::from("zero")
    );

    // A cancel token stops an eval while it runs: the expression creates a
    // file first, and the token is cancelled once it exists.
    let token = CancelToken::new().unwrap();
    let cancellable = CallOptions::builder()
        .interpreter(1)
        .cancel_token(&token)
        .build()
        .unwrap();
    let started = std::env::temp_dir().join(format!("manypy_eval_started_{}", std::process::id()));
    let _ = std::fs::remove_file(&started);
    pool.exec_with(SPIN, Some(&pinned(1))).unwrap();
    let expression = format!(
        "open({:?}, 'w').close() or spin()",
        started.to_str().unwrap()
    );
    let e = thread::scope(|s| {
        let eval = s.spawn(|| pool.eval_with(&expression, Some(&cancellable)));
        while !started.exists() && !eval.is_finished() {
            thread::sleep(Duration::from_millis(1));
        }
        token.cancel();
        eval.join().unwrap()
    })
    .unwrap_err();
    assert!(
        started.exists(),
        "the eval ran before it was cancelled: {e}"
    );
    let _ = std::fs::remove_file(&started);
    assert_eq!(e.code(), Code::Cancelled, "{e}");
    // Later uses of the token fail at once; the interpreter serves on.
    assert_eq!(
        pool.exec_with("pass", Some(&cancellable))
            .unwrap_err()
            .code(),
        Code::Cancelled
    );
    pool.check_interpreter(1).unwrap();
    assert_eq!(
        pool.eval_with("where", Some(&pinned(1))).unwrap(),
        Value::from("one")
    );
}
