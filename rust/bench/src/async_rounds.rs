//! The asynchronous rounds of rust_vs_c, Rust against Rust (the C side's
//! figures for the same questions are bench/async.c's):
//!
//!   C. The round trip of one `call_async` (submit, then wait for its
//!      future) against a synchronous call, identity.pt [2, 3], prepared
//!      Args, p50: against a DIRECT pool's call on the calling thread and a
//!      HANDOFF pool's on the interpreter's thread, which is where every
//!      asynchronous call runs. Target (the issue's, for C): <= +1 us
//!      against HANDOFF's.
//!   D. python_heavy.pt on 2 interpreters: one thread keeping 64 calls in
//!      flight against 4 threads making synchronous calls. Target: >= 0.95x.
//!
//! The futures are driven by hand, with a waker that unparks the waiting
//! thread: no executor, as the library needs none.
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::{Duration, Instant};

use manypy::{Args, CallFuture, Kwargs, Object, Tensor, Value};

use crate::Failure;

/// Wakes a parked thread.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

fn this_thread_waker() -> Waker {
    Waker::from(Arc::new(Unpark(std::thread::current())))
}

/// Waits for `call` on this thread, parked between polls.
fn wait(mut call: CallFuture, cx: &mut Context<'_>) -> manypy::Result<Value> {
    loop {
        match Pin::new(&mut call).poll(cx) {
            Poll::Ready(out) => return out,
            Poll::Pending => std::thread::park(),
        }
    }
}

/// p50 of `n` round trips of `call`, each reading its result's data as the
/// synchronous rounds do.
pub fn round_trips(
    n: usize,
    mut call: impl FnMut() -> manypy::Result<Value>,
) -> Result<Vec<i64>, Failure> {
    let mut latencies = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        std::hint::black_box(Tensor::try_from(call()?)?.data_ptr());
        latencies.push(start.elapsed().as_nanos() as i64);
    }
    Ok(latencies)
}

/// One asynchronous call, waited for on this thread.
pub fn async_call(object: &Object, args: &Args) -> manypy::Result<Value> {
    let waker = this_thread_waker();
    wait(object.call_async(args)?, &mut Context::from_waker(&waker))
}

/// Calls completed in `seconds` by one thread keeping `depth` calls in flight.
pub fn in_flight(
    object: &Object,
    args: &Args,
    kwargs: &Kwargs,
    depth: usize,
    seconds: f64,
) -> Result<(u64, f64), Failure> {
    let waker = this_thread_waker();
    let mut cx = Context::from_waker(&waker);
    let submit = || object.call_with_async(None, args, kwargs, None);
    let mut slots = (0..depth)
        .map(|_| submit())
        .collect::<manypy::Result<Vec<_>>>()?;
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(seconds);
    let mut calls = 0u64;
    while Instant::now() < end {
        let mut progressed = false;
        for slot in &mut slots {
            // A completed call is replaced at once, and the new one polled
            // so that its completion wakes this thread.
            while let Poll::Ready(out) = Pin::new(&mut *slot).poll(&mut cx) {
                std::hint::black_box(out?);
                calls += 1;
                progressed = true;
                *slot = submit()?;
            }
        }
        if !progressed {
            std::thread::park_timeout(end.saturating_duration_since(Instant::now()));
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    drop(slots); // the calls still in flight are cancelled
    Ok((calls, elapsed))
}

/// Calls completed in `seconds` by `threads` threads making synchronous calls.
pub fn threads(
    object: &Object,
    args: &Args,
    kwargs: &Kwargs,
    threads: usize,
    seconds: f64,
) -> Result<(u64, f64), Failure> {
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let counts: Vec<manypy::Result<u64>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut calls = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::black_box(object.call_with(None, args, kwargs, None)?);
                        calls += 1;
                    }
                    Ok(calls)
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs_f64(seconds));
        stop.store(true, Ordering::Relaxed);
        workers
            .into_iter()
            .map(|w| w.join().expect("a thread panicked"))
            .collect()
    });
    let elapsed = start.elapsed().as_secs_f64();
    let mut total = 0;
    for c in counts {
        total += c?;
    }
    Ok((total, elapsed))
}
