//! Model hot swap under load, the pattern docs/rust.md describes ("Model
//! hot swap"): the current version is an `Arc` behind a `RwLock`; each
//! request clones the `Arc` under the read lock and calls outside it; a
//! swap loads the new version beside the old, replaces the `Arc` under the
//! write lock, and drops its own reference. The old version unloads when
//! the last request holding it ends (manypy_object_share's role in C is
//! the `Arc`'s here).
//!
//! versioned.pt's forward(x) returns x's shape filled with its version
//! number, and version() returns the number, so every result says which
//! version served it.
mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::thread;
use std::time::{Duration, Instant};

use common::{archive, tensor_of};
use manypy::{Code, Object, Pool, Result, Tensor, Value};

/// A loaded version and the number it should answer with.
struct Version {
    number: i64,
    model: Object,
}

fn load_version(pool: &Pool, name: &str, number: i64) -> Result<Arc<Version>> {
    let model = pool
        .load_package(archive(name))?
        .load_pickle("model", "model.pkl")?;
    Ok(Arc::new(Version { number, model }))
}

/// What a request does: take the current version, call it outside the lock.
fn current(slot: &RwLock<Arc<Version>>) -> Arc<Version> {
    slot.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// One request on `version`, checked: forward's result is filled with the
/// version's number (or version() returns it). `asynchronous`: submitted,
/// then the request's reference dropped before waiting, so the call alone
/// holds the object.
fn request(version: Arc<Version>, k: u64, asynchronous: bool) -> std::result::Result<(), String> {
    let number = version.number;
    let shape = [1 + (k % 3) as i64, 4];
    let x = Tensor::from_vec(vec![0.5f32; (shape[0] * shape[1]) as usize], &shape).unwrap();
    let out = if k % 5 == 0 {
        version.model.call_method("version", &())
    } else if asynchronous {
        let future = version
            .model
            .call_async(&[Value::from(x)])
            .map_err(|e| format!("refused: {e}"))?;
        drop(version);
        futures::executor::block_on(future)
    } else {
        version.model.call(&[Value::from(x)])
    }
    .map_err(|e| format!("call {k} on version {number}: {e}"))?;
    match out {
        Value::Int(n) if n == number => Ok(()),
        Value::Int(n) => Err(format!("version() of version {number} said {n}")),
        v => {
            let t = tensor_of(&v);
            let expected = vec![number as f32; (shape[0] * shape[1]) as usize];
            if t.shape() == shape && t.as_slice::<f32>().unwrap() == expected.as_slice() {
                Ok(())
            } else {
                Err(format!(
                    "version {number} gave {:?} {:?}",
                    t.shape(),
                    t.as_slice::<f32>()
                ))
            }
        }
    }
}

#[test]
#[ignore = "slow: versions swapped under concurrent calls; rust_tests runs it (--include-ignored)"]
fn versions_swap_under_load_and_every_call_gets_the_version_it_used() {
    let pool = Pool::new(2).unwrap();
    let slot = RwLock::new(load_version(&pool, "version_1.pt", 1).unwrap());
    let stop = AtomicBool::new(false);
    let calls = AtomicU64::new(0);
    let failures = Mutex::new(Vec::<String>::new());
    let retired: Mutex<Vec<(i64, Weak<Version>)>> = Mutex::new(Vec::new());
    let mut swaps = 0;
    let mut refused = 0;

    thread::scope(|s| {
        for t in 0..8u64 {
            let (slot, stop, calls, failures) = (&slot, &stop, &calls, &failures);
            s.spawn(move || {
                let mut k = t;
                while !stop.load(Ordering::Relaxed) {
                    if let Err(e) = request(current(slot), k, t % 2 == 1) {
                        failures.lock().unwrap().push(e);
                    }
                    calls.fetch_add(1, Ordering::Relaxed);
                    k += 8;
                }
            });
        }
        let start = Instant::now();
        let mut next = 2;
        while start.elapsed() < Duration::from_secs(5) {
            thread::sleep(Duration::from_millis(200));
            if swaps % 4 == 3 {
                // A version that fails to load: the old one serves on.
                let e = load_version(&pool, "malformed/not_a_zip.pt", 99)
                    .err()
                    .expect("a bad archive loads");
                assert_eq!(e.code(), Code::BadArchive, "{e}");
                let e = load_version(&pool, "no_such_version.pt", 99)
                    .err()
                    .expect("a missing archive loads");
                assert_eq!(e.code(), Code::NotFound, "{e}");
                refused += 1;
            } else {
                // Loaded beside the old version, outside the lock; then
                // switched, and the old one let go of.
                let name = if next == 1 {
                    "version_1.pt"
                } else {
                    "version_2.pt"
                };
                let new = load_version(&pool, name, next).unwrap();
                let old = std::mem::replace(&mut *slot.write().unwrap(), new);
                retired
                    .lock()
                    .unwrap()
                    .push((old.number, Arc::downgrade(&old)));
                drop(old);
                next = 3 - next;
            }
            swaps += 1;
        }
        stop.store(true, Ordering::Relaxed);
    });

    let failures = failures.into_inner().unwrap();
    let calls = calls.into_inner();
    eprintln!(
        "{calls} calls, {swaps} swaps ({refused} refused), {} failures",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {calls} calls failed; first: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    assert!(swaps >= 10, "only {swaps} swaps");
    assert!(refused >= 2);
    assert!(calls > 100, "only {calls} calls in 5 s");
    // Every version swapped out was unloaded once its last call ended.
    for (number, old) in retired.into_inner().unwrap() {
        assert!(
            old.upgrade().is_none(),
            "version {number} is still held after every request ended"
        );
    }
    // The current one still serves, on both interpreters.
    let version = current(&slot);
    for i in 0..2 {
        let pinned = manypy::CallOptions::builder()
            .interpreter(i)
            .build()
            .unwrap();
        let out = version
            .model
            .call_with(Some("version"), &(), &(), Some(&pinned))
            .unwrap();
        assert_eq!(out, Value::Int(version.number));
    }
    let stats = pool.stats().unwrap();
    assert_eq!(stats.completed.total(), stats.completed.ok(), "{stats:?}");
}
