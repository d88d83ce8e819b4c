//! The pool of interpreters, and its builder.
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use manypy_sys as sys;

use crate::call::{nanos, options_ptr, value_result, CallOptions};
use crate::error::{Code, Error, Result};
use crate::handle::Handle;
use crate::package::Package;
use crate::serving::{
    failed_user_data, free_failed, interpreter_failed, take_request_metrics, DrainResult,
    InterpreterFailedCallback, PoolStats, RequestMetrics,
};
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
    serve_early: bool,
    max_interpreters: Option<usize>,
    grow_after: Option<Duration>,
    name: Option<String>,
    on_interpreter_failed: Option<InterpreterFailedCallback>,
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

    /// Serve as soon as one interpreter is ready (default false: only once
    /// all are). With true, [`build`](Self::build) returns when the first
    /// interpreter has started and the others start in the background:
    /// calls that may go anywhere go only to started interpreters, and a
    /// call pinned to one still starting waits for it, within its deadline.
    /// A background start that fails leaves that interpreter broken
    /// ([`Pool::stats`] counts it, [`Pool::check_interpreter`] says why, and
    /// [`on_interpreter_failed`](Self::on_interpreter_failed) is told); the
    /// pool serves on the others. `build` fails only if no interpreter
    /// starts.
    ///
    /// Off by default so that a pool that is returned is whole: an
    /// interpreter that cannot start then fails `build` itself. Turn it on
    /// for a service behind a readiness probe.
    pub fn serve_early(mut self, serve_early: bool) -> Self {
        self.serve_early = serve_early;
        self
    }

    /// Growth: the most interpreters the pool may grow to by itself, from
    /// [`interpreters`](Self::interpreters) (the least). When a call has
    /// waited for an interpreter longer than
    /// [`grow_after`](Self::grow_after), the pool starts one more in the
    /// background, up to this many, and serves on the others meanwhile.
    /// Default: the starting number (no growth). `build` fails with
    /// [`Code::OutOfRange`] below the starting number or above
    /// [`crate::max_interpreters`]. A pool never shrinks by itself (an
    /// interpreter keeps its memory for the life of the process); see
    /// [`Pool::resize`].
    pub fn max_interpreters(mut self, max: usize) -> Self {
        self.max_interpreters = Some(max);
        self
    }

    /// How long a call may wait for an interpreter before the pool grows
    /// (up to [`max_interpreters`](Self::max_interpreters)). Default 20 ms.
    /// `build` fails with [`Code::OutOfRange`] below 1 ns or past
    /// `i64::MAX` nanoseconds.
    pub fn grow_after(mut self, wait: Duration) -> Self {
        self.grow_after = Some(wait);
        self
    }

    /// A name for the pool: the `pool` label of its metrics
    /// ([`Pool::prometheus_text`], and the `manypy-prometheus` collector's
    /// default), so that several pools of a process can be told apart.
    /// Default: none (no `pool` label). A NUL in it is
    /// [`Code::InvalidArgument`] from `build`.
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.to_owned());
        self
    }

    /// Told when an interpreter of the pool fails to start in the
    /// background ([`serve_early`](Self::serve_early), or when the pool
    /// grows), with its index in the pool and the error saying why.
    ///
    /// - It runs on a thread of manypy's, possibly several at once (hence
    ///   `Fn + Send + Sync`: keep state in atomics or a `Mutex`). It may
    ///   call manypy.
    /// - A panic in it is caught and counted ([`crate::callback_panics`]).
    /// - The C pool owns it, and drops it exactly once when the pool is
    ///   gone: after the last [`Pool`] clone, package, object, batcher and
    ///   asynchronous call of it, which may be after the last Rust handle
    ///   (a failure reported meanwhile, say of an interpreter the pool grew
    ///   by for a batcher's calls, is still passed on). It is dropped on the thread that lets
    ///   go last, possibly a manypy thread; a panic in a captured value's
    ///   `Drop` is caught and counted too. A builder dropped without
    ///   building, or whose `build` fails, drops it at once.
    /// - So it must not hold the pool, a package or an object of it itself:
    ///   the pool would hold itself, and stay for the rest of the process.
    ///
    /// Replaces an earlier callback.
    pub fn on_interpreter_failed(
        mut self,
        callback: impl Fn(usize, Error) + Send + Sync + 'static,
    ) -> Self {
        self.on_interpreter_failed = Some(Arc::new(callback));
        self
    }

    /// Creates the pool. Interpreters are leased from the process and
    /// started now (about a second each: each imports torch), or only the
    /// first with [`serve_early`](Self::serve_early).
    pub fn build(self) -> Result<Pool> {
        check_library_version()?;
        let options = Handle::allocated(unsafe { sys::manypy_pool_options_new() })?;
        let o = options.as_ptr();
        unsafe {
            if let Some(n) = self.interpreters {
                Error::check(sys::manypy_pool_options_set_interpreters(o, n))?;
            }
            for path in &self.sys_paths {
                Error::check(sys::manypy_pool_options_add_sys_path(
                    o,
                    c_string(path)?.as_ptr(),
                ))?;
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
            Error::check(sys::manypy_pool_options_set_archive_trust(
                o,
                trust.as_ptr(),
            ))?;
            Error::check(sys::manypy_pool_options_set_allow_process_exit(
                o,
                self.allow_process_exit as i32,
            ))?;
            if let Some(grace) = self.stop_grace {
                Error::check(sys::manypy_pool_options_set_stop_grace(
                    o,
                    nanos(grace, "stop grace")?,
                ))?;
            }
            if let Some(limit) = self.queue_limit {
                Error::check(sys::manypy_pool_options_set_queue_limit(o, limit))?;
            }
            Error::check(sys::manypy_pool_options_set_serve_early(
                o,
                self.serve_early as i32,
            ))?;
            if let Some(max) = self.max_interpreters {
                Error::check(sys::manypy_pool_options_set_max_interpreters(o, max))?;
            }
            if let Some(wait) = self.grow_after {
                Error::check(sys::manypy_pool_options_set_grow_after(
                    o,
                    nanos(wait, "grow_after")?,
                ))?;
            }
            if let Some(name) = &self.name {
                Error::check(sys::manypy_pool_options_set_name(
                    o,
                    c_string(name)?.as_ptr(),
                ))?;
            }
            // Set before the pool exists: with serve_early, a background
            // start may fail before manypy_pool_create returns. Owned by C
            // from here on: freed (free_failed) exactly once, when the last
            // pool or options holding it let go, at once if this fails, or
            // with the options if the pool is not created. Set last, so
            // that an earlier `?` leaves it to be dropped with `self`.
            if let Some(callback) = self.on_interpreter_failed {
                Error::check(sys::manypy_pool_options_set_on_interpreter_failed(
                    o,
                    Some(interpreter_failed),
                    failed_user_data(callback),
                    Some(free_failed),
                ))?;
            }
            let mut pool = std::ptr::null_mut();
            Error::check(sys::manypy_pool_create(o, &mut pool))?;
            let raw = Handle::returned(pool, "pool")?;
            Ok(Pool(Arc::new(PoolInner {
                raw,
                name: self.name,
            })))
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
// objects' references) goes, so it never races another call: every method
// borrows a Pool, and so holds the Arc.
#[derive(Clone)]
pub struct Pool(Arc<PoolInner>);

struct PoolInner {
    raw: Handle<sys::manypy_pool>,
    name: Option<String>,
}

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
        self.0.raw.as_ptr()
    }

    /// The number of interpreters in the pool right now (starting, ready,
    /// busy or broken): indices `0..size()` are valid for pinned calls. It
    /// changes with [`resize`](Self::resize) and growth
    /// ([`PoolBuilder::max_interpreters`]), so read it when needed rather
    /// than keeping it.
    pub fn size(&self) -> usize {
        unsafe { sys::manypy_pool_size(self.ptr()) }
    }

    /// The pool's name ([`PoolBuilder::name`]), the `pool` label of its
    /// metrics; `None` for a pool without one.
    pub fn name(&self) -> Option<&str> {
        self.0.name.as_deref()
    }

    /// The pool's health: its interpreters by state, its load, whether it
    /// drains, and the calls completed by status code. Lock-free reads, so
    /// the counts may be taken a moment apart.
    pub fn stats(&self) -> Result<PoolStats> {
        // SAFETY: a plain C struct, all integers: zero is a valid value.
        let mut raw: sys::manypy_pool_stats = unsafe { std::mem::zeroed() };
        raw.struct_size = std::mem::size_of::<sys::manypy_pool_stats>() as u32;
        unsafe { Error::check(sys::manypy_pool_get_stats(self.ptr(), &mut raw))? };
        Ok(PoolStats::from_raw(&raw))
    }

    /// Resizes the pool to `interpreters`, 1 to [`crate::max_interpreters`]
    /// ([`Code::OutOfRange`] otherwise, whose message gives the range).
    ///
    /// - Growing leases interpreters from the process (starting new ones)
    ///   and returns once they serve; one that fails to start stays in the
    ///   pool, broken, and the first failure is the `Err`.
    ///   [`Code::ResourceExhausted`] when the process has too few
    ///   interpreters left.
    /// - Shrinking takes the highest indices out of the pool at once (calls
    ///   pinned to them are then [`Code::OutOfRange`]; calls running there
    ///   finish first) and gives them back to the process for other pools;
    ///   their memory stays with the process.
    /// - [`Code::Draining`] once the pool drains.
    ///
    /// Resizes of one pool are serialized; any thread may call it.
    pub fn resize(&self, interpreters: usize) -> Result<()> {
        unsafe { Error::check(sys::manypy_pool_resize(self.ptr(), interpreters)) }
    }

    /// Graceful drain, for a service that is stopping (SIGTERM) or moving
    /// traffic away. From now on the pool refuses new calls with
    /// [`Code::Draining`], through its packages, objects and batchers too,
    /// synchronous and asynchronous; it never stops draining.
    ///
    /// Calls already running or queued go on. `timeout` bounds them: when
    /// it passes, those left are cancelled as by a [`CancelToken`]
    /// (they end with [`Code::Cancelled`]); `None` waits for them however
    /// long they take. Returns when no call is left, or once those
    /// cancelled have had their stop grace
    /// ([`PoolBuilder::stop_grace`]) twice over to end, with how many
    /// finished and how many were cancelled.
    ///
    /// Any number of threads may drain at once, and again: each waits in
    /// the same way and counts the calls in flight when it began. While it
    /// waits, the borrow keeps this pool's C handle alive, so other handles
    /// may be dropped meanwhile, in any order.
    ///
    /// [`CancelToken`]: crate::CancelToken
    pub fn drain(&self, timeout: Option<Duration>) -> Result<DrainResult> {
        let deadline = match timeout {
            None => 0,
            Some(timeout) => {
                let now = unsafe { sys::manypy_monotonic_ns() };
                now.checked_add(nanos(timeout, "drain timeout")?)
                    .ok_or_else(|| {
                        Error::new(Code::OutOfRange, format!("drain timeout {timeout:?}"))
                    })?
            }
        };
        let mut out = DrainResult::default();
        unsafe {
            Error::check(sys::manypy_pool_drain(
                self.ptr(),
                deadline,
                &mut out.finished,
                &mut out.cancelled,
            ))?;
        }
        Ok(out)
    }

    /// Every model's request metrics since the pool was created (owned
    /// copies), by the model id of the calls' context ([`CallOptions`]'s
    /// `context`; `""` for calls without one): calls by status code, and
    /// histograms of request and queue durations.
    pub fn request_metrics(&self) -> Result<Vec<RequestMetrics>> {
        let (mut metrics, mut count) = (std::ptr::null_mut(), 0usize);
        unsafe {
            Error::check(sys::manypy_pool_request_metrics(
                self.ptr(),
                &mut metrics,
                &mut count,
            ))?;
            take_request_metrics(metrics, count)
        }
    }

    /// The pool's metrics in the Prometheus text exposition format, as the
    /// C library writes them, for a `/metrics` endpoint:
    /// `manypy_requests_total{model,code}`, the histograms
    /// `manypy_request_duration_seconds{model}` and
    /// `manypy_queue_duration_seconds{model}`, the gauges
    /// `manypy_inflight_requests`, `manypy_queued_requests`,
    /// `manypy_interpreters{state}` and `manypy_draining`; every series
    /// carries `pool="<name>"` when the pool has a name
    /// ([`PoolBuilder::name`]). A service on the `prometheus` crate
    /// registers the `manypy-prometheus` collector instead.
    pub fn prometheus_text(&self) -> Result<String> {
        String::try_from(value_result(|out| unsafe {
            sys::manypy_pool_prometheus(self.ptr(), out)
        })?)
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
        unsafe {
            Error::check(sys::manypy_pool_exec(
                self.ptr(),
                index(interpreter)?,
                source.as_ptr(),
            ))
        }
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
        unsafe {
            Error::check(sys::manypy_pool_exec_with_options(
                self.ptr(),
                source.as_ptr(),
                options_ptr(options),
            ))
        }
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
        value_result(|out| unsafe {
            sys::manypy_pool_eval(self.ptr(), i, expression.as_ptr(), out)
        })
    }

    /// Evaluates a Python expression as [`eval`](Self::eval), with call
    /// options as [`exec_with`](Self::exec_with) takes them; converting the
    /// result is part of the bounded work.
    pub fn eval_with(&self, expression: &str, options: Option<&CallOptions>) -> Result<Value> {
        let expression = c_string(expression)?;
        value_result(|out| unsafe {
            sys::manypy_pool_eval_with_options(
                self.ptr(),
                expression.as_ptr(),
                options_ptr(options),
                out,
            )
        })
    }

    /// Loads a torch.package archive from a file, read once into memory that
    /// every interpreter of the pool shares: changing the file afterwards
    /// changes nothing the package runs.
    pub fn load_package(&self, path: impl AsRef<Path>) -> Result<Package> {
        let path = crate::path_c_string(path.as_ref())?;
        let mut out = std::ptr::null_mut();
        unsafe {
            Error::check(sys::manypy_package_load_file(
                self.ptr(),
                path.as_ptr(),
                &mut out,
            ))?
        };
        Package::new(out, self.clone())
    }

    /// Loads a torch.package archive from bytes (copied).
    pub fn load_package_bytes(&self, bytes: &[u8]) -> Result<Package> {
        let mut out = std::ptr::null_mut();
        unsafe {
            Error::check(sys::manypy_package_load_bytes(
                self.ptr(),
                bytes.as_ptr().cast(),
                bytes.len(),
                &mut out,
            ))?
        };
        Package::new(out, self.clone())
    }
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("name", &self.name())
            .field("size", &self.size())
            .finish()
    }
}

/// An interpreter index for C: -1 for any.
pub(crate) fn index(interpreter: Option<usize>) -> Result<i32> {
    match interpreter {
        None => Ok(sys::MANYPY_ANY_INTERPRETER),
        Some(i) => i32::try_from(i)
            .map_err(|_| Error::new(Code::OutOfRange, format!("interpreter index {i}"))),
    }
}
