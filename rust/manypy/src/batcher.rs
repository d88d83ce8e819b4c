//! Dynamic batching: concurrent requests to one method of an object,
//! stacked along a batch dimension and run as one call (manypy.h, "Dynamic
//! batching").
use std::time::Duration;

use manypy_sys as sys;

use crate::call::{call_value, Arguments, CallOptions, KeywordArguments};
use crate::error::{Code, Error, Result};
use crate::future::{submit, CallFuture};
use crate::handle::Handle;
use crate::object::Object;
use crate::value::{c_string, Value};
use crate::version::check_library_version;

/// Combines concurrent calls of one method of an [`Object`] into one call,
/// as TorchServe's and Triton's dynamic batching do.
///
/// - A request is an ordinary call whose tensor arguments carry the batch
///   dimension: a batch-1 image is `[1, 3, H, W]`. Every tensor of a request
///   has the same number of rows.
/// - Requests whose arguments have the same structure, whose other
///   arguments are equal, and whose tensors match in dtype and in every
///   dimension but the batch one are concatenated; the method runs once on
///   the batch, and each tensor of its result (a tensor, or a list, tuple
///   or dict of them) is split back, each request getting its rows. Values
///   that are not tensors go to every request as they are. Other requests
///   wait for batches of their own.
/// - A batch runs when it has [`max_batch`](BatcherBuilder::max_batch) rows
///   or [`max_wait`](BatcherBuilder::max_wait) after its first request came.
/// - An error fails every request of its batch with that error; a result
///   with the wrong number of rows fails them with [`Code::BadTensor`].
/// - A request's timeout and cancel token bound it: stopped while it waits
///   for its batch, it is dropped at once. Dropping a [`CallFuture`] of
///   [`call_async`](Self::call_async) cancels its request the same way.
/// - The pool's queue limit applies to requests as they come.
///
/// `Send + Sync`, calls take `&self`. The batcher holds its object (and so
/// the package and pool): they may be dropped in any order. Dropping the
/// batcher sends the requests still waiting at once; every accepted request
/// completes as usual. The batch sizes formed appear in
/// [`Profiler::prometheus`](crate::Profiler::prometheus) as the histogram
/// `manypy_batch_size{batcher="<name>"}`.
///
/// ```no_run
/// # async fn serve(model: &manypy::Object, image: manypy::Tensor) -> manypy::Result<()> {
/// use std::time::Duration;
/// let batcher = manypy::Batcher::builder()
///     .max_batch(8)
///     .max_wait(Duration::from_millis(2))
///     .name("resnet18")
///     .build(model, None)?;
/// // From many tasks at once: each sends [1, 3, 224, 224], gets [1, 1000].
/// let scores = batcher.call_async(&[manypy::Value::from(image)])?.await?;
/// # Ok(()) }
/// ```
pub struct Batcher(Handle<sys::manypy_batcher>);

/// Options of a [`Batcher`]; see [`Batcher::builder`].
#[derive(Debug, Clone, Default)]
pub struct BatcherBuilder {
    max_batch: Option<usize>,
    max_wait: Option<Duration>,
    batch_dim: Option<usize>,
    name: Option<String>,
}

impl BatcherBuilder {
    /// The most rows in a batch, 1 to 65536 (default 8). A request with
    /// more rows runs alone.
    pub fn max_batch(mut self, rows: usize) -> Self {
        self.max_batch = Some(rows);
        self
    }

    /// The longest a batch waits to fill after its first request (default
    /// 2 ms; at most 60 s; whole microseconds, rounded down).
    /// `Duration::ZERO`: a batch takes only what is already waiting.
    pub fn max_wait(mut self, wait: Duration) -> Self {
        self.max_wait = Some(wait);
        self
    }

    /// The batch dimension (default 0). Every tensor argument must have it.
    pub fn batch_dim(mut self, dim: usize) -> Self {
        self.batch_dim = Some(dim);
        self
    }

    /// The `batcher` label in metrics (default: the method's name).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// A batcher over `object`'s method `method` (`None`: the object
    /// itself). `Err` ([`Code::OutOfRange`]) for options out of range, as
    /// the builder's methods give them.
    pub fn build(self, object: &Object, method: Option<&str>) -> Result<Batcher> {
        check_library_version()?;
        let options = Handle::allocated(unsafe { sys::manypy_batcher_options_new() })?;
        let o = options.as_ptr();
        let method = method.map(c_string).transpose()?;
        unsafe {
            if let Some(rows) = self.max_batch {
                Error::check(sys::manypy_batcher_options_set_max_batch(o, rows))?;
            }
            if let Some(wait) = self.max_wait {
                let us = i64::try_from(wait.as_micros())
                    .map_err(|_| Error::new(Code::OutOfRange, format!("max_wait {wait:?}")))?;
                Error::check(sys::manypy_batcher_options_set_max_wait_us(o, us))?;
            }
            if let Some(dim) = self.batch_dim {
                let dim = i32::try_from(dim)
                    .map_err(|_| Error::new(Code::OutOfRange, format!("batch_dim {dim}")))?;
                Error::check(sys::manypy_batcher_options_set_batch_dim(o, dim))?;
            }
            if let Some(name) = &self.name {
                Error::check(sys::manypy_batcher_options_set_name(
                    o,
                    c_string(name)?.as_ptr(),
                ))?;
            }
            let mut out = std::ptr::null_mut();
            let method = method.as_ref().map_or(std::ptr::null(), |m| m.as_ptr());
            Error::check(sys::manypy_batcher_new(
                object.as_raw(),
                method,
                o,
                &mut out,
            ))?;
            Handle::returned(out, "batcher").map(Batcher)
        }
    }
}

impl Batcher {
    /// Options: max_batch 8, max_wait 2 ms, batch dimension 0, the method's
    /// name in metrics.
    pub fn builder() -> BatcherBuilder {
        BatcherBuilder::default()
    }

    /// The C handle, for the raw API ([`crate::sys`]); valid while `self` is.
    pub fn as_raw(&self) -> *mut sys::manypy_batcher {
        self.0.as_ptr()
    }

    /// One request, waiting for its share of the batch's result. Refused
    /// at once ([`Code::InvalidArgument`]) for arguments the batcher cannot
    /// split: no tensor, a tensor without the batch dimension, tensors with
    /// different rows.
    pub fn call<A: Arguments + ?Sized>(&self, args: &A) -> Result<Value> {
        self.call_with(args, &(), None)
    }

    /// One request with keyword arguments and options (timeout, cancel
    /// token, context; the interpreter is ignored).
    pub fn call_with<A, K>(
        &self,
        args: &A,
        kwargs: &K,
        options: Option<&CallOptions>,
    ) -> Result<Value>
    where
        A: Arguments + ?Sized,
        K: KeywordArguments + ?Sized,
    {
        call_value(
            None,
            args,
            kwargs,
            options,
            |_, args, kwargs, options, out| unsafe {
                sys::manypy_batcher_call(self.0.as_ptr(), args, kwargs, options, out)
            },
        )
    }

    /// One request, asynchronously: see [`Object::call_async`] for what is
    /// refused at once and [`CallFuture`] for the rest. Dropping the future
    /// before its batch runs drops the request from it.
    pub fn call_async<A: Arguments + ?Sized>(&self, args: &A) -> Result<CallFuture> {
        self.call_with_async(args, &(), None)
    }

    /// The general asynchronous form, as [`call_with`](Self::call_with).
    pub fn call_with_async<A, K>(
        &self,
        args: &A,
        kwargs: &K,
        options: Option<&CallOptions>,
    ) -> Result<CallFuture>
    where
        A: Arguments + ?Sized,
        K: KeywordArguments + ?Sized,
    {
        submit(
            None,
            args,
            kwargs,
            options,
            |_, args, kwargs, options, done, user_data| unsafe {
                sys::manypy_batcher_call_async(
                    self.0.as_ptr(),
                    args,
                    kwargs,
                    options,
                    done,
                    user_data,
                )
            },
        )
    }
}

impl std::fmt::Debug for Batcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batcher").finish_non_exhaustive()
    }
}
