//! Asynchronous calls: CallFuture driven by a multi-threaded tokio runtime
//! and by futures' block_on, on objects and TorchScript modules, with
//! outputs checked; refusals from call_async itself, failures from the
//! future; a waker that panics; OVERLOADED past the pool's queue limit;
//! every handle dropped with thousands of calls in flight; a result nobody
//! takes is freed; 16,000 calls from 8 threads awaited, dropped, timed out
//! and cancelled at random.
//!
//! The tests run one at a time (common::serial): the queue tests fill a
//! pool of one interpreter on purpose, with stuck.pt's `spin` holding it
//! until a token is cancelled, so nothing depends on timing.
mod common;

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use common::{archive, expect_forward, held_pool, load, row, serial, tensor_of, wait_until};
use futures::executor::block_on;
use futures::future::join_all;
use manypy::{CallOptions, CancelToken, Code, Pool, ScriptModule, Tensor, ThreadMode, Value};

#[test]
fn tokio_multi_thread_runtime_drives_many_concurrent_calls() {
    let _serial = serial();
    let pool = Pool::new(2).unwrap();
    let batching = Arc::new(load(&pool, "batching.pt"));
    let heavy = Arc::new(load(&pool, "python_heavy.pt"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut tasks = Vec::new();
        for i in 0..400 {
            let model = batching.clone();
            // Spawned: the future is Send + 'static and moves between workers.
            tasks.push(tokio::spawn(async move {
                let v = i as f32;
                let out = model.call_async(&[Value::from(row(v, 4))])?.await?;
                expect_forward(&out, v);
                Ok::<_, manypy::Error>(())
            }));
        }
        for _ in 0..16 {
            let model = heavy.clone();
            tasks.push(tokio::spawn(async move {
                let (x, kwargs) = common::python_heavy_case();
                let out = model
                    .call_with_async(None, &[Value::from(x)], &kwargs, None)?
                    .await?;
                common::check_python_heavy(&out);
                Ok(())
            }));
        }
        for task in tasks {
            task.await.expect("the task panicked").unwrap();
        }
        // A timeout that never passes does not hurt (tokio's own timer too).
        let options = CallOptions::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        let call = batching
            .call_with_async(None, &[Value::from(row(3.0, 4))], &(), Some(&options))
            .unwrap();
        let out = tokio::time::timeout(Duration::from_secs(60), call)
            .await
            .expect("a hang")
            .unwrap();
        expect_forward(&out, 3.0);
    });
    assert_eq!(pool.in_flight(), 0);
}

#[test]
fn block_on_drives_calls_on_objects_and_script_modules() {
    let _serial = serial();
    // HANDOFF here, DIRECT elsewhere: asynchronous calls run on the home
    // threads in both.
    let pool = Pool::builder()
        .interpreters(2)
        .thread_mode(ThreadMode::Handoff)
        .build()
        .unwrap();
    let batching = load(&pool, "batching.pt");
    let futures: Vec<_> = (0..200)
        .map(|i| {
            batching
                .call_async(&[Value::from(row(i as f32, 4))])
                .unwrap()
        })
        .collect();
    for (i, out) in block_on(join_all(futures)).into_iter().enumerate() {
        expect_forward(&out.unwrap(), i as f32);
    }
    // A method and a non-tensor argument.
    let out = block_on(
        batching
            .call_method_async("scale", &[Value::from(row(2.0, 3)), Value::Float(1.5)])
            .unwrap(),
    );
    assert_eq!(
        tensor_of(&out.unwrap()).as_slice::<f32>().unwrap(),
        &[3.0; 3]
    );

    // TorchScript on the host's worker threads, with kwargs.
    let script = ScriptModule::load(archive("python_heavy_script.pt")).unwrap();
    let (x, kwargs) = common::python_heavy_case();
    let calls: Vec<_> = (0..8)
        .map(|_| {
            script
                .call_with_async(None, &[Value::from(&x)], &kwargs, None)
                .unwrap()
        })
        .collect();
    for out in block_on(join_all(calls)) {
        common::check_python_heavy(&out.unwrap());
    }
    let resnet = ScriptModule::load(archive("resnet18_script.pt")).unwrap();
    common::check_resnet(
        &block_on(
            resnet
                .call_async(&[Value::from(common::resnet_input())])
                .unwrap(),
        )
        .unwrap(),
    );
    // A missing method: refused at submission (TorchScript knows its
    // methods), and either way an Err with its code.
    let e = script
        .call_with_async(Some("no_such"), &(), &(), None)
        .and_then(block_on)
        .unwrap_err();
    assert_eq!(e.code(), Code::NoSuchName, "{e}");
}

#[test]
fn refusals_come_from_call_async_and_failures_from_the_future() {
    let _serial = serial();
    let pool = Pool::new(1).unwrap();
    let batching = load(&pool, "batching.pt");
    let x = || [Value::from(row(1.0, 4))];

    // Refused at submission: Err at once, no future.
    let e = batching.call_method_async("bad\0name", &x()).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    let token = CancelToken::new().unwrap();
    token.cancel();
    let cancelled = CallOptions::builder().cancel_token(&token).build().unwrap();
    let e = batching
        .call_with_async(None, &x(), &(), Some(&cancelled))
        .unwrap_err();
    assert_eq!(e.code(), Code::Cancelled, "{e}");
    let pinned = CallOptions::builder().interpreter(5).build().unwrap();
    let e = batching
        .call_with_async(None, &x(), &(), Some(&pinned))
        .unwrap_err();
    assert_eq!(e.code(), Code::OutOfRange, "{e}");

    // Accepted, then failed: the error comes from the future.
    let e = block_on(batching.call_method_async("no_such_method", &x()).unwrap()).unwrap_err();
    assert_eq!(e.code(), Code::NoSuchName, "{e}");
    let e = block_on(batching.call_method_async("fail", &x()).unwrap()).unwrap_err();
    assert_eq!(e.code(), Code::Python, "{e}");
    assert_eq!(e.python_type(), Some("ValueError"));
    assert!(e.traceback().unwrap_or("").contains("in fail"), "{e:?}");
    let e = block_on(batching.call_method_async("scale", &x()).unwrap()).unwrap_err();
    assert_eq!(
        e.python_type(),
        Some("TypeError"),
        "a missing argument: {e}"
    );

    // is_complete, and a future that completed before its first poll.
    let call = batching.call_async(&x()).unwrap();
    wait_until("the call to complete", || call.is_complete());
    expect_forward(&block_on(call).unwrap(), 1.0);
}

/// A waker that records that it was woken, then panics.
struct PanickingWaker(AtomicBool);

impl Wake for PanickingWaker {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
        panic!("a waker that panics (expected by the test)");
    }
}

/// A waker that only counts.
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn a_panicking_waker_loses_no_completion() {
    let _serial = serial();
    let held = held_pool(0);
    let batching = load(&held.pool, "batching.pt");
    let mut call = batching.call_async(&[Value::from(row(4.0, 4))]).unwrap();
    // Queued behind spin: certainly pending, so the completion must wake.
    let panicking = Arc::new(PanickingWaker(AtomicBool::new(false)));
    let waker = Waker::from(panicking.clone());
    assert!(std::pin::Pin::new(&mut call)
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    drop(waker);
    let panics = manypy::callback_panics();
    held.token.cancel();
    wait_until("the panicking waker to be woken", || {
        panicking.0.load(Ordering::SeqCst)
    });
    wait_until("the panic to be counted", || {
        manypy::callback_panics() > panics
    });
    // The outcome was stored before the waker ran: the next poll has it.
    let counting = Arc::new(CountingWaker(AtomicUsize::new(0)));
    let waker = Waker::from(counting.clone());
    match std::pin::Pin::new(&mut call).poll(&mut Context::from_waker(&waker)) {
        Poll::Ready(out) => expect_forward(&out.unwrap(), 4.0),
        Poll::Pending => panic!("the completion was lost"),
    }
    assert_eq!(counting.0.load(Ordering::SeqCst), 0);
    // The interpreter's home thread survived the panic and serves on.
    let e = block_on(held.spin).unwrap_err();
    assert_eq!(e.code(), Code::Cancelled, "{e}");
    expect_forward(
        &block_on(batching.call_async(&[Value::from(row(5.0, 4))]).unwrap()).unwrap(),
        5.0,
    );
    // A waker replaced by a later poll is not the one woken.
    let held = held_pool(0);
    let batching = load(&held.pool, "batching.pt");
    let mut call = batching.call_async(&[Value::from(row(6.0, 4))]).unwrap();
    let first = Arc::new(CountingWaker(AtomicUsize::new(0)));
    let second = Arc::new(CountingWaker(AtomicUsize::new(0)));
    for w in [&first, &second] {
        let waker = Waker::from(w.clone());
        assert!(std::pin::Pin::new(&mut call)
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
    }
    held.token.cancel();
    wait_until("the latest waker to be woken", || {
        second.0.load(Ordering::SeqCst) == 1
    });
    assert_eq!(first.0.load(Ordering::SeqCst), 0);
    expect_forward(&block_on(call).unwrap(), 6.0);
    held.release();
}

#[test]
fn calls_past_the_queue_limit_are_overloaded() {
    let _serial = serial();
    let held = held_pool(2);
    let batching = load(&held.pool, "batching.pt");
    let a = batching.call_async(&[Value::from(row(1.0, 4))]).unwrap();
    let b = batching.call_async(&[Value::from(row(2.0, 4))]).unwrap();
    assert_eq!((held.pool.queued(), held.pool.in_flight()), (2, 3));
    // The queue is full: refused at once, asynchronous or not.
    let e = batching
        .call_async(&[Value::from(row(3.0, 4))])
        .unwrap_err();
    assert_eq!(e.code(), Code::Overloaded, "{e}");
    assert_eq!(e.code().name(), "MANYPY_ERR_OVERLOADED");
    let e = batching.call(&[Value::from(row(3.0, 4))]).unwrap_err();
    assert_eq!(e.code(), Code::Overloaded, "{e}");
    // A refused call took no place in the queue.
    assert_eq!((held.pool.queued(), held.pool.in_flight()), (2, 3));
    let pool = held.pool.clone();
    held.release();
    expect_forward(&block_on(a).unwrap(), 1.0);
    expect_forward(&block_on(b).unwrap(), 2.0);
    wait_until("the pool to drain", || pool.in_flight() == 0);
    assert_eq!(pool.queued(), 0);
    // Once drained, accepted again.
    expect_forward(
        &block_on(batching.call_async(&[Value::from(row(3.0, 4))]).unwrap()).unwrap(),
        3.0,
    );
}

#[test]
#[ignore = "slow: thousands of calls in flight while every handle drops; rust_tests runs it (--include-ignored)"]
fn every_handle_dropped_with_thousands_of_calls_in_flight() {
    let _serial = serial();
    const CALLS: usize = 3000;
    // The futures outlive the object, package and pool: each still completes.
    let pool = Pool::new(2).unwrap();
    let package = pool.load_package(archive("batching.pt")).unwrap();
    let batching = package.load_pickle("model", "model.pkl").unwrap();
    let futures: Vec<_> = (0..CALLS)
        .map(|i| {
            batching
                .call_async(&[Value::from(row(i as f32, 4))])
                .unwrap()
        })
        .collect();
    drop(batching);
    drop(package);
    drop(pool);
    let outs = block_on(join_all(futures));
    assert_eq!(outs.len(), CALLS);
    for (i, out) in outs.into_iter().enumerate() {
        expect_forward(&out.unwrap(), i as f32);
    }

    // Pool first this time, then the object, from another thread, under tokio.
    let pool = Pool::new(2).unwrap();
    let batching = load(&pool, "batching.pt");
    let futures: Vec<_> = (0..CALLS)
        .map(|i| {
            batching
                .call_async(&[Value::from(row(i as f32, 4))])
                .unwrap()
        })
        .collect();
    drop(pool);
    std::thread::spawn(move || drop(batching)).join().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let tasks: Vec<_> = futures.into_iter().map(|f| runtime.spawn(f)).collect();
    for (i, task) in tasks.into_iter().enumerate() {
        expect_forward(&runtime.block_on(task).unwrap().unwrap(), i as f32);
    }

    // The futures dropped instead: every call is cancelled or done, and
    // every completion arrives (the pool drains).
    let pool = Pool::new(2).unwrap();
    let batching = load(&pool, "batching.pt");
    let futures: Vec<_> = (0..CALLS)
        .map(|i| {
            batching
                .call_async(&[Value::from(row(i as f32, 4))])
                .unwrap()
        })
        .collect();
    drop(futures);
    wait_until("every dropped call to complete", || pool.in_flight() == 0);
    expect_forward(
        &block_on(batching.call_async(&[Value::from(row(1.0, 4))]).unwrap()).unwrap(),
        1.0,
    );
}

#[test]
fn a_lent_tensor_stays_lent_until_its_async_call_completes() {
    let _serial = serial();
    let held = held_pool(0);
    let batching = load(&held.pool, "batching.pt");
    let x = Tensor::from_vec(vec![1.0f32; 4], &[1, 4]).unwrap();
    let call = batching.call_async(&[Value::from(&x)]).unwrap();
    // Queued: the C value holds the tensor, which Python may write.
    assert!(x.is_lent());
    assert_eq!(x.as_slice::<f32>().unwrap_err().code(), Code::TensorLent);
    held.token.cancel();
    expect_forward(&block_on(call).unwrap(), 1.0);
    wait_until("the tensor to be released", || !x.is_lent());
    assert_eq!(x.as_slice::<f32>().unwrap(), &[1.0; 4]);
    held.release();
}

#[test]
fn a_result_nobody_takes_is_freed() {
    let _serial = serial();
    // identity.pt returns its input: the result is a view of the caller's
    // lent tensor, which stays lent for as long as the result lives.
    let pool = Pool::new(1).unwrap();
    let identity = load(&pool, "identity.pt");
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    let call = identity.call_async(&[Value::from(&x)]).unwrap();
    wait_until("the call to complete", || call.is_complete());
    assert!(x.is_lent(), "the stored result holds the tensor");
    // The future goes with its result untaken: the result goes with it.
    drop(call);
    wait_until("the tensor to be released", || !x.is_lent());
    assert_eq!(
        x.as_slice::<f32>().unwrap(),
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    );
}

/// xorshift64*: the stress test's choices, reproducible from its seed.
struct Choices(u64);

impl Choices {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

#[test]
#[ignore = "slow: thousands of calls with drops, timeouts and cancels; rust_tests runs it (--include-ignored)"]
fn stress_drops_timeouts_and_cancels_racing_completions() {
    let _serial = serial();
    const THREADS: u64 = 8;
    const CALLS: u64 = 2000;
    let pool = Pool::new(2).unwrap();
    let batching = load(&pool, "batching.pt");
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let batching = &batching;
            s.spawn(move || {
                let mut choices = Choices(0x9e37_79b9_7f4a_7c15 ^ (t + 1));
                for i in 0..CALLS {
                    let v = (t * CALLS + i) as f32;
                    let args = [Value::from(row(v, 4))];
                    match choices.next(5) {
                        // Awaited: the right rows.
                        0 => expect_forward(
                            &block_on(batching.call_async(&args).unwrap()).unwrap(),
                            v,
                        ),
                        // Dropped at once, racing its completion.
                        1 => drop(batching.call_async(&args).unwrap()),
                        // A timeout of 0 to 2 ms: the rows or DeadlineExceeded.
                        2 => {
                            let timeout = Duration::from_micros(1 + choices.next(2000));
                            let options = CallOptions::builder().timeout(timeout).build().unwrap();
                            match batching
                                .call_with_async(None, &args, &(), Some(&options))
                                .and_then(block_on)
                            {
                                Ok(out) => expect_forward(&out, v),
                                Err(e) => assert_eq!(e.code(), Code::DeadlineExceeded, "{e}"),
                            }
                        }
                        // The caller's token cancelled right after submission.
                        3 => {
                            let token = CancelToken::new().unwrap();
                            let options =
                                CallOptions::builder().cancel_token(&token).build().unwrap();
                            let call = batching.call_with_async(None, &args, &(), Some(&options));
                            token.cancel();
                            match call.and_then(block_on) {
                                Ok(out) => expect_forward(&out, v),
                                Err(e) => assert_eq!(e.code(), Code::Cancelled, "{e}"),
                            }
                        }
                        // Polled once, then dropped.
                        _ => {
                            let mut call = batching.call_async(&args).unwrap();
                            let waker = Waker::from(Arc::new(CountingWaker(AtomicUsize::new(0))));
                            let _ = std::pin::Pin::new(&mut call)
                                .poll(&mut Context::from_waker(&waker));
                        }
                    }
                }
            });
        }
    });
    // Every completion arrived, the dropped calls' included.
    wait_until("the pool to drain", || pool.in_flight() == 0);
    expect_forward(
        &block_on(batching.call_async(&[Value::from(row(1.0, 4))]).unwrap()).unwrap(),
        1.0,
    );
}
