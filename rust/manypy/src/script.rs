//! TorchScript modules run by libtorch on the host: no Python, no interpreter.
use std::path::Path;

use manypy_sys as sys;

use crate::call::{call_value, Arguments, CallOptions, KeywordArguments};
use crate::error::{Error, Result};
use crate::future::{submit, CallFuture};
// Only the docs name it (intra-doc links to its variants).
#[cfg(doc)]
use crate::error::Code;
use crate::handle::Handle;
use crate::trust::ArchiveTrust;
use crate::value::Value;
use crate::version::check_library_version;

/// A TorchScript module (`torch.jit.save`) loaded into the host's libtorch.
/// `Send + Sync`, calls take `&self`: the C API lets any number of threads
/// call it at once.
pub struct ScriptModule(Handle<sys::manypy_script_module>);

impl ScriptModule {
    /// Loads a TorchScript archive from a file. Checks only the host trust
    /// ([`set_host_archive_trust`](crate::set_host_archive_trust)), if one
    /// is set: load only archives you trust, or give a trust
    /// ([`load_trusted`](Self::load_trusted)). An archive the host trust
    /// does not trust is [`Code::UntrustedArchive`], before libtorch reads
    /// any of it.
    pub fn load(path: impl AsRef<Path>) -> Result<ScriptModule> {
        Self::load_file_with(path.as_ref(), std::ptr::null())
    }

    /// Loads a TorchScript archive from bytes. Checks only the host trust,
    /// if set, as [`load`](Self::load).
    pub fn load_bytes(bytes: &[u8]) -> Result<ScriptModule> {
        Self::load_bytes_with(bytes, std::ptr::null())
    }

    /// Loads a TorchScript archive from a file if `trust` trusts it: its
    /// SHA-256 is on the allow-list or the verifier accepts it (origin: the
    /// path). Otherwise [`Code::UntrustedArchive`], whose message gives the
    /// digest, before libtorch reads any of it: libtorch compiles an
    /// archive's code as it loads, and its compiler trusts that code
    /// (docs/security.md). The host trust, if set, must accept it too.
    pub fn load_trusted(path: impl AsRef<Path>, trust: &ArchiveTrust) -> Result<ScriptModule> {
        Self::load_file_with(path.as_ref(), trust.as_ptr())
    }

    /// The same from bytes (the verifier's origin is `"<bytes>"`).
    pub fn load_bytes_trusted(bytes: &[u8], trust: &ArchiveTrust) -> Result<ScriptModule> {
        Self::load_bytes_with(bytes, trust.as_ptr())
    }

    // A NULL trust checks the host trust, if any: manypy_script_load_file.
    fn load_file_with(
        path: &Path,
        trust: *const sys::manypy_archive_trust,
    ) -> Result<ScriptModule> {
        check_library_version()?;
        let path = crate::path_c_string(path)?;
        let mut out = std::ptr::null_mut();
        unsafe {
            Error::check(sys::manypy_script_load_file_trusted(
                path.as_ptr(),
                trust,
                &mut out,
            ))?
        };
        Self::wrap(out)
    }

    fn load_bytes_with(
        bytes: &[u8],
        trust: *const sys::manypy_archive_trust,
    ) -> Result<ScriptModule> {
        check_library_version()?;
        let mut out = std::ptr::null_mut();
        unsafe {
            Error::check(sys::manypy_script_load_bytes_trusted(
                bytes.as_ptr().cast(),
                bytes.len(),
                trust,
                &mut out,
            ))?
        };
        Self::wrap(out)
    }

    fn wrap(raw: *mut sys::manypy_script_module) -> Result<ScriptModule> {
        Handle::returned(raw, "module").map(ScriptModule)
    }

    /// Calls `forward`, in inference mode.
    pub fn call<A: Arguments + ?Sized>(&self, args: &A) -> Result<Value> {
        self.call_with(None, args, &(), None)
    }

    /// Calls a method (`None`: `forward`) with keyword arguments and options
    /// (timeout, cancel token, context; the interpreter index is ignored).
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
                sys::manypy_script_call(self.0.as_ptr(), method, args, kwargs, options, out)
            },
        )
    }

    /// Submits a call of `forward`, as [`call`](Self::call), and returns at
    /// once; see [`Object::call_async`](crate::Object::call_async). It runs
    /// on one of the process's host worker threads (one per core), in
    /// submission order; TorchScript has no pool, so no queue limit applies.
    pub fn call_async<A: Arguments + ?Sized>(&self, args: &A) -> Result<CallFuture> {
        self.call_with_async(None, args, &(), None)
    }

    /// The general asynchronous form, as [`call_with`](Self::call_with).
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
                sys::manypy_script_call_async(
                    self.0.as_ptr(),
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

    /// Saves the module (`torch.jit.save`) with `extra_files` stored as
    /// `extra/<name>`, plus the export hook's.
    pub fn save(&self, path: impl AsRef<Path>, extra_files: &[(&str, Value)]) -> Result<()> {
        let path = crate::path_c_string(path.as_ref())?;
        let extra = crate::metadata::extra_files(extra_files)?;
        unsafe {
            Error::check(sys::manypy_script_save_file(
                self.0.as_ptr(),
                path.as_ptr(),
                extra.as_ptr(),
            ))
        }
    }
}

impl std::fmt::Debug for ScriptModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptModule").finish_non_exhaustive()
    }
}
