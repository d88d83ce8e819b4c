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
        Err(payload) => {
            PANICS.fetch_add(1, Ordering::Relaxed);
            // The payload is whatever was passed to panic_any: its own Drop
            // could panic too, which must not unwind into C either. Such a
            // second payload is leaked rather than dropped.
            if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
                PANICS.fetch_add(1, Ordering::Relaxed);
                std::mem::forget(again);
            }
            None
        }
    }
}

/// How many times a callback of this process (operator callback, API usage
/// handler, export hook, archive verifier, interpreter-failed callback, the
/// waker of an asynchronous call's future), or the drop of one the C
/// library released, panicked. The panic was caught at the C boundary: the
/// operator, call or load went on (an export hook that panicked adds no
/// files; a verifier that panicked refuses the archive; a call whose waker
/// panicked keeps its outcome for the next poll).
pub fn callback_panics() -> u64 {
    PANICS.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_whose_payload_panics_on_drop_is_caught() {
        struct Bomb;
        impl Drop for Bomb {
            fn drop(&mut self) {
                panic!("the payload's drop panics");
            }
        }
        let before = callback_panics();
        assert_eq!(guard(|| -> u8 { std::panic::panic_any(Bomb) }), None);
        assert!(callback_panics() >= before + 2);
        assert_eq!(guard(|| 7), Some(7));
    }
}
