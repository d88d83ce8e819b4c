//! The Batcher on batching.pt: concurrent requests are stacked (`rows`
//! shows the batches formed) and split back (`forward`, `pair`); requests
//! whose shapes, dtypes or other arguments differ are not stacked; a result
//! with fewer rows fails every request with BadTensor, an exception with
//! the Python error; refusals at once; the batcher, object, package and
//! pool dropped in any order, with requests in flight.
//!
//! Batches form within `max_wait`; the assertions hold whatever batches
//! form (a request never sees more rows than could share its batch), and
//! "batches larger than 1 formed" relies only on dozens of requests
//! submitted at once against a wait of a second.
mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{expect_forward, load, row, serial, tensor_of, wait_until};
use futures::executor::block_on;
use futures::future::join_all;
use manypy::{Batcher, CallOptions, Code, Object, Pool, Profiler, Tensor, Value};

fn batcher(object: &Object, method: &str, max_batch: usize, max_wait: Duration) -> Batcher {
    Batcher::builder()
        .max_batch(max_batch)
        .max_wait(max_wait)
        .name(format!("test-{method}"))
        .build(object, Some(method))
        .unwrap()
}

/// `rows`' answer for one request: the rows of the batch it ran in.
fn batch_rows(out: &Value) -> usize {
    let t = tensor_of(out);
    let rows = t.to_vec::<f32>().unwrap();
    assert!(
        !rows.is_empty() && rows.iter().all(|&r| r == rows[0]),
        "{rows:?}"
    );
    rows[0] as usize
}

#[test]
fn concurrent_requests_are_stacked_and_split_back() {
    let _serial = serial();
    let profiler = Profiler::start(1.0).unwrap();
    let pool = Pool::new(2).unwrap();
    let model = load(&pool, "batching.pt");
    let rows = batcher(&model, "rows", 8, Duration::from_secs(1));
    // 32 requests at once: batches of up to 8 rows.
    let calls: Vec<_> = (0..32)
        .map(|_| rows.call_async(&[Value::from(row(0.0, 4))]).unwrap())
        .collect();
    let sizes: Vec<usize> = block_on(join_all(calls))
        .into_iter()
        .map(|o| batch_rows(&o.unwrap()))
        .collect();
    assert!(sizes.iter().all(|&n| (1..=8).contains(&n)), "{sizes:?}");
    assert!(sizes.iter().any(|&n| n > 1), "no batch formed: {sizes:?}");
    let metrics = profiler.prometheus().unwrap();
    assert!(metrics.contains("manypy_batch_size"), "{metrics}");
    assert!(metrics.contains("batcher=\"test-rows\""), "{metrics}");

    // Each request gets its own rows back, under tokio from many tasks.
    let forward = Arc::new(batcher(&model, "forward", 8, Duration::from_millis(20)));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .build()
        .unwrap();
    runtime.block_on(async {
        let tasks: Vec<_> = (0..256)
            .map(|i| {
                let forward = forward.clone();
                tokio::spawn(async move {
                    let out = forward
                        .call_async(&[Value::from(row(i as f32, 4))])?
                        .await?;
                    expect_forward(&out, i as f32);
                    Ok::<_, manypy::Error>(())
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap().unwrap();
        }
    });
    // And from synchronous callers on threads; a request of several rows.
    std::thread::scope(|s| {
        for t in 0..8 {
            let forward = &forward;
            s.spawn(move || {
                for i in 0..10 {
                    let v = (t * 10 + i) as f32;
                    expect_forward(&forward.call(&[Value::from(row(v, 4))]).unwrap(), v);
                }
            });
        }
    });
    let two = Tensor::from_vec(vec![1.0f32, 1.0, 2.0, 2.0], &[2, 2]).unwrap();
    let out = tensor_of(&forward.call(&[Value::from(two)]).unwrap());
    assert_eq!(
        (out.shape(), out.as_slice::<f32>().unwrap()),
        (&[2i64, 2][..], &[3.0f32, 3.0, 5.0, 5.0][..])
    );

    // A tuple and a dict of tensors are split; a non-tensor goes to each.
    let pair = batcher(&model, "pair", 8, Duration::from_millis(50));
    let calls: Vec<_> = (0..6)
        .map(|i| {
            pair.call_async(&[Value::from(row(i as f32, 3)), Value::from(row(1.0, 3))])
                .unwrap()
        })
        .collect();
    for (i, out) in block_on(join_all(calls)).into_iter().enumerate() {
        let out = Vec::<Value>::try_from(out.unwrap()).unwrap();
        let v = i as f32;
        assert_eq!(tensor_of(&out[0]).as_slice::<f32>().unwrap(), &[v + 1.0; 3]);
        let sum = tensor_of(out[1].get("sum").unwrap());
        assert_eq!(
            (sum.shape(), sum.as_slice::<f32>().unwrap()),
            (&[1i64][..], &[3.0 * v][..])
        );
        assert_eq!(out[1].get("label"), Some(&Value::Str("pair".into())));
    }
}

#[test]
fn requests_that_differ_are_not_stacked() {
    let _serial = serial();
    let pool = Pool::new(2).unwrap();
    let model = load(&pool, "batching.pt");
    let rows = batcher(&model, "rows", 8, Duration::from_millis(300));
    // Three groups: [1, 4] float32, [1, 3] float32, [1, 4] float64.
    let f64_row = || Tensor::from_vec(vec![0.0f64; 4], &[1, 4]).unwrap();
    let mut calls = Vec::new();
    for _ in 0..3 {
        calls.push((3, rows.call_async(&[Value::from(row(0.0, 4))]).unwrap()));
        calls.push((3, rows.call_async(&[Value::from(row(0.0, 3))]).unwrap()));
        calls.push((3, rows.call_async(&[Value::from(f64_row())]).unwrap()));
    }
    for (group, call) in calls {
        let n = batch_rows(&block_on(call).unwrap());
        assert!(
            (1..=group).contains(&n),
            "a batch of {n} rows mixed shapes or dtypes"
        );
    }
    // Other arguments that differ: each request is scaled by its own factor.
    let scale = batcher(&model, "scale", 8, Duration::from_millis(100));
    let calls: Vec<_> = (0..8)
        .map(|i| {
            let factor = (i % 2 + 2) as f64;
            (
                factor,
                scale
                    .call_async(&[Value::from(row(1.0, 2)), Value::Float(factor)])
                    .unwrap(),
            )
        })
        .collect();
    for (factor, call) in calls {
        assert_eq!(
            tensor_of(&block_on(call).unwrap())
                .as_slice::<f32>()
                .unwrap(),
            &[factor as f32; 2]
        );
    }
}

#[test]
fn a_failing_batch_fails_every_request() {
    let _serial = serial();
    let pool = Pool::new(2).unwrap();
    let model = load(&pool, "batching.pt");
    // Fewer rows than the batch had: BadTensor for each request.
    let drop_row = batcher(&model, "drop_row", 8, Duration::from_millis(50));
    let calls: Vec<_> = (0..6)
        .map(|_| drop_row.call_async(&[Value::from(row(1.0, 2))]).unwrap())
        .collect();
    for out in block_on(join_all(calls)) {
        assert_eq!(out.unwrap_err().code(), Code::BadTensor);
    }
    assert_eq!(
        drop_row
            .call(&[Value::from(row(1.0, 2))])
            .unwrap_err()
            .code(),
        Code::BadTensor
    );
    // An exception: the Python error, for each request.
    let fail = batcher(&model, "fail", 8, Duration::from_millis(50));
    let calls: Vec<_> = (0..6)
        .map(|_| fail.call_async(&[Value::from(row(1.0, 2))]).unwrap())
        .collect();
    for out in block_on(join_all(calls)) {
        let e = out.unwrap_err();
        assert_eq!(
            (e.code(), e.python_type()),
            (Code::Python, Some("ValueError")),
            "{e}"
        );
        assert!(e.message().contains("refused a batch of"), "{e}");
    }
    // The batcher serves on after failures.
    let forward = batcher(&model, "forward", 8, Duration::from_millis(1));
    expect_forward(&forward.call(&[Value::from(row(7.0, 4))]).unwrap(), 7.0);
}

#[test]
fn bad_requests_and_options_are_refused_at_once() {
    let _serial = serial();
    let pool = Pool::new(1).unwrap();
    let model = load(&pool, "batching.pt");
    let forward = batcher(&model, "forward", 8, Duration::from_millis(1));
    let refused = |args: &[Value]| forward.call_async(args).map(drop).unwrap_err().code();
    assert_eq!(
        refused(&[Value::Int(1)]),
        Code::InvalidArgument,
        "no tensor"
    );
    assert_eq!(refused(&[]), Code::InvalidArgument, "no argument");
    let pair = batcher(&model, "pair", 8, Duration::from_millis(1));
    let two_rows = Tensor::from_vec(vec![0.0f32; 6], &[2, 3]).unwrap();
    let e = pair
        .call(&[Value::from(row(0.0, 3)), Value::from(two_rows)])
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "different rows: {e}");
    let scalar = Tensor::from_vec(vec![1.0f32], &[]).unwrap();
    let dim1 = Batcher::builder()
        .batch_dim(1)
        .build(&model, Some("forward"))
        .unwrap();
    assert_eq!(
        dim1.call(&[Value::from(scalar)]).unwrap_err().code(),
        Code::InvalidArgument,
        "no batch dimension"
    );
    // Options out of range.
    let build = |b: manypy::BatcherBuilder| b.build(&model, None).map(drop).unwrap_err().code();
    assert_eq!(build(Batcher::builder().max_batch(0)), Code::OutOfRange);
    assert_eq!(build(Batcher::builder().max_batch(65537)), Code::OutOfRange);
    assert_eq!(
        build(Batcher::builder().max_wait(Duration::from_secs(61))),
        Code::OutOfRange
    );
    assert_eq!(
        build(Batcher::builder().max_wait(Duration::MAX)),
        Code::OutOfRange
    );
    assert_eq!(
        build(Batcher::builder().batch_dim(usize::MAX)),
        Code::OutOfRange
    );
    assert_eq!(
        build(Batcher::builder().name("nul\0")),
        Code::InvalidArgument
    );
    assert_eq!(
        Batcher::builder()
            .build(&model, Some("nul\0"))
            .map(drop)
            .unwrap_err()
            .code(),
        Code::InvalidArgument
    );
}

#[test]
fn a_request_stopped_while_it_waits_is_dropped_at_once() {
    let _serial = serial();
    let pool = Pool::new(1).unwrap();
    let model = load(&pool, "batching.pt");
    // A wait of a minute: the batch forms only when the batcher is dropped.
    let rows = batcher(&model, "rows", 8, Duration::from_secs(60));
    let first = rows.call_async(&[Value::from(row(0.0, 4))]).unwrap();
    let dropped = rows.call_async(&[Value::from(row(0.0, 4))]).unwrap();
    let short = CallOptions::builder()
        .timeout(Duration::from_millis(1))
        .build()
        .unwrap();
    let late = rows
        .call_with_async(&[Value::from(row(0.0, 4))], &(), Some(&short))
        .unwrap();
    let last = rows.call_async(&[Value::from(row(0.0, 4))]).unwrap();
    drop(dropped);
    // Completes at its deadline, while the others still wait for the batch.
    assert_eq!(block_on(late).unwrap_err().code(), Code::DeadlineExceeded);
    assert!(
        !first.is_complete() && !last.is_complete(),
        "the batch ran before its wait ended"
    );
    // Dropping the batcher sends the waiting requests at once: the two left.
    drop(rows);
    for call in [first, last] {
        assert_eq!(
            batch_rows(&block_on(call).unwrap()),
            2,
            "stopped requests stayed in the batch"
        );
    }
    wait_until("the pool to drain", || pool.in_flight() == 0);
}

#[test]
#[ignore = "slow: every drop order of batchers, objects, packages and pools; rust_tests runs it (--include-ignored)"]
fn batchers_objects_packages_and_pools_drop_in_any_order() {
    let _serial = serial();
    // Batcher (B), object (O), package (K), pool (P), with requests in flight.
    let orders: [[usize; 4]; 6] = [
        [0, 1, 2, 3],
        [3, 2, 1, 0],
        [1, 3, 0, 2],
        [2, 0, 3, 1],
        [3, 1, 2, 0],
        [1, 2, 3, 0],
    ];
    let keep = Pool::new(2).unwrap(); // its interpreters stay warm between rounds
    for order in orders {
        let p = keep.clone();
        let k = p.load_package(common::archive("batching.pt")).unwrap();
        let o = k.load_pickle("model", "model.pkl").unwrap();
        let b = batcher(&o, "forward", 4, Duration::from_millis(20));
        let calls: Vec<_> = (0..40)
            .map(|i| b.call_async(&[Value::from(row(i as f32, 4))]).unwrap())
            .collect();
        let mut slots: Vec<Option<Box<dyn std::any::Any + Send>>> = vec![
            Some(Box::new(b)),
            Some(Box::new(o)),
            Some(Box::new(k)),
            Some(Box::new(p)),
        ];
        for (step, i) in order.into_iter().enumerate() {
            slots[i] = None;
            if step == 1 {
                // Half dropped: a handle still held keeps serving.
                if let Some(b) = slots[0].as_ref().and_then(|b| b.downcast_ref::<Batcher>()) {
                    expect_forward(&b.call(&[Value::from(row(1.0, 4))]).unwrap(), 1.0);
                }
            }
        }
        // Every accepted request completes as usual.
        for (i, out) in block_on(join_all(calls)).into_iter().enumerate() {
            expect_forward(&out.unwrap(), i as f32);
        }
    }
    // A batcher that outlives every other handle still serves.
    let pool = Pool::new(1).unwrap();
    let object = load(&pool, "batching.pt");
    let b = batcher(&object, "forward", 4, Duration::from_millis(1));
    drop(object);
    drop(pool);
    expect_forward(
        &block_on(b.call_async(&[Value::from(row(2.0, 4))]).unwrap()).unwrap(),
        2.0,
    );
    wait_until("the kept pool to drain", || keep.in_flight() == 0);
}
