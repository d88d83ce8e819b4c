//! Running user code called from C: a panic must never unwind into C.
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};

static PANICS: AtomicU64 = AtomicU64::new(0);

/// Runs `f`, catching a panic: `None` when it panicked. The panic's message
/// has been printed by the panic hook; it is also counted
/// ([`callback_panics`]).
pub(crate) fn guard<R>(f: impl FnOnce() -> R) -> Option<R> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => Some(r),
        Err(_) => {
            PANICS.fetch_add(1, Ordering::Relaxed);
            None
        }
    }
}

/// How many times a callback of this process (operator callback, API usage
/// handler, export hook, archive verifier, the waker of an asynchronous
/// call's future) panicked. The panic was caught at the C boundary: the
/// operator, call or load went on (an export hook that panicked adds no
/// files; a verifier that panicked refuses the archive; a call whose waker
/// panicked keeps its outcome for the next poll).
pub fn callback_panics() -> u64 {
    PANICS.load(Ordering::Relaxed)
}
