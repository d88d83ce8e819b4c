//! Cancel tokens: the caller's [`CancelToken`], and the per-call token an
//! asynchronous call carries so that dropping its future stops that call
//! alone.
//!
//! C call options hold one token. An asynchronous call made with options
//! that carry the caller's token gets options of its own with its per-call
//! token instead, and the caller's token is linked to it: cancelling the
//! caller's token cancels every per-call token linked to it, so either stops
//! the call. The C token is private to this crate, so [`CancelToken::cancel`]
//! is the only way to cancel it, and the link cannot be bypassed.
use std::sync::{Arc, Mutex, PoisonError, Weak};

use manypy_sys as sys;

use crate::error::Result;
use crate::handle::Handle;
use crate::version::check_library_version;

/// A cancel token: cancelling it stops every call that uses it, running or
/// waiting, with [`Code::Cancelled`](crate::Code::Cancelled), and fails later
/// calls at once. It cannot be reset. `Clone` shares the token; `Send +
/// Sync`: cancel it from any thread. Asynchronous calls made with it
/// ([`Object::call_with_async`](crate::Object::call_with_async)) stop too.
#[derive(Clone)]
// Freed when the last clone goes; options and calls that use the token
// keep their own reference.
pub struct CancelToken(Arc<TokenInner>);

struct TokenInner {
    raw: CallToken,
    linked: Mutex<Linked>,
}

/// The per-call tokens of asynchronous calls made with this token.
#[derive(Default)]
struct Linked {
    cancelled: bool,
    // Weak: a call's token goes with its future. Dead entries are pruned
    // when the list doubles, so it stays within twice the live calls.
    calls: Vec<Weak<CallToken>>,
    prune_at: usize,
}

impl CancelToken {
    /// A new, uncancelled token.
    pub fn new() -> Result<CancelToken> {
        Ok(CancelToken(Arc::new(TokenInner {
            raw: CallToken::new()?,
            linked: Mutex::default(),
        })))
    }

    /// Cancels: returns once every running call using the token has been
    /// asked to stop. Idempotent.
    pub fn cancel(&self) {
        // The C token first: synchronous calls and later submissions see it.
        self.0.raw.cancel();
        let calls = {
            let mut linked = self.0.linked.lock().unwrap_or_else(PoisonError::into_inner);
            linked.cancelled = true;
            std::mem::take(&mut linked.calls)
        };
        for call in calls.iter().filter_map(Weak::upgrade) {
            call.cancel();
        }
    }

    /// Whether the token was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.0.raw.is_cancelled()
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::manypy_cancel_token {
        self.0.raw.as_ptr()
    }

    /// Makes cancelling this token cancel `call` too (at once if this token
    /// is already cancelled). A cancel racing this either finds `call` in
    /// the list or is seen through the flag: `cancelled` and the list change
    /// under one lock.
    pub(crate) fn link(&self, call: &Arc<CallToken>) {
        let mut linked = self.0.linked.lock().unwrap_or_else(PoisonError::into_inner);
        if linked.cancelled {
            drop(linked);
            call.cancel();
            return;
        }
        if linked.calls.len() >= linked.prune_at {
            linked.calls.retain(|c| c.strong_count() > 0);
            linked.prune_at = (2 * linked.calls.len()).max(64);
        }
        linked.calls.push(Arc::downgrade(call));
    }
}

impl std::fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CancelToken")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

/// One C cancel token: a caller's, or the one of an asynchronous call,
/// which its future cancels when dropped early.
pub(crate) struct CallToken(Handle<sys::manypy_cancel_token>);

impl CallToken {
    pub(crate) fn new() -> Result<CallToken> {
        check_library_version()?;
        Handle::allocated(unsafe { sys::manypy_cancel_token_new() }).map(CallToken)
    }

    pub(crate) fn cancel(&self) {
        unsafe { sys::manypy_cancel_token_cancel(self.0.as_ptr()) }
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        unsafe { sys::manypy_cancel_token_is_cancelled(self.0.as_ptr()) != 0 }
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::manypy_cancel_token {
        self.0.as_ptr()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancelling_a_token_cancels_the_calls_linked_to_it() {
        let caller = CancelToken::new().unwrap();
        let calls: Vec<_> = (0..1000)
            .map(|_| Arc::new(CallToken::new().unwrap()))
            .collect();
        for call in &calls {
            caller.link(call);
        }
        // Calls whose futures went are pruned as the list grows.
        let (kept, gone) = calls.split_at(10);
        drop(gone.to_vec());
        let kept = kept.to_vec();
        drop(calls);
        for _ in 0..200 {
            caller.link(&Arc::new(CallToken::new().unwrap()));
        }
        assert!(caller.0.linked.lock().unwrap().calls.len() < 500);
        assert!(kept.iter().all(|c| !c.is_cancelled()));
        caller.cancel();
        assert!(caller.is_cancelled());
        assert!(kept.iter().all(|c| c.is_cancelled()));
        assert!(caller.0.linked.lock().unwrap().calls.is_empty());
        // Linked after the cancel: cancelled at once.
        let late = Arc::new(CallToken::new().unwrap());
        caller.link(&late);
        assert!(late.is_cancelled());
    }

    #[test]
    fn a_cancel_racing_links_misses_none() {
        for _ in 0..50 {
            let caller = CancelToken::new().unwrap();
            let calls: Vec<_> = (0..64)
                .map(|_| Arc::new(CallToken::new().unwrap()))
                .collect();
            std::thread::scope(|s| {
                s.spawn(|| {
                    for call in &calls {
                        caller.link(call);
                    }
                });
                s.spawn(|| caller.cancel());
            });
            assert!(calls.iter().all(|c| c.is_cancelled()));
        }
    }
}
