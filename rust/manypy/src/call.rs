//! What a call carries besides its arguments: [`CallOptions`] (interpreter,
//! context ids, timeout, [`CancelToken`]); and the argument forms a call
//! accepts ([`Arguments`], [`KeywordArguments`], prepared [`Args`] and
//! [`Kwargs`]).
use std::ffi::CString;
use std::sync::Arc;
use std::time::Duration;

use manypy_sys as sys;

use crate::cancel::{CallToken, CancelToken};
use crate::error::{Code, Error, Result};
use crate::handle::Handle;
use crate::value::{c_string, CValue, Value};
use crate::version::check_library_version;

/// Per-call options, built once and shared by any number of calls and
/// threads (`Send + Sync`: the C API only reads them during a call).
///
/// ```no_run
/// # fn main() -> manypy::Result<()> {
/// use std::time::Duration;
/// let token = manypy::CancelToken::new()?;
/// let options = manypy::CallOptions::builder()
///     .interpreter(0)
///     .context("resnet18", "request-42")
///     .timeout(Duration::from_millis(250))
///     .cancel_token(&token)
///     .build()?;
/// # Ok(()) }
/// ```
pub struct CallOptions {
    raw: Handle<sys::manypy_call_options>,
    // What `raw` was built from, for an asynchronous call's own C options
    // (the same settings with its per-call token: see cancel.rs).
    settings: Settings,
}

impl CallOptions {
    /// A builder with the defaults: any interpreter, no timeout, no token,
    /// no context.
    pub fn builder() -> CallOptionsBuilder {
        CallOptionsBuilder::default()
    }

    pub(crate) fn as_ptr(&self) -> *const sys::manypy_call_options {
        self.raw.as_ptr()
    }
}

/// Checked, converted settings of [`CallOptions`], which can fill any
/// number of C options.
#[derive(Default)]
struct Settings {
    interpreter: Option<i32>,
    timeout_ns: Option<i64>,
    token: Option<CancelToken>,
    context: Option<(CString, CString)>,
}

impl Settings {
    /// Sets them on `p`, with `token` instead of the settings' own when given.
    unsafe fn apply(
        &self,
        p: *mut sys::manypy_call_options,
        token: Option<&CallToken>,
    ) -> Result<()> {
        if let Some(index) = self.interpreter {
            Error::check(sys::manypy_call_options_set_interpreter(p, index))?;
        }
        if let Some(ns) = self.timeout_ns {
            Error::check(sys::manypy_call_options_set_timeout(p, ns))?;
        }
        // The options take their own reference to the token.
        let token = token
            .map(CallToken::as_ptr)
            .or(self.token.as_ref().map(CancelToken::as_ptr));
        if let Some(token) = token {
            Error::check(sys::manypy_call_options_set_cancel_token(p, token))?;
        }
        if let Some((model, request)) = &self.context {
            Error::check(sys::manypy_call_options_set_context(
                p,
                model.as_ptr(),
                request.as_ptr(),
            ))?;
        }
        Ok(())
    }
}

/// The C options of one asynchronous call: the caller's settings (or the
/// defaults) with the call's own token, to which the caller's token, if
/// any, is linked, so that either stops the call. C copies them at
/// submission, so they are freed after it.
pub(crate) fn per_call_options(
    options: Option<&CallOptions>,
    token: &Arc<CallToken>,
) -> Result<Handle<sys::manypy_call_options>> {
    let raw = Handle::allocated(unsafe { sys::manypy_call_options_new() })?;
    let settings = options.map(|o| &o.settings);
    if let Some(caller) = settings.and_then(|s| s.token.as_ref()) {
        caller.link(token);
    }
    unsafe {
        settings
            .unwrap_or(&Settings::default())
            .apply(raw.as_ptr(), Some(token))?
    };
    Ok(raw)
}

/// Builds [`CallOptions`]; see there.
#[derive(Default, Clone)]
pub struct CallOptionsBuilder {
    interpreter: Option<usize>,
    timeout: Option<Duration>,
    token: Option<CancelToken>,
    context: Option<(String, String)>,
}

impl CallOptionsBuilder {
    /// Pins calls to interpreter `index` of the pool (default: any).
    pub fn interpreter(mut self, index: usize) -> Self {
        self.interpreter = Some(index);
        self
    }

    /// Bounds each call to `timeout` from its start, waiting for an
    /// interpreter included; running Python code is stopped when it passes
    /// ([`Code::DeadlineExceeded`]). `Duration::ZERO` means no timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Calls stop with [`Code::Cancelled`] when `token` is cancelled.
    pub fn cancel_token(mut self, token: &CancelToken) -> Self {
        self.token = Some(token.clone());
        self
    }

    /// The ids every operator callback of these calls reports.
    pub fn context(mut self, model_id: impl Into<String>, request_id: impl Into<String>) -> Self {
        self.context = Some((model_id.into(), request_id.into()));
        self
    }

    /// The options; `Err` for an interpreter index or timeout out of range
    /// or ids containing NUL.
    pub fn build(self) -> Result<CallOptions> {
        check_library_version()?;
        let interpreter = self
            .interpreter
            .map(|index| {
                i32::try_from(index)
                    .map_err(|_| Error::new(Code::OutOfRange, format!("interpreter index {index}")))
            })
            .transpose()?;
        let timeout_ns = self.timeout.map(|t| nanos(t, "timeout")).transpose()?;
        let context = self
            .context
            .map(|(model, request)| Ok::<_, Error>((c_string(&model)?, c_string(&request)?)))
            .transpose()?;
        let settings = Settings {
            interpreter,
            timeout_ns,
            token: self.token,
            context,
        };
        let raw = Handle::allocated(unsafe { sys::manypy_call_options_new() })?;
        unsafe { settings.apply(raw.as_ptr(), None)? };
        Ok(CallOptions { raw, settings })
    }
}

/// A duration as the C API's signed 64-bit nanoseconds: `OutOfRange` past
/// about 292 years, which C could not hold.
pub(crate) fn nanos(duration: Duration, what: &str) -> Result<i64> {
    i64::try_from(duration.as_nanos())
        .map_err(|_| Error::new(Code::OutOfRange, format!("{what} {duration:?}")))
}

/// Positional arguments converted to a C tuple once, for calls that repeat
/// them: such calls convert nothing. `Send + Sync`: any number of threads
/// may pass the same `Args` to calls at once. Its tensors are lent to every
/// call made with it, whose models may write them, and stay lent while the
/// `Args` lives ([`Tensor`](crate::Tensor), "Who may write a tensor's
/// memory").
pub struct Args(CValue);

impl Args {
    /// Converts `values`: a tensor that is neither lent nor frozen is lent
    /// without a copy, and any other is copied.
    pub fn new(values: &[Value]) -> Result<Args> {
        check_library_version()?;
        Value::Tuple(values.to_vec()).to_c().map(Args)
    }

    /// The C tuple, for calls through the raw API; valid while `self` is.
    pub fn as_raw(&self) -> *const sys::manypy_value {
        self.0.as_ptr()
    }
}

/// Keyword arguments converted to a C dict once (see [`Args`]).
pub struct Kwargs(CValue);

impl Kwargs {
    /// Converts `entries` (keys in order).
    pub fn new<K: AsRef<str>>(entries: &[(K, Value)]) -> Result<Kwargs> {
        check_library_version()?;
        kwargs_to_c(entries).map(Kwargs)
    }

    /// The C dict, for calls through the raw API; valid while `self` is.
    pub fn as_raw(&self) -> *const sys::manypy_value {
        self.0.as_ptr()
    }
}

fn kwargs_to_c<K: AsRef<str>>(entries: &[(K, Value)]) -> Result<CValue> {
    let dict = CValue::from_raw(unsafe { sys::manypy_value_new_dict() })
        .ok_or_else(|| Error::new(Code::ResourceExhausted, "out of memory"))?;
    for (key, value) in entries {
        dict.dict_set(key.as_ref(), value.to_c()?)?;
    }
    Ok(dict)
}

pub(crate) mod private {
    use super::*;

    /// Arguments as the C call takes them: converted now, or prepared.
    pub enum Raw<'a> {
        None,
        Owned(CValue),
        Prepared(&'a CValue),
    }

    impl Raw<'_> {
        pub fn as_ptr(&self) -> *const sys::manypy_value {
            match self {
                Raw::None => std::ptr::null(),
                Raw::Owned(v) => v.as_ptr(),
                Raw::Prepared(v) => v.as_ptr(),
            }
        }
    }

    pub trait Sealed {}
}
use private::Raw;

/// What a call takes as positional arguments: a slice, array or `Vec` of
/// [`Value`]s (converted at each call), prepared [`Args`], or `()` for none.
pub trait Arguments: private::Sealed {
    #[doc(hidden)]
    fn raw(&self) -> Result<Raw<'_>>;
}

impl private::Sealed for [Value] {}
impl Arguments for [Value] {
    fn raw(&self) -> Result<Raw<'_>> {
        if self.is_empty() {
            return Ok(Raw::None);
        }
        let tuple = CValue::from_raw(unsafe { sys::manypy_value_new_tuple() })
            .ok_or_else(|| Error::new(Code::ResourceExhausted, "out of memory"))?;
        for v in self {
            let item = std::mem::ManuallyDrop::new(v.to_c()?);
            unsafe { Error::check(sys::manypy_value_append(tuple.as_ptr(), item.as_ptr()))? };
        }
        Ok(Raw::Owned(tuple))
    }
}
impl<const N: usize> private::Sealed for [Value; N] {}
impl<const N: usize> Arguments for [Value; N] {
    fn raw(&self) -> Result<Raw<'_>> {
        self.as_slice().raw()
    }
}
impl private::Sealed for Vec<Value> {}
impl Arguments for Vec<Value> {
    fn raw(&self) -> Result<Raw<'_>> {
        self.as_slice().raw()
    }
}
impl private::Sealed for Args {}
impl Arguments for Args {
    fn raw(&self) -> Result<Raw<'_>> {
        Ok(Raw::Prepared(&self.0))
    }
}
impl private::Sealed for () {}
impl Arguments for () {
    fn raw(&self) -> Result<Raw<'_>> {
        Ok(Raw::None)
    }
}

/// What a call takes as keyword arguments: a slice, array or `Vec` of
/// `(name, Value)` pairs, prepared [`Kwargs`], or `()` for none.
pub trait KeywordArguments: private::Sealed {
    #[doc(hidden)]
    fn raw(&self) -> Result<Raw<'_>>;
}

impl<K: AsRef<str>> private::Sealed for [(K, Value)] {}
impl<K: AsRef<str>> KeywordArguments for [(K, Value)] {
    fn raw(&self) -> Result<Raw<'_>> {
        if self.is_empty() {
            return Ok(Raw::None);
        }
        kwargs_to_c(self).map(Raw::Owned)
    }
}
impl<K: AsRef<str>, const N: usize> private::Sealed for [(K, Value); N] {}
impl<K: AsRef<str>, const N: usize> KeywordArguments for [(K, Value); N] {
    fn raw(&self) -> Result<Raw<'_>> {
        self.as_slice().raw()
    }
}
impl<K: AsRef<str>> private::Sealed for Vec<(K, Value)> {}
impl<K: AsRef<str>> KeywordArguments for Vec<(K, Value)> {
    fn raw(&self) -> Result<Raw<'_>> {
        self.as_slice().raw()
    }
}
impl private::Sealed for Kwargs {}
impl KeywordArguments for Kwargs {
    fn raw(&self) -> Result<Raw<'_>> {
        Ok(Raw::Prepared(&self.0))
    }
}
impl KeywordArguments for () {
    fn raw(&self) -> Result<Raw<'_>> {
        Ok(Raw::None)
    }
}

/// The body of `Object::call_with`, `ScriptModule::call_with` and
/// `AotiModule::call_with` (which takes no method): converts
/// the method name (`None`: the object itself, NULL in C), the arguments and
/// the options, and hands them to `call` (`manypy_object_call` or
/// `manypy_script_call` on the caller's handle), whose result it converts.
pub(crate) fn call_value<A, K>(
    method: Option<&str>,
    args: &A,
    kwargs: &K,
    options: Option<&CallOptions>,
    call: impl FnOnce(
        *const std::os::raw::c_char,
        *const sys::manypy_value,
        *const sys::manypy_value,
        *const sys::manypy_call_options,
        *mut *mut sys::manypy_value,
    ) -> *mut sys::manypy_status,
) -> Result<Value>
where
    A: Arguments + ?Sized,
    K: KeywordArguments + ?Sized,
{
    let method = method.map(c_string).transpose()?;
    let method = method.as_ref().map_or(std::ptr::null(), |m| m.as_ptr());
    let (args, kwargs) = (args.raw()?, kwargs.raw()?);
    value_result(|out| {
        call(
            method,
            args.as_ptr(),
            kwargs.as_ptr(),
            options_ptr(options),
            out,
        )
    })
}

/// The C pointer of optional call options.
pub(crate) fn options_ptr(options: Option<&CallOptions>) -> *const sys::manypy_call_options {
    options.map_or(std::ptr::null(), CallOptions::as_ptr)
}

/// Runs a C call that returns an owned value, and converts the result.
pub(crate) fn value_result(
    f: impl FnOnce(*mut *mut sys::manypy_value) -> *mut sys::manypy_status,
) -> Result<Value> {
    let mut out = std::ptr::null_mut();
    unsafe { Error::check(f(&mut out))? };
    let owned = CValue::from_raw(out)
        .ok_or_else(|| Error::new(Code::Internal, "the library returned no value"))?;
    owned.to_value()
}

impl std::fmt::Debug for CallOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallOptions").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Args {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Args").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Kwargs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kwargs").finish_non_exhaustive()
    }
}
