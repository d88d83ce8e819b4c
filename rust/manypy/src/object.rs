//! Replicated objects (models) unpickled from a package.
use manypy_sys as sys;

use crate::call::{call_value, options_ptr, value_result, Arguments, CallOptions, KeywordArguments};
use crate::error::{Error, Result};
use crate::handle::Handle;
use crate::package::Package;
use crate::value::{c_string, Value};

/// An object unpickled from a [`Package`] (typically an `nn.Module`),
/// replicated lazily into each interpreter that serves a call on it.
/// `Send + Sync` and every call takes `&self`: the C API lets any number of
/// threads call one object at once. Keeps its package and pool alive;
/// dropping it unloads every replica (the borrow checker ensures no call
/// is running then).
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
        Ok(Object { raw: Handle::returned(raw, "object")?, package })
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
        call_value(method, args, kwargs, options, |method, args, kwargs, options, out| unsafe {
            sys::manypy_object_call(self.raw.as_ptr(), method, args, kwargs, options, out)
        })
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
        unsafe { Error::check(sys::manypy_object_hasattr(self.raw.as_ptr(), name.as_ptr(), &mut has))? };
        Ok(has != 0)
    }
}

impl std::fmt::Debug for Object {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Object").finish_non_exhaustive()
    }
}
