//! Replicated objects (models) unpickled from a package.
use manypy_sys as sys;

use crate::call::{
    call_value, options_ptr, value_result, Arguments, CallOptions, KeywordArguments,
};
use crate::error::{Error, Result};
use crate::future::{submit, CallFuture};
use crate::handle::Handle;
use crate::package::Package;
use crate::value::{c_string, Value};

/// An object unpickled from a [`Package`] (typically an `nn.Module`),
/// replicated lazily into each interpreter that serves a call on it.
/// `Send + Sync` and every call takes `&self`: the C API lets any number of
/// threads call one object at once. Keeps its package and pool alive;
/// dropping it unloads every replica once the calls made on it are done
/// (the borrow checker ensures no synchronous call is running then;
/// asynchronous ones in flight hold the object and complete as usual).
///
/// Owners that share an object hold an `Arc<Object>`: that is what C's
/// `manypy_object_share` (a second handle) gives C callers, so the crate
/// has no `share`. For a model hot swap, keep the current version as an
/// `Arc<Object>` behind a `RwLock`: each request clones the `Arc` and calls
/// outside the lock; a swap loads the new version, replaces the `Arc`, and
/// the old version unloads when the last request holding it ends
/// (docs/rust.md, "Model hot swap").
///
/// ```no_run
/// # fn main() -> manypy::Result<()> {
/// use manypy::{Pool, Tensor, Value};
/// let pool = Pool::new(2)?;
/// let model = pool.load_package("identity.pt")?.load_pickle("model", "model.pkl")?;
/// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
/// let y = model.call(&[Value::from(x)])?;
/// # Ok(()) }
/// ```
pub struct Object {
    raw: Handle<sys::manypy_object>, // freed before the package goes
    package: Package,
}

impl Object {
    pub(crate) fn new(raw: *mut sys::manypy_object, package: Package) -> Result<Object> {
        Ok(Object {
            raw: Handle::returned(raw, "object")?,
            package,
        })
    }

    /// The C handle, for calls through the raw API ([`crate::sys`]). It is
    /// valid while `self` is; do not free it.
    pub fn as_raw(&self) -> *mut sys::manypy_object {
        self.raw.as_ptr()
    }

    /// The package the object came from.
    pub fn package(&self) -> &Package {
        &self.package
    }

    /// Calls the object itself (an `nn.Module`'s `forward`, with its hooks)
    /// under `torch.no_grad()`.
    pub fn call<A: Arguments + ?Sized>(&self, args: &A) -> Result<Value> {
        self.call_with(None, args, &(), None)
    }

    /// Calls the method `method`.
    pub fn call_method<A: Arguments + ?Sized>(&self, method: &str, args: &A) -> Result<Value> {
        self.call_with(Some(method), args, &(), None)
    }

    /// The general form: an optional method name (`None`: the object
    /// itself), positional and keyword arguments, and options (interpreter,
    /// context, timeout, cancel token).
    pub fn call_with<A, K>(
        &self,
        method: Option<&str>,
        args: &A,
        kwargs: &K,
        options: Option<&CallOptions>,
    ) -> Result<Value>
    where
        A: Arguments + ?Sized,
        K: KeywordArguments + ?Sized,
    {
        call_value(
            method,
            args,
            kwargs,
            options,
            |method, args, kwargs, options, out| unsafe {
                sys::manypy_object_call(self.raw.as_ptr(), method, args, kwargs, options, out)
            },
        )
    }

    /// Submits a call of the object itself, as [`call`](Self::call), and
    /// returns at once: the future's output is what `call` returns. `Err`
    /// here when the call is refused at submission (arguments that do not
    /// convert, a deadline already past or a token already cancelled, a
    /// pinned interpreter out of range or retired,
    /// [`Code::Overloaded`](crate::Code::Overloaded) past the pool's queue
    /// limit); errors of the call itself come from the future. See
    /// [`CallFuture`] for threads, wakers and dropping (which cancels).
    ///
    /// ```no_run
    /// # async fn serve(model: &manypy::Object, x: manypy::Tensor) -> manypy::Result<manypy::Value> {
    /// let y = model.call_async(&[manypy::Value::from(x)])?.await?;
    /// # Ok(y) }
    /// ```
    pub fn call_async<A: Arguments + ?Sized>(&self, args: &A) -> Result<CallFuture> {
        self.call_with_async(None, args, &(), None)
    }

    /// Submits a call of the method `method`, as [`call_method`](Self::call_method)
    /// (see [`call_async`](Self::call_async)).
    pub fn call_method_async<A: Arguments + ?Sized>(
        &self,
        method: &str,
        args: &A,
    ) -> Result<CallFuture> {
        self.call_with_async(Some(method), args, &(), None)
    }

    /// The general asynchronous form, as [`call_with`](Self::call_with) (see
    /// [`call_async`](Self::call_async)). The options' timeout runs from
    /// submission and bounds the wait for an interpreter; their cancel
    /// token stops the call as dropping the future does.
    pub fn call_with_async<A, K>(
        &self,
        method: Option<&str>,
        args: &A,
        kwargs: &K,
        options: Option<&CallOptions>,
    ) -> Result<CallFuture>
    where
        A: Arguments + ?Sized,
        K: KeywordArguments + ?Sized,
    {
        submit(
            method,
            args,
            kwargs,
            options,
            |method, args, kwargs, options, done, user_data| unsafe {
                sys::manypy_object_call_async(
                    self.raw.as_ptr(),
                    method,
                    args,
                    kwargs,
                    options,
                    done,
                    user_data,
                )
            },
        )
    }

    /// The attribute `name`, converted to a value (a property runs Python,
    /// so `options` may bound it).
    pub fn getattr(&self, name: &str, options: Option<&CallOptions>) -> Result<Value> {
        let name = c_string(name)?;
        value_result(|out| unsafe {
            sys::manypy_object_getattr(self.raw.as_ptr(), name.as_ptr(), options_ptr(options), out)
        })
    }

    /// Whether the object has the attribute `name`.
    pub fn hasattr(&self, name: &str) -> Result<bool> {
        let name = c_string(name)?;
        let mut has = 0;
        unsafe {
            Error::check(sys::manypy_object_hasattr(
                self.raw.as_ptr(),
                name.as_ptr(),
                &mut has,
            ))?
        };
        Ok(has != 0)
    }
}

impl std::fmt::Debug for Object {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Object").finish_non_exhaustive()
    }
}
