//! Asynchronous calls as a runtime-agnostic [`Future`]: [`CallFuture`],
//! completed by manypy's `manypy_call_done_fn` and driven by whatever
//! executor polls it (tokio, `futures::executor`, a hand-written loop).
//!
//! The completion and the future share a [`Completion`]: the C callback
//! stores the outcome in it and wakes the latest waker; a poll takes the
//! outcome or leaves its waker. The callback runs on one of manypy's
//! threads and must not unwind, so all it runs is under `catch_unwind`,
//! the waker's `wake` (user code: an executor's) included, and the outcome
//! is stored before the waker runs: a panicking waker loses nothing.
use std::ffi::c_void;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use manypy_sys as sys;

use crate::call::{per_call_options, Arguments, CallOptions, KeywordArguments};
use crate::cancel::CallToken;
use crate::error::{Code, Error, Result};
use crate::trampoline::guard;
use crate::value::{c_string, CValue, Value};

/// The result of an asynchronous call ([`Object::call_async`](crate::Object::call_async),
/// [`ScriptModule::call_async`](crate::ScriptModule::call_async),
/// [`AotiModule::call_async`](crate::AotiModule::call_async),
/// [`Batcher::call_async`](crate::Batcher::call_async)): a
/// [`Future`] whose output is what the synchronous call returns.
///
/// - **Runtime-agnostic.** It needs no executor of its own: manypy completes
///   the call on one of its threads and wakes the [`Waker`] of the latest
///   poll. Any executor drives it, and so does a plain
///   `futures::executor::block_on`.
/// - **`Send + 'static`**, and borrows nothing: the call holds what it needs
///   (its object, package and pool) until it completes, so the future may
///   be spawned on a multi-threaded runtime and outlive every handle.
/// - **Dropping it cancels the call**, through a token of its own: a call
///   still waiting for its interpreter never runs, and running Python code
///   is stopped as a cancel token stops it. The completion that still
///   arrives frees what it carries.
/// - Polling it again after it returned `Ready` panics, as an `async fn`'s
///   future does.
///
/// ```no_run
/// # fn main() -> manypy::Result<()> {
/// use manypy::{Pool, Tensor, Value};
/// let pool = Pool::new(2)?;
/// let model = pool.load_package("identity.pt")?.load_pickle("model", "model.pkl")?;
/// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[1, 3])?;
/// let call = model.call_async(&[Value::from(x)])?; // refusals are Err here
/// drop(model); // the call holds what it needs
/// // Send + 'static: any thread, any executor.
/// let out = std::thread::spawn(move || futures::executor::block_on(call)).join().unwrap()?;
/// # Ok(()) }
/// ```
#[must_use = "futures do nothing unless polled; dropping this one cancels the call"]
pub struct CallFuture {
    completion: Arc<Completion>,
    // Cancelled when the future goes before the call completes. None once
    // the outcome has been taken.
    token: Option<Arc<CallToken>>,
}

/// What the C completion and the future share.
#[derive(Default)]
pub(crate) struct Completion(Mutex<State>);

#[derive(Default)]
struct State {
    /// The call's outcome, stored once by the completion; the C value is
    /// converted by the poll that takes it, on the caller's thread.
    outcome: Option<Result<CValue>>,
    completed: bool,
    /// The waker of the latest poll.
    waker: Option<Waker>,
}

impl Completion {
    // A panic elsewhere cannot leave State half-written (each change is one
    // assignment), so a poisoned lock is used as it is.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stores the outcome and returns the waker to wake.
    fn complete(&self, outcome: Result<CValue>) -> Option<Waker> {
        let mut state = self.lock();
        state.outcome = Some(outcome);
        state.completed = true;
        state.waker.take()
    }
}

/// The `manypy_call_done_fn` of every asynchronous call: `user_data` is an
/// `Arc<Completion>` given to C at submission. Runs exactly once, on a
/// manypy thread; never unwinds.
unsafe extern "C" fn call_done(
    user_data: *mut c_void,
    result: *mut sys::manypy_value,
    status: *mut sys::manypy_status,
) {
    guard(|| {
        let completion = Arc::from_raw(user_data as *const Completion);
        // Owned from here on, and freed on every path: by the future, or,
        // if it was dropped, with the completion below.
        let result = CValue::from_raw(result);
        let outcome = match Error::check(status) {
            Err(e) => Err(e),
            Ok(()) => result.ok_or_else(|| {
                Error::new(
                    Code::Internal,
                    "a call completed with neither result nor status",
                )
            }),
        };
        if let Some(waker) = completion.complete(outcome) {
            // The executor's code. Its own guard, so a panic here still lets
            // the completion go normally.
            guard(|| waker.wake());
        }
    });
}

/// Submits an asynchronous call: converts the method name, arguments and
/// options as a synchronous call does, adds the call's own cancel token,
/// and hands everything to `submit` (`manypy_object_call_async`,
/// `manypy_script_call_async`, `manypy_aoti_call_async` or
/// `manypy_batcher_call_async`). A refusal is
/// returned at once (and its completion never runs).
pub(crate) fn submit<A, K>(
    method: Option<&str>,
    args: &A,
    kwargs: &K,
    options: Option<&CallOptions>,
    submit: impl FnOnce(
        *const std::os::raw::c_char,
        *const sys::manypy_value,
        *const sys::manypy_value,
        *const sys::manypy_call_options,
        sys::manypy_call_done_fn,
        *mut c_void,
    ) -> *mut sys::manypy_status,
) -> Result<CallFuture>
where
    A: Arguments + ?Sized,
    K: KeywordArguments + ?Sized,
{
    let method = method.map(c_string).transpose()?;
    let method = method.as_ref().map_or(std::ptr::null(), |m| m.as_ptr());
    let (args, kwargs) = (args.raw()?, kwargs.raw()?);
    let token = Arc::new(CallToken::new()?);
    // Copied by C at submission; freed when this function returns.
    let c_options = per_call_options(options, &token)?;
    let completion = Arc::new(Completion::default());
    let user_data = Arc::into_raw(completion.clone()) as *mut c_void;
    let status = submit(
        method,
        args.as_ptr(),
        kwargs.as_ptr(),
        c_options.as_ptr(),
        Some(call_done),
        user_data,
    );
    if !status.is_null() {
        // Refused: `call_done` never runs, so its reference is ours to drop.
        drop(unsafe { Arc::from_raw(user_data as *const Completion) });
        unsafe { Error::check(status)? };
    }
    Ok(CallFuture {
        completion,
        token: Some(token),
    })
}

impl CallFuture {
    /// Whether the call has completed: a poll now returns `Ready`. (Also
    /// `true` once the outcome has been taken.)
    pub fn is_complete(&self) -> bool {
        self.token.is_none() || self.completion.lock().completed
    }
}

impl Future for CallFuture {
    type Output = Result<Value>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<Value>> {
        assert!(
            self.token.is_some(),
            "CallFuture polled after it returned Ready"
        );
        let mut state = self.completion.lock();
        if let Some(outcome) = state.outcome.take() {
            let stale = state.waker.take();
            drop(state);
            self.token = None;
            drop(stale);
            return Poll::Ready(outcome.and_then(|value| value.to_value()));
        }
        let stale = match &state.waker {
            Some(waker) if waker.will_wake(cx.waker()) => None,
            _ => state.waker.replace(cx.waker().clone()),
        };
        drop(state);
        // The executor's drop code runs outside the lock.
        drop(stale);
        Poll::Pending
    }
}

impl Drop for CallFuture {
    fn drop(&mut self) {
        let Some(token) = self.token.take() else {
            return;
        };
        let (completed, waker) = {
            let mut state = self.completion.lock();
            (state.completed, state.waker.take())
        };
        if !completed {
            // The completion still comes, with Cancelled unless the call
            // finished first, and frees its outcome with the Completion.
            token.cancel();
        }
        drop(waker);
    }
}

impl std::fmt::Debug for CallFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallFuture")
            .field("complete", &self.is_complete())
            .finish()
    }
}
