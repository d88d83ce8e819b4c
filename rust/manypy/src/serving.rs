//! The serving lifecycle's values (manypy.h, since 0.3): a pool's health
//! ([`PoolStats`]), its request metrics ([`RequestMetrics`]), what a drain
//! did ([`DrainResult`]), and the trampolines behind
//! [`PoolBuilder::on_interpreter_failed`](crate::PoolBuilder::on_interpreter_failed).
use std::ffi::c_void;
use std::sync::Arc;

use manypy_sys as sys;

use crate::error::{code_label, owned, Code, Error, Result};
use crate::trampoline::guard;

/// Calls counted by status code, as `manypy_pool_stats` and
/// `manypy_request_metrics` count them: those that succeeded, those that
/// failed with each code, and those refused at admission
/// ([`Code::Overloaded`], [`Code::Draining`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CodeCounts(Vec<u64>);

impl CodeCounts {
    pub(crate) fn from_raw(counts: &[u64]) -> CodeCounts {
        CodeCounts(counts.to_vec())
    }

    /// Calls that succeeded.
    pub fn ok(&self) -> u64 {
        self.raw(sys::MANYPY_OK)
    }

    /// Calls that ended (or were refused) with `code`; 0 for the binding's
    /// own codes, which C never counts.
    pub fn get(&self, code: Code) -> u64 {
        code.raw().map_or(0, |raw| self.raw(raw))
    }

    /// The count of the raw code `raw` (`MANYPY_OK` is 0); 0 past the
    /// library's slots.
    pub fn raw(&self, raw: u32) -> u64 {
        self.0.get(raw as usize).copied().unwrap_or(0)
    }

    /// Every call counted, whatever its code.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// The codes with a count, as (raw code, count), in code order: 0 is
    /// success, and [`crate::code_label`] gives each its metrics label.
    pub fn iter(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.0
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(code, &n)| (code as u32, n))
    }

    /// The counts as (metrics label, count), as `manypy_requests_total`'s
    /// `code` label names them: `("ok", 3)`, `("python", 1)`.
    pub fn labelled(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        self.iter().map(|(code, n)| (code_label(code), n))
    }
}

/// A pool's health ([`Pool::stats`](crate::Pool::stats)), for readiness
/// probes, dashboards and autoscalers. Read lock-free, so the counts may be
/// taken a moment apart.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolStats {
    /// True once [`Pool::drain`](crate::Pool::drain) was called: the pool
    /// refuses new calls with [`Code::Draining`] for good.
    pub draining: bool,
    /// [`Pool::size`](crate::Pool::size): `starting + ready + busy + broken +
    /// lost`.
    pub interpreters: usize,
    /// Not yet able to serve: starting, or being leased.
    pub starting: usize,
    /// Serving, with no call.
    pub ready: usize,
    /// Serving, with at least one call.
    pub busy: usize,
    /// Failed to start, or retired
    /// ([`Pool::check_interpreter`](crate::Pool::check_interpreter) says why).
    pub broken: usize,
    /// As [`Pool::in_flight`](crate::Pool::in_flight).
    pub in_flight: usize,
    /// As [`Pool::queued`](crate::Pool::queued).
    pub queued: usize,
    /// Calls completed since the pool was created, by status code,
    /// refusals included.
    pub completed: CodeCounts,
    /// Interpreters in which a stopped call still runs twice its grace
    /// period (and at least 1 s) after its stop (model code swallowing the stop where Python
    /// cannot raise it, or C code holding the GIL): they serve no other call
    /// while it runs ([`Pool::check_interpreter`](crate::Pool::check_interpreter)
    /// says why; docs/serving.md, "Lost interpreters"). Since 0.4.
    pub lost: usize,
    /// Retired interpreters replaced since the pool was created; a
    /// replacement takes the retired one's index. Since 0.4.
    pub replaced: u64,
    /// True while a retired interpreter waits for a replacement the process
    /// has no room for (its interpreters all leased, retired or
    /// distrusted); the pool tries again each second. Since 0.4.
    pub no_room: bool,
}

impl PoolStats {
    /// Whether the pool can serve a call now: at least one interpreter is
    /// ready or busy, and it is not draining. What a readiness probe
    /// answers: `serving_at_least(1)`.
    pub fn serving(&self) -> bool {
        self.serving_at_least(1)
    }

    /// Whether the pool serves with at least `min` interpreters (ready or
    /// busy; at least 1 whatever `min`), and is not draining: a readiness
    /// probe for a service that needs that capacity, whose pool lost or
    /// retired interpreters below it (docs/serving.md, "Readiness, liveness
    /// and restarts"). Since 0.4.
    pub fn serving_at_least(&self, min: usize) -> bool {
        !self.draining && self.ready + self.busy >= min.max(1)
    }

    pub(crate) fn from_raw(s: &sys::manypy_pool_stats) -> PoolStats {
        PoolStats {
            draining: s.draining != 0,
            interpreters: s.interpreters,
            starting: s.starting,
            ready: s.ready,
            busy: s.busy,
            broken: s.broken,
            in_flight: s.in_flight,
            queued: s.queued,
            completed: CodeCounts::from_raw(&s.completed),
            lost: s.lost,
            replaced: s.replaced,
            no_room: s.no_room != 0,
        }
    }
}

/// What [`Pool::drain`](crate::Pool::drain) did with the calls in flight
/// when it began.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct DrainResult {
    /// Calls that finished by themselves.
    pub finished: usize,
    /// Calls the drain cancelled at its deadline (they ended with
    /// [`Code::Cancelled`]).
    pub cancelled: usize,
}

/// A histogram of durations in seconds, as Prometheus keeps one: bucket
/// `i` counts the durations `<= bounds[i]` (cumulative), and `count` is the
/// `+Inf` bucket.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct DurationHistogram {
    /// The buckets' upper bounds, ascending, in seconds (the library's).
    pub bounds: Vec<f64>,
    /// Cumulative counts, one per bound.
    pub cumulative: Vec<u64>,
    /// Every observation (the `+Inf` bucket).
    pub count: u64,
    /// The sum of the observations, in seconds.
    pub sum_seconds: f64,
}

/// Request metrics of one model in a pool since it was created
/// ([`Pool::request_metrics`](crate::Pool::request_metrics)): an owned
/// copy. A call's model is the model id of its context
/// ([`CallOptionsBuilder::context`](crate::CallOptionsBuilder::context)),
/// `""` for calls without one.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RequestMetrics {
    /// The model id.
    pub model: String,
    /// Calls by status code, refusals at admission included.
    pub completed: CodeCounts,
    /// From admission to completion (refusals are not timed).
    pub request: DurationHistogram,
    /// From admission until the call began running in its interpreter (in
    /// DIRECT mode, until it held the interpreter's GIL).
    pub queue: DurationHistogram,
}

/// # Safety
/// `p` points to `n` elements, or `n` is 0.
unsafe fn slice<'a, T>(p: *const T, n: usize) -> &'a [T] {
    if n == 0 || p.is_null() {
        &[]
    } else {
        std::slice::from_raw_parts(p, n)
    }
}

impl RequestMetrics {
    /// # Safety
    /// `m` is an entry of a live `manypy_pool_request_metrics` array.
    pub(crate) unsafe fn from_raw(m: &sys::manypy_request_metrics) -> RequestMetrics {
        let n = m.num_buckets;
        let bounds = slice(m.bucket_bounds, n).to_vec();
        RequestMetrics {
            model: owned(m.model),
            completed: CodeCounts::from_raw(&m.completed),
            request: DurationHistogram {
                bounds: bounds.clone(),
                cumulative: slice(m.request_buckets, n).to_vec(),
                count: m.request_count,
                sum_seconds: m.request_seconds_sum,
            },
            queue: DurationHistogram {
                bounds,
                cumulative: slice(m.queue_buckets, n).to_vec(),
                count: m.queue_count,
                sum_seconds: m.queue_seconds_sum,
            },
        }
    }
}

/// Copies the C array of `manypy_pool_request_metrics` and frees it.
///
/// # Safety
/// `metrics` and `count` are what `manypy_pool_request_metrics` returned.
pub(crate) unsafe fn take_request_metrics(
    metrics: *mut sys::manypy_request_metrics,
    count: usize,
) -> Result<Vec<RequestMetrics>> {
    if metrics.is_null() {
        return if count == 0 {
            Ok(Vec::new())
        } else {
            Err(Error::new(
                Code::Internal,
                "the library returned no request metrics",
            ))
        };
    }
    // Copied before the free, which runs even if a copy panicked (out of
    // memory aborts instead, so in practice it always runs).
    struct Free(*mut sys::manypy_request_metrics, usize);
    impl Drop for Free {
        fn drop(&mut self) {
            unsafe { sys::manypy_request_metrics_free(self.0, self.1) }
        }
    }
    let _free = Free(metrics, count);
    Ok((0..count)
        .map(|i| RequestMetrics::from_raw(&*sys::manypy_request_metrics_at(metrics, i)))
        .collect())
}

/// The callback of [`PoolBuilder::on_interpreter_failed`](crate::PoolBuilder::on_interpreter_failed).
pub type InterpreterFailedCallback = Arc<dyn Fn(usize, Error) + Send + Sync + 'static>;

/// The `user_data` that C holds for a pool's callback: a `Box` of the
/// callback (an `Arc<dyn Fn>` is a wide pointer, the `Box` a thin one), so
/// the callback is owned by C. Pass it, with [`interpreter_failed`] and
/// [`free_failed`], straight to `manypy_pool_options_set_on_interpreter_failed`,
/// which frees it exactly once: when the last pool or options holding it let
/// go (a pool lives until its last handle, package, object, batcher and
/// call are gone, which may be after the last Rust handle), when it is
/// replaced, or at once if the setter fails. Until then every report reaches
/// the callback; after it no report comes.
pub(crate) fn failed_user_data(callback: InterpreterFailedCallback) -> *mut c_void {
    Box::into_raw(Box::new(callback)).cast()
}

/// The `manypy_interpreter_failed_fn` of every pool with a callback. Runs
/// on a manypy thread; never unwinds.
///
/// # Safety
/// `user_data` is from [`failed_user_data`] and not yet freed (C calls it
/// only while it holds the callback); `why` is a status or null.
pub(crate) unsafe extern "C" fn interpreter_failed(
    user_data: *mut c_void,
    interpreter: i32,
    why: *const sys::manypy_status,
) {
    guard(|| {
        let callback = &*(user_data as *const InterpreterFailedCallback);
        let error = if why.is_null() {
            Error::new(
                Code::Internal,
                "an interpreter failed to start, without a status",
            )
        } else {
            Error::borrowed(why)
        };
        callback(usize::try_from(interpreter).unwrap_or(usize::MAX), error);
    });
}

/// The `free_user_data` of [`failed_user_data`]'s pointer: drops the
/// callback (and what it captured), on whichever thread C lets go of it (the
/// one dropping the pool's last handle, or a manypy thread finishing the
/// pool's last asynchronous call). A panic in a captured value's `Drop` is
/// caught and counted ([`crate::callback_panics`]).
///
/// # Safety
/// `user_data` is from [`failed_user_data`], freed by nothing else.
pub(crate) unsafe extern "C" fn free_failed(user_data: *mut c_void) {
    guard(|| drop(Box::from_raw(user_data as *mut InterpreterFailedCallback)));
}

#[cfg(test)]
mod tests {
    //! The interpreter-failed trampolines, called as C calls them (a real
    //! background start that fails cannot be caused on purpose from a
    //! test: tests/lifecycle.rs checks a healthy pool reports nothing, and
    //! that the pool frees the callback).
    use super::*;
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
    use std::sync::Mutex;

    fn status(code: u32, message: &str) -> *mut sys::manypy_status {
        let message = std::ffi::CString::new(message).unwrap();
        let s = unsafe { sys::manypy_status_new(code, message.as_ptr()) };
        assert!(!s.is_null());
        s
    }

    /// Counts its drops: captured by a callback, it says when (and how
    /// often) the callback was dropped.
    struct DropCounter(Arc<AtomicUsize>);
    impl Drop for DropCounter {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counted_callback() -> (InterpreterFailedCallback, Arc<AtomicUsize>) {
        let drops = Arc::new(AtomicUsize::new(0));
        let counter = DropCounter(drops.clone());
        let callback: InterpreterFailedCallback = Arc::new(move |_, _| {
            let _held = &counter;
        });
        (callback, drops)
    }

    fn stats(ready: usize, busy: usize, broken: usize, lost: usize, draining: bool) -> PoolStats {
        PoolStats {
            draining,
            interpreters: ready + busy + broken + lost,
            starting: 0,
            ready,
            busy,
            broken,
            in_flight: busy,
            queued: 0,
            completed: CodeCounts::default(),
            lost,
            replaced: 0,
            no_room: false,
        }
    }

    #[test]
    fn serving_at_least_counts_the_interpreters_that_serve() {
        let two_of_four = stats(1, 1, 1, 1, false);
        assert!(two_of_four.serving());
        assert!(two_of_four.serving_at_least(0) && two_of_four.serving_at_least(2));
        assert!(
            !two_of_four.serving_at_least(3),
            "lost and broken ones do not serve"
        );
        assert!(
            !stats(0, 0, 1, 1, false).serving_at_least(0),
            "at least 1 whatever min"
        );
        assert!(!stats(2, 0, 0, 0, true).serving(), "draining");
    }

    #[test]
    fn failures_reach_the_callback_until_it_is_freed() {
        crate::check_library_version().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let user_data = failed_user_data(Arc::new(move |i, e: Error| {
            sink.lock()
                .unwrap()
                .push((i, e.code(), e.message().to_owned()));
        }));
        let why = status(
            sys::MANYPY_ERR_STATIC_TLS,
            "interpreter 2: out of static TLS",
        );
        unsafe { interpreter_failed(user_data, 2, why) };
        unsafe { interpreter_failed(user_data, 3, std::ptr::null()) };
        unsafe { sys::manypy_status_free(why) };
        assert_eq!(
            Arc::strong_count(&seen),
            2,
            "held by the callback until freed"
        );
        unsafe { free_failed(user_data) };
        assert_eq!(
            *seen.lock().unwrap(),
            vec![
                (
                    2,
                    Code::StaticTls,
                    "interpreter 2: out of static TLS".to_owned()
                ),
                (
                    3,
                    Code::Internal,
                    "an interpreter failed to start, without a status".to_owned()
                ),
            ]
        );
        // The closure went with the free.
        assert_eq!(Arc::strong_count(&seen), 1);
    }

    #[test]
    fn a_panicking_callback_is_caught_and_counted() {
        crate::check_library_version().unwrap();
        let calls = Arc::new(AtomicU64::new(0));
        let counted = calls.clone();
        let user_data = failed_user_data(Arc::new(move |_, _| {
            counted.fetch_add(1, Ordering::SeqCst);
            panic!("a callback that panics");
        }));
        let before = crate::callback_panics();
        let why = status(sys::MANYPY_ERR_LOADER, "no");
        unsafe { interpreter_failed(user_data, 0, why) };
        unsafe { interpreter_failed(user_data, 0, std::ptr::null()) };
        unsafe { sys::manypy_status_free(why) };
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert!(crate::callback_panics() >= before + 2);
        unsafe { free_failed(user_data) };
        assert_eq!(Arc::strong_count(&calls), 1);
    }

    #[test]
    fn a_panic_in_the_callbacks_drop_is_caught_and_counted() {
        crate::check_library_version().unwrap();
        struct PanicsOnDrop(Arc<AtomicUsize>);
        impl Drop for PanicsOnDrop {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
                panic!("a capture whose drop panics");
            }
        }
        let drops = Arc::new(AtomicUsize::new(0));
        let capture = PanicsOnDrop(drops.clone());
        // A second capture, dropped even though the first one panicked.
        let other = drops.clone();
        let user_data = failed_user_data(Arc::new(move |_, _| {
            let _held = (&capture, &other);
        }));
        let before = crate::callback_panics();
        unsafe { free_failed(user_data) };
        assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped once");
        assert!(crate::callback_panics() > before);
        assert_eq!(Arc::strong_count(&drops), 1, "every capture dropped");
    }

    /// The C library's side of the contract, with these trampolines: the
    /// callback is freed exactly once by the setter's failure, by a
    /// replacement, by a removal, or by the options' free.
    #[test]
    fn the_c_library_frees_the_callback_once() {
        crate::check_library_version().unwrap();
        let set = |o: *mut sys::manypy_pool_options, callback: InterpreterFailedCallback| unsafe {
            sys::manypy_pool_options_set_on_interpreter_failed(
                o,
                Some(interpreter_failed),
                failed_user_data(callback),
                Some(free_failed),
            )
        };
        // NULL options: refused, and freed at once.
        let (callback, drops) = counted_callback();
        let s = set(std::ptr::null_mut(), callback);
        let e = unsafe { Error::check(s) }.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        assert_eq!(drops.load(Ordering::SeqCst), 1);

        let o = unsafe { sys::manypy_pool_options_new() };
        assert!(!o.is_null());
        let (first, first_drops) = counted_callback();
        unsafe { Error::check(set(o, first)) }.unwrap();
        assert_eq!(first_drops.load(Ordering::SeqCst), 0, "held by the options");
        let (second, second_drops) = counted_callback();
        unsafe { Error::check(set(o, second)) }.unwrap();
        assert_eq!(first_drops.load(Ordering::SeqCst), 1, "freed when replaced");
        assert_eq!(second_drops.load(Ordering::SeqCst), 0);
        // A NULL callback removes the callback, and frees what it was given.
        let (ignored, ignored_drops) = counted_callback();
        let s = unsafe {
            sys::manypy_pool_options_set_on_interpreter_failed(
                o,
                None,
                failed_user_data(ignored),
                Some(free_failed),
            )
        };
        unsafe { Error::check(s) }.unwrap();
        assert_eq!(ignored_drops.load(Ordering::SeqCst), 1);
        assert_eq!(second_drops.load(Ordering::SeqCst), 1, "removed");
        let (third, third_drops) = counted_callback();
        unsafe { Error::check(set(o, third)) }.unwrap();
        unsafe { sys::manypy_pool_options_free(o) };
        assert_eq!(
            third_drops.load(Ordering::SeqCst),
            1,
            "freed with the options"
        );
        assert_eq!(first_drops.load(Ordering::SeqCst), 1);
        assert_eq!(second_drops.load(Ordering::SeqCst), 1);
    }
}
