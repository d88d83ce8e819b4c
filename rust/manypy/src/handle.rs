//! Owned C handles: [`Handle`] frees its pointer once, on drop, with the C
//! API's free function for its type, and is `Send + Sync` exactly for the
//! types the table below declares thread safe. The one place the binding
//! states which C objects may cross threads.
use std::ptr::NonNull;

use manypy_sys as sys;

use crate::error::{Code, Error, Result};

/// A C type with a free function.
pub(crate) trait Free {
    /// # Safety
    /// `p` is a live handle of this type that nothing uses afterwards.
    unsafe fn free(p: *mut Self);
}

/// A C type manypy.h lets any number of threads use at once (its handles
/// are then `Send + Sync`).
///
/// # Safety
/// Only for types whose every function the binding calls through a shared
/// handle is thread safe per manypy.h.
pub(crate) unsafe trait ThreadSafe {}

/// An owned, non-NULL C handle, freed on drop.
pub(crate) struct Handle<T: Free>(NonNull<T>);

unsafe impl<T: Free + ThreadSafe> Send for Handle<T> {}
unsafe impl<T: Free + ThreadSafe> Sync for Handle<T> {}

impl<T: Free> Handle<T> {
    /// A handle the library returned; NULL is `Internal` ("no `what` returned").
    pub(crate) fn returned(p: *mut T, what: &str) -> Result<Handle<T>> {
        NonNull::new(p)
            .map(Handle)
            .ok_or_else(|| Error::new(Code::Internal, format!("no {what} returned")))
    }

    /// A handle from a constructor that returns NULL only when out of memory.
    pub(crate) fn allocated(p: *mut T) -> Result<Handle<T>> {
        NonNull::new(p)
            .map(Handle)
            .ok_or_else(|| Error::new(Code::ResourceExhausted, "out of memory"))
    }

    pub(crate) fn as_ptr(&self) -> *mut T {
        self.0.as_ptr()
    }
}

impl<T: Free> Drop for Handle<T> {
    fn drop(&mut self) {
        unsafe { T::free(self.0.as_ptr()) }
    }
}

macro_rules! handles {
    ($($t:ident => $free:ident $(, $safe:ident)?;)*) => {$(
        impl Free for sys::$t {
            unsafe fn free(p: *mut Self) {
                sys::$free(p)
            }
        }
        $(handles!(@$safe $t);)?
    )*};
    (@thread_safe $t:ident) => {
        unsafe impl ThreadSafe for sys::$t {}
    };
}

// Thread safe per manypy.h. A pool, package, object, module or batcher is
// freed once, when its last Rust owner goes, so the free never races a
// synchronous call (asynchronous ones hold their C handles themselves). Call
// options and archive trusts are written only by their builders, before
// they are shared; after that C only reads them. Pool and batcher options
// live on one thread, in their builders' build.
handles! {
    manypy_pool => manypy_pool_destroy, thread_safe;
    manypy_package => manypy_package_free, thread_safe;
    manypy_object => manypy_object_free, thread_safe;
    manypy_script_module => manypy_script_free, thread_safe;
    manypy_aoti_module => manypy_aoti_free, thread_safe;
    manypy_profiler => manypy_profiler_free, thread_safe;
    manypy_cancel_token => manypy_cancel_token_free, thread_safe;
    manypy_call_options => manypy_call_options_free, thread_safe;
    manypy_archive_trust => manypy_archive_trust_free, thread_safe;
    manypy_batcher => manypy_batcher_free, thread_safe;
    manypy_pool_options => manypy_pool_options_free;
    manypy_batcher_options => manypy_batcher_options_free;
}
