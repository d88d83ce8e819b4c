//! Which archives may run: an allow-list of SHA-256 digests and a verifier,
//! for pools ([`PoolBuilder::trust`](crate::PoolBuilder::trust)), for
//! TorchScript and AOTInductor packages loaded on the host
//! ([`ScriptModule::load_trusted`](crate::ScriptModule::load_trusted),
//! [`AotiModule::load_trusted`](crate::AotiModule::load_trusted)), and as the
//! process's host trust ([`set_host_archive_trust`]). The one place where
//! the binding hands digests and verifiers to C.
use std::ffi::c_void;
use std::os::raw::c_char;
use std::sync::Arc;

use manypy_sys as sys;

use crate::error::{Error, Result};
// Only the docs name it (intra-doc links to its variants).
#[cfg(doc)]
use crate::error::Code;
use crate::handle::Handle;
use crate::trampoline::guard;
use crate::value::c_string;
use crate::version::check_library_version;

/// Decides about an archive not on the allow-list: gets its SHA-256 and its
/// origin (the path, or `"<bytes>"`), returns whether to trust it.
pub type ArchiveVerifier = Box<dyn Fn(&[u8; 32], &str) -> bool + Send + Sync + 'static>;

/// A verifier as the builders keep it: shared by every C trust made from
/// them (each holds one clone, freed by the C library).
type SharedVerifier = Arc<dyn Fn(&[u8; 32], &str) -> bool + Send + Sync + 'static>;

/// Builds an [`ArchiveTrust`]: [`ArchiveTrust::builder`].
#[derive(Clone, Default)]
pub struct ArchiveTrustBuilder {
    sha256: Vec<String>,
    verifier: Option<SharedVerifier>,
}

impl ArchiveTrustBuilder {
    /// Trusts archives with this SHA-256 (64 hex digits, either case, as
    /// `sha256sum` prints it). Checked by [`build`](Self::build):
    /// [`Code::InvalidArgument`] for anything else.
    pub fn sha256(mut self, hex_digest: impl Into<String>) -> Self {
        self.sha256.push(hex_digest.into());
        self
    }

    /// Decides about archives not on the allow-list, replacing an earlier
    /// verifier. It gets the archive's SHA-256 and origin (the path, or
    /// `"<bytes>"`). Runs on the loading thread (and on the thread creating
    /// a pool, about archives its interpreters ran before); it must not call
    /// manypy. A panic in it refuses the archive
    /// ([`callback_panics`](crate::callback_panics) counts it). Dropped once,
    /// when the builder, the trust and every pool made from them are gone.
    pub fn verifier(
        mut self,
        verifier: impl Fn(&[u8; 32], &str) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.verifier = Some(Arc::new(verifier));
        self
    }

    /// The trust. [`Code::InvalidArgument`] for a digest that is not 64 hex
    /// digits. With neither digests nor a verifier it checks nothing: every
    /// archive loads, as without a trust.
    pub fn build(self) -> Result<ArchiveTrust> {
        check_library_version()?;
        let raw = Handle::allocated(unsafe { sys::manypy_archive_trust_new() })?; // freed on every path out
        let t = raw.as_ptr();
        for digest in &self.sha256 {
            unsafe {
                Error::check(sys::manypy_archive_trust_add_sha256(
                    t,
                    c_string(digest)?.as_ptr(),
                ))?
            };
        }
        if let Some(verifier) = &self.verifier {
            let user_data = Box::into_raw(Box::new(Arc::clone(verifier))) as *mut c_void;
            // The C library frees it (free_verifier) exactly once, even on failure.
            unsafe {
                Error::check(sys::manypy_archive_trust_set_verifier(
                    t,
                    Some(verify),
                    user_data,
                    Some(free_verifier),
                ))?
            };
        }
        Ok(ArchiveTrust {
            raw: Arc::new(raw),
            spec: self,
        })
    }
}

unsafe extern "C" fn verify(
    sha256: *const u8,
    origin: *const c_char,
    user_data: *mut c_void,
) -> i32 {
    let verifier = &*(user_data as *const SharedVerifier);
    let digest = &*(sha256 as *const [u8; 32]);
    let origin = crate::error::owned(origin);
    // A panicking verifier refuses the archive.
    guard(|| verifier(digest, &origin)).unwrap_or(false) as i32
}

unsafe extern "C" fn free_verifier(user_data: *mut c_void) {
    let _ = guard(|| drop(Box::from_raw(user_data as *mut SharedVerifier)));
}

/// Which archives to run: the SHA-256 digests of trusted archives and a
/// verifier for the rest. A pool given one ([`PoolBuilder::trust`]), a host
/// load given one ([`ScriptModule::load_trusted`],
/// [`ScriptModule::load_bytes_trusted`], [`AotiModule::load_trusted`],
/// [`AotiModule::load_bytes_trusted`]), and every host load given none
/// while it is the host trust ([`set_host_archive_trust`]), refuse any other
/// archive with [`Code::UntrustedArchive`] (the message gives its digest)
/// before any of it runs (docs/security.md). Immutable once built; `Clone`
/// shares it, `Send + Sync`.
///
/// ```no_run
/// # fn main() -> manypy::Result<()> {
/// let trust = manypy::ArchiveTrust::builder()
///     .sha256("3f2a0c...")                       // as sha256sum prints it
///     .verifier(|sha256, origin| origin.starts_with("/srv/models/"))
///     .build()?;
/// let pool = manypy::Pool::builder().trust(&trust).build()?;
/// let scripted = manypy::ScriptModule::load_trusted("/srv/models/ranker.pt", &trust)?;
/// # Ok(()) }
/// ```
///
/// [`PoolBuilder::trust`]: crate::PoolBuilder::trust
/// [`ScriptModule::load_trusted`]: crate::ScriptModule::load_trusted
/// [`ScriptModule::load_bytes_trusted`]: crate::ScriptModule::load_bytes_trusted
/// [`AotiModule::load_trusted`]: crate::AotiModule::load_trusted
/// [`AotiModule::load_bytes_trusted`]: crate::AotiModule::load_bytes_trusted
#[derive(Clone)]
pub struct ArchiveTrust {
    // Only build() sets digests and the verifier, before the trust is
    // shared; after that C only reads it.
    raw: Arc<Handle<sys::manypy_archive_trust>>,
    spec: ArchiveTrustBuilder,
}

impl ArchiveTrust {
    /// A builder of a trust that trusts nothing yet.
    pub fn builder() -> ArchiveTrustBuilder {
        ArchiveTrustBuilder::default()
    }

    /// The C trust, valid while `self` lives.
    pub(crate) fn as_ptr(&self) -> *const sys::manypy_archive_trust {
        self.raw.as_ptr()
    }

    /// What it was built from, to build upon (a pool builder's trust).
    pub(crate) fn to_builder(&self) -> ArchiveTrustBuilder {
        self.spec.clone()
    }
}

/// Makes `trust` the host trust: what every host load checks
/// ([`ScriptModule`](crate::ScriptModule) and
/// [`AotiModule`](crate::AotiModule) loads, from files and bytes, with or
/// without a trust of their own), so that a service can refuse, with one
/// call at start-up, every model it does not know. It replaces an earlier
/// host trust. A load given a trust
/// ([`ScriptModule::load_trusted`](crate::ScriptModule::load_trusted), ...)
/// must satisfy both: loading code can narrow the policy, never widen it.
/// Pools have their own ([`PoolBuilder::trust`](crate::PoolBuilder::trust)).
///
/// Process-wide, from any thread; a load already past its check is not
/// affected. The library keeps a copy: dropping `trust` changes nothing,
/// and its verifier (shared by the copy) is dropped once the host trust is
/// replaced or cleared and every other trust and pool holding it has gone.
///
/// ```no_run
/// # fn main() -> manypy::Result<()> {
/// let trust = manypy::ArchiveTrust::builder().sha256("3f2a0c...").build()?;
/// manypy::set_host_archive_trust(&trust)?;
/// let ranker = manypy::ScriptModule::load("/srv/models/ranker.pt")?; // checked
/// # Ok(()) }
/// ```
pub fn set_host_archive_trust(trust: &ArchiveTrust) -> Result<()> {
    check_library_version()?;
    unsafe { Error::check(sys::manypy_set_host_archive_trust(trust.as_ptr())) }
}

/// Removes the host trust: host loads check only the trust they are given again.
pub fn clear_host_archive_trust() -> Result<()> {
    check_library_version()?;
    unsafe { Error::check(sys::manypy_set_host_archive_trust(std::ptr::null())) }
}

impl std::fmt::Debug for ArchiveTrust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArchiveTrust")
            .field("sha256", &self.spec.sha256)
            .field("verifier", &self.spec.verifier.is_some())
            .finish()
    }
}
