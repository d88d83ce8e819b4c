//! Safe Rust API of manypy: PyTorch models written in Python, served from a
//! pool of isolated embedded CPython interpreters (each with its own GIL)
//! inside this process, through libmanypy's C API.
//!
//! * [`Pool`] (built with [`Pool::builder`]) holds the interpreters;
//!   [`Package`] is a torch.package archive loaded into it; [`Object`] is a
//!   model unpickled from a package, replicated into each interpreter that
//!   serves it. Children keep their parents alive; dropping frees.
//! * [`Object`], [`ScriptModule`] and [`AotiModule`] are `Send + Sync` and
//!   calls take `&self`: call one model from any number of threads.
//!   [`ScriptModule`] (TorchScript) and [`AotiModule`] (a `torch.export`
//!   / AOTInductor `.pt2` package) run on the host's libtorch, without
//!   Python.
//! * Arguments and results are [`Value`]s; tensors ([`Tensor`]) cross
//!   through DLPack, without copying unless Rust has read them or another
//!   call holds them: a tensor's memory is either lent to Python, which may
//!   write it, or frozen for Rust to read, never both.
//! * Every failure is an [`Error`] with a [`Code`]; nothing panics on a C
//!   failure. The loaded library's version is checked once, before any
//!   other call ([`check_library_version`]).
//! * [`CallOptions`] give a call its interpreter, context ids, timeout and
//!   [`CancelToken`].
//! * Asynchronous calls ([`Object::call_async`], [`ScriptModule::call_async`],
//!   [`AotiModule::call_async`])
//!   return a [`CallFuture`]: a runtime-agnostic `Future`, completed by
//!   manypy's threads and driven by any executor; dropping it cancels the
//!   call. A pool's queue limit ([`PoolBuilder::queue_limit`]) refuses calls
//!   past it with [`Code::Overloaded`]; a [`Batcher`] stacks concurrent
//!   requests into one call.
//! * The serving lifecycle: a pool can serve early, grow and be resized
//!   ([`PoolBuilder::serve_early`], [`PoolBuilder::max_interpreters`],
//!   [`Pool::resize`]), report its health and request metrics
//!   ([`Pool::stats`], [`Pool::request_metrics`], [`Pool::prometheus_text`];
//!   the `manypy-prometheus` crate is their `prometheus` collector), and
//!   drain ([`Pool::drain`], then [`Code::Draining`]). A model hot swap
//!   keeps the current version as an `Arc<Object>` (docs/rust.md, "Model
//!   hot swap").
//! * [`ArchiveTrust`] names the archives that may run (their SHA-256 digests
//!   and a verifier), for pools ([`PoolBuilder::trust`]), models loaded on
//!   the host ([`ScriptModule::load_trusted`], [`AotiModule::load_trusted`]),
//!   and every host load, with or without its own ([`set_host_archive_trust`]).
//! * Operator callbacks ([`OpCallbacks`]), the [`Profiler`], API usage
//!   logging ([`set_api_usage_handler`]), archive metadata
//!   ([`archive_list_files`], [`archive_save_copy`], [`set_export_hook`]) and custom operator
//!   libraries ([`load_operator_library`]).
//!
//! Values are built with `From` and read with `TryFrom`:
//!
//! ```
//! use manypy::{Tensor, Value};
//! let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]).unwrap();
//! let args = vec![Value::from(&x), Value::from(5), Value::from("text")];
//! assert_eq!(i64::try_from(&args[1]).unwrap(), 5);
//! assert_eq!(Tensor::try_from(&args[0]).unwrap().as_slice::<f32>().unwrap(), &[1.0, 2.0, 3.0]);
//! assert!(x.as_slice::<i64>().is_err()); // wrong dtype: an Err, not a panic
//! ```
//!
//! See docs/rust.md in the repository for building, threads and lifetimes.

mod aoti;
mod batcher;
mod call;
mod callbacks;
mod cancel;
mod error;
mod future;
mod handle;
mod metadata;
#[cfg(feature = "ndarray")]
mod ndarray_support;
mod object;
mod package;
mod pool;
mod profiler;
mod script;
mod serving;
mod tensor;
mod trampoline;
mod trust;
mod usage;
mod value;
mod version;

use std::ffi::CString;
use std::path::Path;

pub use aoti::AotiModule;
pub use batcher::{Batcher, BatcherBuilder};
pub use call::{Args, Arguments, CallOptions, CallOptionsBuilder, KeywordArguments, Kwargs};
pub use callbacks::{InputKind, OpCallback, OpCallbackRegistration, OpCallbacks, OpEvent, OpInput};
pub use cancel::CancelToken;
pub use error::{code_label, Code, Error, Result};
pub use future::CallFuture;
pub use metadata::{
    archive_list_files, archive_read_file, archive_save_copy, clear_export_hook, set_export_hook,
    ExportHook,
};
pub use object::Object;
pub use package::Package;
pub use pool::{Pool, PoolBuilder, ThreadMode};
pub use profiler::{ProfileEntry, Profiler};
pub use script::ScriptModule;
pub use serving::{CodeCounts, DrainResult, DurationHistogram, PoolStats, RequestMetrics};
pub use tensor::{Complex32, Complex64, DType, Element, Tensor, BF16, F16};
pub use trampoline::callback_panics;
pub use trust::{
    clear_host_archive_trust, set_host_archive_trust, ArchiveTrust, ArchiveTrustBuilder,
    ArchiveVerifier,
};
pub use usage::{clear_api_usage_handler, log_api_usage, set_api_usage_handler, ApiUsageHandler};
pub use value::Value;
pub use version::{check_library_version, library_version};

/// The raw bindings, for what the safe API does not cover.
pub use manypy_sys as sys;

/// The most interpreters this process can hold at once, all pools together.
pub fn max_interpreters() -> Result<usize> {
    check_library_version()?;
    Ok(unsafe { sys::manypy_max_interpreters() })
}

/// Loads a custom operator library (a shared library registering operators
/// with `TORCH_LIBRARY`) into the host's libtorch and every interpreter,
/// present and future. Never unloaded.
pub fn load_operator_library(path: impl AsRef<Path>) -> Result<()> {
    check_library_version()?;
    let path = path_c_string(path.as_ref())?;
    unsafe { Error::check(sys::manypy_load_operator_library(path.as_ptr())) }
}

/// Intra-op threads of the host's libtorch, used by [`ScriptModule`] calls.
pub fn set_script_intra_op_threads(threads: i32) -> Result<()> {
    check_library_version()?;
    unsafe { Error::check(sys::manypy_script_set_intra_op_threads(threads)) }
}

/// A path as the C API takes it: UTF-8 without NUL.
pub(crate) fn path_c_string(path: &Path) -> Result<CString> {
    let s = path
        .to_str()
        .ok_or_else(|| Error::new(Code::InvalidArgument, format!("path {path:?} is not UTF-8")))?;
    value::c_string(s)
}

#[cfg(test)]
mod thread_safety {
    //! The promises of manypy.h, as the types state them.
    use super::*;

    fn send_sync<T: Send + Sync>() {}

    #[test]
    fn handles_the_header_calls_thread_safe_are_send_and_sync() {
        // A tuple is Send + Sync only if each of its types is.
        send_sync::<(
            Pool,
            Package,
            Object,
            ScriptModule,
            AotiModule,
            ArchiveTrust,
            CallOptions,
            CancelToken,
        )>();
        send_sync::<(Profiler, Tensor, Value, Args, Kwargs, Error)>();
        send_sync::<(Batcher, CallFuture)>();
        send_sync::<(PoolStats, RequestMetrics, DrainResult)>();
    }

    #[test]
    fn call_futures_can_be_spawned_on_any_thread() {
        // What a multi-threaded executor's spawn asks of a future.
        fn spawnable<F: std::future::Future + Send + 'static>()
        where
            F::Output: Send + 'static,
        {
        }
        spawnable::<CallFuture>();
        fn unpin<F: Unpin>() {}
        unpin::<CallFuture>();
    }
}
