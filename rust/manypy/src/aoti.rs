//! AOTInductor packages (`.pt2`) run by libtorch on the host: no Python, no
//! interpreter.
use std::collections::HashMap;
use std::path::Path;

use manypy_sys as sys;

use crate::call::{call_value, value_result, Arguments, CallOptions, KeywordArguments};
use crate::error::{Error, Result};
use crate::future::{submit, CallFuture};
// Only the docs name it (intra-doc links to its variants).
#[cfg(doc)]
use crate::error::Code;
use crate::handle::Handle;
use crate::trust::ArchiveTrust;
use crate::value::Value;
use crate::version::check_library_version;

/// A model that `torch.export` captured and AOTInductor compiled to native
/// code (`torch._inductor.aoti_compile_and_package` writes the `.pt2`), run
/// by libtorch's own loader in the host process: no Python, no interpreter,
/// no pool. PyTorch's successor to TorchScript for models that need no
/// Python. It has no methods: a call takes the tensors of the example inputs
/// it was exported with, in their structure, and returns the structure the
/// model returned (a tensor, or tuples, lists and string-keyed dicts of
/// them). Needs a manypy built against torch 2.6 or newer: elsewhere every
/// load is [`Code::UnsupportedVersion`], whose message names the torch
/// needed.
///
/// `Send + Sync`, calls take `&self`: any number of threads may call it at
/// once (up to one call per core runs at a time; more wait for a free copy
/// of the model's buffers). Dropping it frees it; asynchronous calls in
/// flight hold the C module until they complete.
///
/// ```no_run
/// # fn main() -> manypy::Result<()> {
/// use manypy::{AotiModule, Tensor, Value};
/// let model = AotiModule::load("python_heavy.pt2")?;
/// let x = Tensor::from_vec(vec![0f32; 4 * 64], &[4, 64])?;
/// let out = model.call(&[Value::from(&x)])?;
/// let logits = Tensor::try_from(out.get("logits").unwrap())?;
/// # Ok(()) }
/// ```
pub struct AotiModule(Handle<sys::manypy_aoti_module>);

impl AotiModule {
    /// Loads a `.pt2` package from a file (read once). Checks the host trust
    /// ([`set_host_archive_trust`](crate::set_host_archive_trust)), if one is
    /// set, and nothing else: a package holds a compiled library, and
    /// loading it runs that library's code. Load only packages you trust, or
    /// give a trust ([`load_trusted`](Self::load_trusted)).
    ///
    /// Errors: [`Code::UnsupportedVersion`] (a manypy without AOTInductor,
    /// or a package compiled for another device, CPU architecture,
    /// instruction set or OS), [`Code::Loader`] (its library does not load:
    /// compiled against another torch, or a library it needs is missing),
    /// [`Code::NotAPackage`] (TorchScript, a torch.package, an exported
    /// program without a compiled model), [`Code::BadArchive`] (truncated or
    /// inconsistent), [`Code::UntrustedArchive`], [`Code::NotFound`].
    pub fn load(path: impl AsRef<Path>) -> Result<AotiModule> {
        Self::load_file_with(path.as_ref(), std::ptr::null())
    }

    /// Loads a `.pt2` package from bytes (copied: the buffer may go at
    /// once). Checks the host trust, if set, as [`load`](Self::load).
    pub fn load_bytes(bytes: &[u8]) -> Result<AotiModule> {
        Self::load_bytes_with(bytes, std::ptr::null())
    }

    /// Loads a `.pt2` package from a file if `trust` trusts it: its SHA-256
    /// is on the allow-list or the verifier accepts it (origin: the path).
    /// Otherwise [`Code::UntrustedArchive`], whose message gives the digest,
    /// before libtorch reads any of it. The host trust, if set, must accept
    /// it too.
    pub fn load_trusted(path: impl AsRef<Path>, trust: &ArchiveTrust) -> Result<AotiModule> {
        Self::load_file_with(path.as_ref(), trust.as_ptr())
    }

    /// The same from bytes (the verifier's origin is `"<bytes>"`).
    pub fn load_bytes_trusted(bytes: &[u8], trust: &ArchiveTrust) -> Result<AotiModule> {
        Self::load_bytes_with(bytes, trust.as_ptr())
    }

    // A NULL trust checks the host trust, if any.
    fn load_file_with(path: &Path, trust: *const sys::manypy_archive_trust) -> Result<AotiModule> {
        check_library_version()?;
        let path = crate::path_c_string(path)?;
        let mut out = std::ptr::null_mut();
        unsafe { Error::check(sys::manypy_aoti_load_file(path.as_ptr(), trust, &mut out))? };
        Self::wrap(out)
    }

    fn load_bytes_with(
        bytes: &[u8],
        trust: *const sys::manypy_archive_trust,
    ) -> Result<AotiModule> {
        check_library_version()?;
        let mut out = std::ptr::null_mut();
        unsafe {
            Error::check(sys::manypy_aoti_load_bytes(
                bytes.as_ptr().cast(),
                bytes.len(),
                trust,
                &mut out,
            ))?
        };
        Self::wrap(out)
    }

    fn wrap(raw: *mut sys::manypy_aoti_module) -> Result<AotiModule> {
        Handle::returned(raw, "module").map(AotiModule)
    }

    /// Calls the model with positional arguments, in inference mode.
    /// Contiguous tensors are passed without copies (others are copied
    /// once); results are new tensors.
    ///
    /// Errors: [`Code::InvalidArgument`] for the wrong number of arguments
    /// or a missing or extra keyword (the message names the structure
    /// expected), [`Code::WrongKind`] for a non-tensor where a tensor
    /// belongs, [`Code::BadTensor`] for a dtype, shape or device the model
    /// was not compiled for, [`Code::Python`] when the compiled model fails.
    pub fn call<A: Arguments + ?Sized>(&self, args: &A) -> Result<Value> {
        self.call_with(args, &(), None)
    }

    /// Calls the model with keyword arguments and options (timeout, cancel
    /// token, context; the interpreter index is ignored). Compiled kernels
    /// cannot be stopped while they run: the deadline and the token are
    /// checked before the model starts ([`Code::DeadlineExceeded`],
    /// [`Code::Cancelled`]) and when it returns, and a result that comes
    /// after the deadline is dropped for [`Code::DeadlineExceeded`].
    /// Operator callbacks and the profiler see one operator per call,
    /// `manypy::aoti_run`, with the options' context.
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
            |_method, args, kwargs, options, out| unsafe {
                sys::manypy_aoti_call(self.0.as_ptr(), args, kwargs, options, out)
            },
        )
    }

    /// Submits a call, as [`call`](Self::call), and returns at once; see
    /// [`Object::call_async`](crate::Object::call_async). Arguments that do
    /// not fit the model are refused here, as an `Err`. The call runs on
    /// one of the process's host worker threads (one per core), in
    /// submission order; no queue limit applies. Dropping the future cancels
    /// a call that has not started; one already running finishes, and its
    /// result is dropped.
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
            |_method, args, kwargs, options, done, user_data| unsafe {
                sys::manypy_aoti_call_async(self.0.as_ptr(), args, kwargs, options, done, user_data)
            },
        )
    }

    /// What AOTInductor recorded when it compiled the model
    /// (`AOTI_DEVICE_KEY`, `AOTI_CPU_ISA`, `AOTI_MACHINE`, ...). The
    /// package's extra files are records:
    /// [`archive_read_file`](crate::archive_read_file) reads them, and
    /// [`archive_save_copy`](crate::archive_save_copy) writes a copy with
    /// more.
    pub fn metadata(&self) -> Result<HashMap<String, String>> {
        let dict = value_result(|out| unsafe { sys::manypy_aoti_metadata(self.0.as_ptr(), out) })?;
        Vec::<(String, Value)>::try_from(dict)?
            .into_iter()
            .map(|(key, value)| Ok((key, String::try_from(value)?)))
            .collect()
    }
}

impl std::fmt::Debug for AotiModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AotiModule").finish_non_exhaustive()
    }
}
