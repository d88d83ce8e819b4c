//! The pool of interpreters, and its builder.
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use manypy_sys as sys;

use crate::call::{nanos, options_ptr, value_result, CallOptions};
use crate::error::{Code, Error, Result};
use crate::handle::Handle;
use crate::package::Package;
use crate::trust::{ArchiveTrust, ArchiveTrustBuilder};
use crate::value::{c_string, Value};
use crate::version::check_library_version;

/// How a call reaches its interpreter (docs/threads.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ThreadMode {
    /// The calling thread enters the interpreter itself. Fastest.
    #[default]
    Direct,
    /// The call runs on a thread the library owns, one per interpreter:
    /// memory stays flat however many host threads come and go.
    Handoff,
}

/// Options of a [`Pool`]; see [`Pool::builder`].
#[derive(Default)]
pub struct PoolBuilder {
    interpreters: Option<usize>,
    sys_paths: Vec<String>,
    intra_op_threads: Option<i32>,
    thread_mode: ThreadMode,
    trust: ArchiveTrustBuilder,
    allow_process_exit: bool,
    stop_grace: Option<Duration>,
    queue_limit: Option<usize>,
}

impl PoolBuilder {
    /// Number of interpreters, 1 to [`crate::max_interpreters`] (default 1).
    pub fn interpreters(mut self, count: usize) -> Self {
        self.interpreters = Some(count);
        self
    }

    /// Appends a directory to every interpreter's `sys.path`.
    pub fn sys_path(mut self, path: impl Into<String>) -> Self {
        self.sys_paths.push(path.into());
        self
    }

    /// Intra-op threads per interpreter (default 1).
    pub fn intra_op_threads(mut self, threads: i32) -> Self {
        self.intra_op_threads = Some(threads);
        self
    }

    /// How calls reach interpreters (default [`ThreadMode::Direct`]).
    pub fn thread_mode(mut self, mode: ThreadMode) -> Self {
        self.thread_mode = mode;
        self
    }

    /// Trusts archives with this SHA-256 (64 hex digits). A pool given an
    /// allow-list or a verifier runs only archives they accept
    /// ([`Code::UntrustedArchive`] otherwise, before any of the archive runs).
    /// Adds to the pool's trust, as [`ArchiveTrustBuilder::sha256`].
    pub fn trust_sha256(mut self, hex_digest: impl Into<String>) -> Self {
        self.trust = self.trust.sha256(hex_digest);
        self
    }

    /// Decides about archives not on the allow-list, as
    /// [`ArchiveTrustBuilder::verifier`]: runs on the loading thread; a panic
    /// in it refuses the archive. Replaces the trust's verifier.
    pub fn archive_verifier(
        mut self,
        verifier: impl Fn(&[u8; 32], &str) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.trust = self.trust.verifier(verifier);
        self
    }

    /// The pool's allow-list and verifier: those of `trust`, replacing what
    /// [`trust_sha256`](Self::trust_sha256) and
    /// [`archive_verifier`](Self::archive_verifier) gave before (as
    /// `manypy_pool_options_set_archive_trust` replaces them); later calls
    /// of those add to it. The same trust can serve every pool and every
    /// TorchScript load of a service (docs/security.md).
    pub fn trust(mut self, trust: &ArchiveTrust) -> Self {
        self.trust = trust.to_builder();
        self
    }

    /// Whether `os._exit` in a model ends the process (default false: it
    /// raises in Python instead).
    pub fn allow_process_exit(mut self, allow: bool) -> Self {
        self.allow_process_exit = allow;
        self
    }

    /// How long a stopped call's clean-up (its `finally` blocks and
    /// `__exit__` methods) may run before the stop escalates, cutting the
    /// clean-up short and retiring the interpreter for the rest of the
    /// process (docs/rust.md, "Deadlines and cancellation"). Default 100 ms;
    /// `Duration::ZERO` escalates at once, so every stop that does not end
    /// the call at its first raise retires its interpreter. `build` fails
    /// with [`Code::OutOfRange`] past `i64::MAX` nanoseconds (about 292
    /// years).
    pub fn stop_grace(mut self, grace: Duration) -> Self {
        self.stop_grace = Some(grace);
        self
    }

    /// Admission control: the most calls that may wait for an interpreter
    /// at once (a call waits when the interpreter chosen for it is running
    /// another). Synchronous, asynchronous and batched calls count alike. A
    /// call past the limit is refused at once with [`Code::Overloaded`] and
    /// never runs: `Err` from a synchronous call, from
    /// [`Object::call_async`](crate::Object::call_async) itself for an
    /// asynchronous one. 0, the default, sets no limit. See
    /// [`Pool::queued`].
    pub fn queue_limit(mut self, limit: usize) -> Self {
        self.queue_limit = Some(limit);
        self
    }

    /// Creates the pool. Interpreters start on first use (about a second
    /// each: each imports torch).
    pub fn build(self) -> Result<Pool> {
        check_library_version()?;
        let options = Handle::allocated(unsafe { sys::manypy_pool_options_new() })?;
        let o = options.as_ptr();
        unsafe {
            if let Some(n) = self.interpreters {
                Error::check(sys::manypy_pool_options_set_interpreters(o, n))?;
            }
            for path in &self.sys_paths {
                Error::check(sys::manypy_pool_options_add_sys_path(o, c_string(path)?.as_ptr()))?;
            }
            if let Some(threads) = self.intra_op_threads {
                Error::check(sys::manypy_pool_options_set_intra_op_threads(o, threads))?;
            }
            let mode = match self.thread_mode {
                ThreadMode::Direct => sys::MANYPY_THREAD_MODE_DIRECT,
                ThreadMode::Handoff => sys::MANYPY_THREAD_MODE_HANDOFF,
            };
            Error::check(sys::manypy_pool_options_set_thread_mode(o, mode))?;
            // Copied by the options (the verifier is shared): the trust may go.
            let trust = self.trust.build()?;
            Error::check(sys::manypy_pool_options_set_archive_trust(o, trust.as_ptr()))?;
            Error::check(sys::manypy_pool_options_set_allow_process_exit(o, self.allow_process_exit as i32))?;
            if let Some(grace) = self.stop_grace {
                Error::check(sys::manypy_pool_options_set_stop_grace(o, nanos(grace, "stop grace")?))?;
            }
            if let Some(limit) = self.queue_limit {
                Error::check(sys::manypy_pool_options_set_queue_limit(o, limit))?;
            }
            let mut pool = std::ptr::null_mut();
            Error::check(sys::manypy_pool_create(o, &mut pool))?;
            Ok(Pool(Arc::new(Handle::returned(pool, "pool")?)))
        }
    }
}

/// A pool of isolated interpreters, each with its own GIL. `Clone` shares
/// the pool; `Send + Sync`, and every method takes `&self`: the C pool is
/// thread safe. Packages and objects keep their pool alive; the pool's
/// interpreters go back to the process when the last of them is dropped.
///
/// ```no_run
/// # fn main() -> manypy::Result<()> {
/// let pool = manypy::Pool::builder().interpreters(2).build()?;
/// pool.exec_all("def double(x):\n    return 2 * x\n")?;
/// assert_eq!(pool.eval(Some(1), "double(21)")?, manypy::Value::Int(42));
/// # Ok(()) }
/// ```
// Destroyed once, when the last Arc (the Pool clones, its packages' and
// objects' references) goes, so it never races another call.
#[derive(Clone)]
pub struct Pool(Arc<Handle<sys::manypy_pool>>);

impl Pool {
    /// Options for a new pool.
    pub fn builder() -> PoolBuilder {
        PoolBuilder::default()
    }

    /// A pool with default options and `interpreters` interpreters.
    pub fn new(interpreters: usize) -> Result<Pool> {
        Pool::builder().interpreters(interpreters).build()
    }

    fn ptr(&self) -> *mut sys::manypy_pool {
        self.0.as_ptr()
    }

    /// Number of interpreters.
    pub fn size(&self) -> usize {
        unsafe { sys::manypy_pool_size(self.ptr()) }
    }

    /// Calls waiting for an interpreter now: what
    /// [`PoolBuilder::queue_limit`] bounds. For metrics, and for a caller
    /// that sheds load itself. Calls through the pool's packages, objects and
    /// batchers count.
    pub fn queued(&self) -> usize {
        unsafe { sys::manypy_pool_queued(self.ptr()) }
    }

    /// Calls admitted and not yet complete (waiting or running). Read apart
    /// from [`queued`](Self::queued), lock-free, so the two may be taken a
    /// moment apart.
    pub fn in_flight(&self) -> usize {
        unsafe { sys::manypy_pool_in_flight(self.ptr()) }
    }

    /// `Ok(())` if interpreter `interpreter` (`0..size()`) can serve calls.
    /// Otherwise `Err`: [`Code::InterpreterBroken`] for an interpreter
    /// retired after a stopped call whose clean-up was cut short, with the
    /// reason in the message (it never serves again in this process; calls
    /// that may go anywhere go to the pool's other interpreters, calls
    /// pinned to it fail with the same code), or [`Code::OutOfRange`] for a
    /// bad index. For health checks: a pool whose interpreters are all
    /// retired serves nothing. A retired interpreter keeps its place among
    /// the process's interpreters ([`crate::max_interpreters`]) for good;
    /// later pools get only interpreters that can serve.
    pub fn check_interpreter(&self, interpreter: usize) -> Result<()> {
        let i = index(Some(interpreter))?;
        unsafe { Error::check(sys::manypy_pool_check_interpreter(self.ptr(), i)) }
    }

    /// Runs Python statements in an interpreter's global namespace
    /// (`None`: any interpreter).
    pub fn exec(&self, interpreter: Option<usize>, source: &str) -> Result<()> {
        let source = c_string(source)?;
        unsafe { Error::check(sys::manypy_pool_exec(self.ptr(), index(interpreter)?, source.as_ptr())) }
    }

    /// Runs Python statements as [`exec`](Self::exec), with call options
    /// (`None`: any interpreter, unbounded): the interpreter is the
    /// options' ([`CallOptionsBuilder::interpreter`](crate::CallOptionsBuilder::interpreter)),
    /// and their timeout and cancel token bound the run, the wait for the
    /// interpreter included, as they bound an object call
    /// ([`Code::DeadlineExceeded`], [`Code::Cancelled`]); operator callbacks
    /// of what it runs report the options' context.
    pub fn exec_with(&self, source: &str, options: Option<&CallOptions>) -> Result<()> {
        let source = c_string(source)?;
        unsafe { Error::check(sys::manypy_pool_exec_with_options(self.ptr(), source.as_ptr(), options_ptr(options))) }
    }

    /// Runs the same statements in every interpreter, in order; stops at the
    /// first failure.
    pub fn exec_all(&self, source: &str) -> Result<()> {
        let source = c_string(source)?;
        unsafe { Error::check(sys::manypy_pool_exec_all(self.ptr(), source.as_ptr())) }
    }

    /// Evaluates a Python expression in an interpreter (`None`: any).
    pub fn eval(&self, interpreter: Option<usize>, expression: &str) -> Result<Value> {
        let expression = c_string(expression)?;
        let i = index(interpreter)?;
        value_result(|out| unsafe { sys::manypy_pool_eval(self.ptr(), i, expression.as_ptr(), out) })
    }

    /// Evaluates a Python expression as [`eval`](Self::eval), with call
    /// options as [`exec_with`](Self::exec_with) takes them; converting the
    /// result is part of the bounded work.
    pub fn eval_with(&self, expression: &str, options: Option<&CallOptions>) -> Result<Value> {
        let expression = c_string(expression)?;
        value_result(|out| unsafe {
            sys::manypy_pool_eval_with_options(self.ptr(), expression.as_ptr(), options_ptr(options), out)
        })
    }

    /// Loads a torch.package archive from a file, read once into memory that
    /// every interpreter of the pool shares: changing the file afterwards
    /// changes nothing the package runs.
    pub fn load_package(&self, path: impl AsRef<Path>) -> Result<Package> {
        let path = crate::path_c_string(path.as_ref())?;
        let mut out = std::ptr::null_mut();
        unsafe { Error::check(sys::manypy_package_load_file(self.ptr(), path.as_ptr(), &mut out))? };
        Package::new(out, self.clone())
    }

    /// Loads a torch.package archive from bytes (copied).
    pub fn load_package_bytes(&self, bytes: &[u8]) -> Result<Package> {
        let mut out = std::ptr::null_mut();
        unsafe {
            Error::check(sys::manypy_package_load_bytes(self.ptr(), bytes.as_ptr().cast(), bytes.len(), &mut out))?
        };
        Package::new(out, self.clone())
    }
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool").field("size", &self.size()).finish()
    }
}

/// An interpreter index for C: -1 for any.
pub(crate) fn index(interpreter: Option<usize>) -> Result<i32> {
    match interpreter {
        None => Ok(sys::MANYPY_ANY_INTERPRETER),
        Some(i) => i32::try_from(i).map_err(|_| Error::new(Code::OutOfRange, format!("interpreter index {i}"))),
    }
}
