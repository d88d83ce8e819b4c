# The Python half of libmanypy_interp.so: run once in every interpreter at
# start, as the module `_manypy_runtime`. Compiled into the library as a
# string (see CMakeLists.txt), so an installed library needs no extra files.
import builtins
import gc
import importlib
import io
import os
import sys
import traceback


class ArchiveError(Exception):
    """An archive whose records cannot be read as a package: corrupt,
    truncated or doctored. Raised from the original error, which the
    traceback shows; the host reports it as MANYPY_ERR_BAD_ARCHIVE."""

    __module__ = "manypy"


def _archive_error(exc):
    return ArchiveError(f"{type(exc).__name__}: {exc}")


class DeadlineExceeded(BaseException):
    """Raised in model code whose call ran past its deadline.

    A BaseException, so `except Exception` lets it through; manypy raises it
    again at every line until the call ends (core/interp/stop.c).
    """

    __module__ = "manypy"


class Cancelled(BaseException):
    """Raised in model code whose call's cancel token was cancelled."""

    __module__ = "manypy"


def installation_roots():
    """Where the interpreter's own code comes from: its sys.path at start
    (the standard library, site-packages, PYTHONPATH) and Python's frozen
    modules. A stop is raised first in code from anywhere else, the model's
    (core/interp/stop.c)."""
    roots = {os.path.join(p, "") for p in sys.path if p and os.path.isabs(p)}
    return tuple(sorted(roots)) + ("<frozen ",)


def _turn_off_autocast():
    """torch's autocast is per thread: `with torch.autocast(...)` turns it
    on and its __exit__ off. Turns it off if it is still on."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    found = []
    for device in ("cpu", "cuda"):
        try:
            enabled = torch.is_autocast_enabled(device)
        except TypeError:  # torch 1.13: no device argument
            enabled = (torch.is_autocast_cpu_enabled() if device == "cpu"
                       else torch.is_autocast_enabled())
        if enabled:
            found.append(f"autocast ({device})")
            if device == "cpu" and hasattr(torch, "set_autocast_cpu_enabled"):
                torch.set_autocast_cpu_enabled(False)
            elif device == "cuda" and not hasattr(torch, "get_autocast_dtype"):
                torch.set_autocast_enabled(False)
            else:
                torch.set_autocast_enabled(device, False)
    if found:
        while torch.autocast_decrement_nesting() > 0:
            pass
        torch.clear_autocast_cache()


def after_stop():
    """What a stopped call may have left behind, checked on its own thread
    once it returned. Repairs what it safely can, and returns what it could
    not ("" when the interpreter may serve again): the host then retires
    the interpreter (core/interp/stop.c).

    A stop is raised once, in the model's code, so clean-up normally runs;
    these are the places where it can still leave state that later calls,
    or other threads, would trip over:
    - a module whose import the stop interrupted (importlib marks it
      __spec__._initializing while its body runs) is dropped from
      sys.modules, so the next import runs it again rather than handing out
      half a module (installed modules stay for the interpreter's life);
    - logging's module lock and its handlers' locks, still held by this
      thread, are released: every thread that logs would block on them;
    - torch's autocast, still on for this thread, is turned off (it made
      later calls compute in bfloat16);
    - an import lock still held by this thread cannot be released safely.
    """
    import threading

    me = threading.get_ident()
    problems = []
    for name, module in list(sys.modules.items()):
        spec = getattr(module, "__dict__", {}).get("__spec__")
        if spec is not None and getattr(spec, "_initializing", False):
            del sys.modules[name]
    bootstrap = sys.modules.get("importlib._bootstrap")
    for ref in list(getattr(bootstrap, "_module_locks", {}).values()):
        lock = ref()
        if lock is not None and getattr(lock, "owner", None) == me:
            problems.append(f"the import lock of {lock.name} is still held")
    logging = sys.modules.get("logging")
    if logging is not None:
        locks = [logging._lock] + [h.lock for h in (r() for r in list(logging._handlerList))
                                   if h is not None and getattr(h, "lock", None) is not None]
        for lock in locks:
            while getattr(lock, "_is_owned", lambda: False)():
                lock.release()
    _turn_off_autocast()
    return "; ".join(problems)


class ProcessExitRefused(RuntimeError):
    """Raised by os._exit and os.abort: they would end the host process,
    which serves other models and other requests (pool option
    manypy_pool_options_set_allow_process_exit restores them)."""

    __module__ = "manypy"


_allow_process_exit = False
# The process that started this interpreter: the host. A process forked from
# it by model code (multiprocessing, a DataLoader's workers, os.fork) is not.
_host_pid = os.getpid()


def in_host_process():
    return os.getpid() == _host_pid


def guard_process_exit():
    """os._exit and os.abort (and posix's) raise ProcessExitRefused in the
    host process unless the lease allows them. A child that model code
    forked ends as it asks: multiprocessing's and the DataLoader's workers
    finish with os._exit, and a child that could not would unwind into the
    host's own code and run the host program a second time. A guard against
    a model ending the service by accident, not a sandbox: code can still
    kill its process other ways."""
    import posix

    original_exit, original_abort = posix._exit, posix.abort

    def _exit(status):
        if _allow_process_exit or not in_host_process():
            original_exit(status)
        raise ProcessExitRefused(f"os._exit({status}) would end the host process")

    def abort():
        if _allow_process_exit or not in_host_process():
            original_abort()
        raise ProcessExitRefused("os.abort() would end the host process")

    for module in (os, posix):
        module._exit = _exit
        module.abort = abort


def guard_signal_handlers():
    """Signal handlers and timers belong to the host process: a JVM, the Go
    runtime or a C service relies on its own SIGTERM, SIGINT and SIGCHLD
    handling. In the host process, the functions that would change them
    raise ValueError, the error CPython gives off its main thread, which
    code that registers handlers already expects; in a forked child they
    work as usual. Also covered: faulthandler, which installs handlers for
    SIGSEGV and friends. Again a guard against accidents: ctypes can still
    call sigaction."""
    import _signal
    import faulthandler
    import signal

    def guarded(module, name):
        original = getattr(module, name, None)
        if original is None:
            return

        def refuse(*args, **kwargs):
            if not in_host_process():
                return original(*args, **kwargs)
            raise ValueError(f"{module.__name__}.{name}() would change the signal handling of "
                             "the host process, which belongs to the service, not to a model "
                             "(manypy)")

        refuse.__name__ = name
        refuse.__doc__ = original.__doc__
        setattr(module, name, refuse)

    # signal.signal() calls _signal.signal at call time; the rest signal
    # imported by name from _signal, so both modules are patched.
    for name in ("signal", "siginterrupt", "set_wakeup_fd", "alarm", "setitimer"):
        guarded(_signal, name)
        guarded(signal, name)
    for name in ("enable", "register"):
        guarded(faulthandler, name)


# --- process-wide state (issue 36) -------------------------------------------


class ProcessStateRefused(PermissionError):
    """Raised by os.chdir and os.fchdir in the host process: the working
    directory is the whole process's, and the host's relative paths (a
    manypy_package_load_file("models/m.pt"), its own files) depend on it."""

    __module__ = "manypy"


def keep_process_state_to_host():
    """What model code could change for the whole host process, and what
    happens instead while it runs in the host (in a child that model code
    forked, each works as usual):
    - os.chdir and os.fchdir (and posix's) raise ProcessStateRefused, a
      PermissionError: the working directory is the process's, and a
      directory put back after the call would still be wrong for the
      host's threads while the call runs;
    - faulthandler.dump_traceback_later raises ValueError, as enable and
      register do (guard_signal_handlers): its timer thread writes into the
      host's stderr and, with exit=True, ends the host process;
      cancel_dump_traceback_later is left alone, it only stops such a timer;
    - signal.pthread_sigmask raises ValueError when it would change the
      calling thread's mask (reading it, or a change that changes nothing,
      works): unblocking a signal that a host blocks on every thread to
      take it with sigwait (SIGTERM, often) has it delivered here instead,
      with its default action, and blocking one on a host thread in DIRECT
      mode, or on manypy's own, keeps it from the host.
    Guards against accidents, not a sandbox: ctypes can still call chdir."""
    import _signal
    import faulthandler
    import operator
    import posix

    original_chdir, original_fchdir = posix.chdir, posix.fchdir

    def chdir(path):
        if not in_host_process():
            return original_chdir(path)
        raise ProcessStateRefused(f"os.chdir({path!r}) would change the working directory of the "
                                  "host process, which belongs to the service, not to a model "
                                  "(manypy)")

    def fchdir(fd):
        if not in_host_process():
            return original_fchdir(fd)
        raise ProcessStateRefused(f"os.fchdir({fd!r}) would change the working directory of the "
                                  "host process, which belongs to the service, not to a model "
                                  "(manypy)")

    for function, original in ((chdir, original_chdir), (fchdir, original_fchdir)):
        function.__doc__ = original.__doc__
        for module in (os, posix):
            setattr(module, function.__name__, function)

    original_later = faulthandler.dump_traceback_later

    def dump_traceback_later(*args, **kwargs):
        if not in_host_process():
            return original_later(*args, **kwargs)
        raise ValueError("faulthandler.dump_traceback_later() would start a timer that writes "
                         "into the host process's stderr and can end the process, which belongs "
                         "to the service, not to a model (manypy)")

    dump_traceback_later.__doc__ = original_later.__doc__
    faulthandler.dump_traceback_later = dump_traceback_later

    original_mask = getattr(_signal, "pthread_sigmask", None)
    if original_mask is None:
        return
    # The kernel never blocks these, so asking to changes nothing.
    unblockable = {int(_signal.SIGKILL), int(_signal.SIGSTOP)}

    def pthread_sigmask(how, mask):
        if not in_host_process():
            return original_mask(how, mask)
        signals = [operator.index(s) for s in mask]  # as CPython reads them
        if any(not 1 <= s < _signal.NSIG for s in signals) or how not in (
                _signal.SIG_BLOCK, _signal.SIG_UNBLOCK, _signal.SIG_SETMASK):
            return original_mask(how, signals)  # CPython's own error; nothing changes
        current = {int(s) for s in original_mask(_signal.SIG_BLOCK, ())}
        named = set(signals) - unblockable
        after = (current | named if how == _signal.SIG_BLOCK else
                 current - named if how == _signal.SIG_UNBLOCK else named)
        if after == current:
            return original_mask(how, signals)  # changes nothing: the old mask, as CPython's
        raise ValueError("signal.pthread_sigmask() would change which signals reach a thread of "
                         "the host process, whose signal handling belongs to the service, not "
                         "to a model (manypy)")

    pthread_sigmask.__doc__ = original_mask.__doc__
    _signal.pthread_sigmask = pthread_sigmask  # signal.pthread_sigmask calls it at call time


# The longest switch interval model code may set, in seconds. A stop takes
# the interpreter's GIL from the thread running the call, and the thread
# hands it over only after the switch interval: sys.setswitchinterval(3)
# made a 300 ms deadline fire after 3.3 s (issue 36). CPython's default is
# 5 ms; a longer interval buys little throughput for one thread per GIL.
MAX_SWITCH_INTERVAL = 0.01
_unclamped_setswitchinterval = sys.setswitchinterval  # for manypy's own tests


def guard_switch_interval():
    """sys.setswitchinterval clamps what model code asks to
    MAX_SWITCH_INTERVAL, so that a stop still takes the GIL in time; shorter
    intervals are set as asked, and bad values fail as they always did.
    Clamped rather than refused: code that raises the interval for
    throughput runs on. A guard against accidents, as the signal guards are
    (the original is still reachable to code that digs for it): what a
    stop does when it cannot get the GIL in time is docs/threads.md's."""
    original = _unclamped_setswitchinterval

    def setswitchinterval(interval):
        if isinstance(interval, (int, float)) and interval > MAX_SWITCH_INTERVAL:
            interval = MAX_SWITCH_INTERVAL
        original(interval)

    setswitchinterval.__doc__ = original.__doc__
    sys.setswitchinterval = setswitchinterval


def leave_main_thread_to_host():
    """The thread that started this interpreter (its home thread, which runs
    HANDOFF calls) must not look like Python's main thread: code that sets
    signal handlers only from the main thread (torch's DataLoader sets a
    SIGCHLD handler) would then set the host's. Registering it as a foreign
    ("dummy") thread makes it what every host thread already is in DIRECT
    mode."""
    import threading

    ident = threading.get_ident()
    with threading._active_limbo_lock:
        current = threading._active.get(ident)
        if isinstance(current, threading._MainThread):
            del threading._active[ident]
    if isinstance(current, threading._MainThread):
        threading._DummyThread()  # registers itself for this thread


def main_thread_in_forked_children():
    """In a child that model code forked, the forking thread is the only
    one, and Python's main thread. threading's own after-fork hook keeps
    the thread object it finds registered for it, and every thread of an
    interpreter is registered as a foreign ("dummy") thread: an
    interpreter's home thread by leave_main_thread_to_host, a host thread
    once anything asked threading about it. Before Python 3.13 such a main
    thread has no state lock, so threading._shutdown, which
    multiprocessing runs as each child's process ends, failed its assert
    and every multiprocessing.Process child exited with status 1 (in
    HANDOFF mode always). This hook, run after threading's, gives the child
    a real main thread, as a forked Python program has (3.13 converts the
    foreign thread itself)."""
    import threading

    def after_in_child():
        current = threading._main_thread
        if not isinstance(current, threading._DummyThread):
            return
        with threading._active_limbo_lock:
            threading._active.pop(threading.get_ident(), None)
        threading._main_thread = threading._MainThread()  # registers itself

    os.register_at_fork(after_in_child=after_in_child)


def forbid_global_dlopen():
    """Clear RTLD_GLOBAL for every dlopen made from Python.

    glibc 2.36 crashes (add_to_global_resize) when RTLD_GLOBAL is used inside
    a secondary link-map namespace, and torch's __init__ preloads
    libtorch_global_deps.so with ctypes.CDLL(..., mode=RTLD_GLOBAL). torch
    imports and runs normally without the preload being global.
    """
    sys.setdlopenflags(sys.getdlopenflags() & ~os.RTLD_GLOBAL)
    import ctypes

    original_init = ctypes.CDLL.__init__

    def init_without_global(self, name, mode=ctypes.DEFAULT_MODE, *args, **kwargs):
        original_init(self, name, mode & ~os.RTLD_GLOBAL, *args, **kwargs)

    ctypes.CDLL.__init__ = init_without_global


def point_ctypes_at_this_libpython():
    """Make ctypes.pythonapi, and every ctypes.CDLL(None), this
    interpreter's libpython.

    ctypes.pythonapi is PyDLL(None), and dlopen(NULL) inside a link-map
    namespace gives the host program: its symbols, or "undefined symbol",
    and if the host itself embeds a Python, that Python's functions called
    with this interpreter's objects. This namespace's libpython is already
    loaded, so opening it by soname finds that copy; a symbol looked up in
    it is searched in it and then in what it links (this namespace's libc),
    which is what dlopen(NULL) gives a program: its own namespace. Both
    names of ctypes' dlopen are replaced (ctypes.CDLL calls the one its
    module imported); left as they were if the soname cannot be opened.
    """
    import _ctypes
    import ctypes
    import sysconfig

    soname = sysconfig.get_config_var("INSTSONAME")
    if not soname or ".so" not in soname:
        return
    try:
        ctypes.pythonapi = ctypes.PyDLL(soname)
    except OSError:
        return  # left as it was: model code that needs it will say so
    original_dlopen = _ctypes.dlopen

    def dlopen(name, *args, **kwargs):
        return original_dlopen(soname if name is None else name, *args, **kwargs)

    dlopen.__doc__ = original_dlopen.__doc__
    _ctypes.dlopen = ctypes._dlopen = dlopen


def leave_signals_to_host(host_sigint_is_default):
    """Undo what importing the signal module does to the process.

    The module's initialisation installs Python's SIGINT handler whenever the
    process has the default one, whatever PyConfig.install_signal_handlers
    says; in a host (a C service, a Go binary) that would swallow Ctrl-C.
    The C side also restores the host's exact sigaction afterwards.
    """
    import signal

    if host_sigint_is_default and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, signal.SIG_DFL)


def add_export_files_to_packages(export_files):
    """Every torch.package written here carries the host's export files.

    The seed's SetExportModuleExtraFilesHook covers torch.jit.save only;
    PackageExporter gets the same files, under extra/, as it closes.
    """
    from torch.package import package_exporter

    exporter = package_exporter.PackageExporter
    original_close = exporter.close

    def close(self):
        for name, data in export_files():
            self._write("extra/" + name, data)
        original_close(self)

    exporter.close = close


def load_operator_library(path):
    """torch.ops.load_library, so packaged models can call the operators."""
    import torch

    torch.ops.load_library(path)


_lease = None
_intra_op_threads = 1
_defaults = None  # _LeaseDefaults, taken as the first lease begins
_collect = gc.collect  # model code may replace the module's


def lease_begin(extra_sys_path, intra_op_threads, allow_process_exit):
    """Remember the clean state, apply a pool's settings, return its globals."""
    global _lease, _intra_op_threads, _allow_process_exit, _defaults
    if _defaults is None:  # the first lease: no model code has run yet
        _defaults = _LeaseDefaults()
    _lease = (list(sys.path), set(sys.modules))
    sys.path.extend(extra_sys_path)
    _intra_op_threads = intra_op_threads
    _allow_process_exit = bool(allow_process_exit)
    apply_intra_op_threads()
    return {"__name__": "__main__", "__builtins__": builtins}


def apply_lease_to_thread():
    """What each thread does at its first entry in a new lease (state.c):
    torch's per-thread settings back to their defaults, as lease_end put
    them back on the interpreter's own thread, then the lease's intra-op
    thread count."""
    if _defaults is not None:
        _defaults.restore_thread()
    apply_intra_op_threads()


def apply_intra_op_threads():
    """Set the lease's intra-op thread count on the calling thread."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != _intra_op_threads:
        torch.set_num_threads(_intra_op_threads)


def _installed(module, roots):
    """Whether `module` comes from the interpreter's own installation.

    lease_end keeps these: the standard library, site-packages (torch,
    torchvision, numpy...), built-in and extension modules are the same for
    every pool, and importing them again in one interpreter is not safe.
    torch 2.x imports much of itself lazily, and the lazy parts fill
    registries in modules that stay imported: a package with torchvision
    extern imports torch._dynamo, and when a later lease imported it again,
    its registration raised "Artifact of type=precompile already registered
    in mega-cache artifact factory"; triton's nanobind extension, imported a
    second time, aborted the process (docs/isolation.md, "torch 2.x").
    What a pool brings on its own sys.path entries is still dropped.
    """
    spec = getattr(module, "__spec__", None)
    if spec is None:
        return False
    if spec.origin in ("built-in", "frozen"):
        return True
    places = [spec.origin] if spec.origin else list(spec.submodule_search_locations or ())
    return bool(places) and all(str(p).startswith(roots) for p in places)


def lease_end(globals_dict):
    """Give the interpreter back as lease_begin found it."""
    global _lease, _allow_process_exit
    _allow_process_exit = False
    globals_dict.clear()
    _objects.clear()
    for importer in _packages.values():
        forget_package_sources(importer)
    _packages.clear()
    if _lease is not None:
        saved_path, saved_modules = _lease
        roots = tuple(os.path.join(d, "") for d in saved_path if d and os.path.isabs(d))
        for name in [m for m in sys.modules if m not in saved_modules]:
            if not _installed(sys.modules[name], roots):
                del sys.modules[name]
        sys.path[:] = saved_path
        _lease = None
    sys.path_importer_cache.clear()
    importlib.invalidate_caches()
    if _defaults is None:
        _collect()
        return
    # Twice: what the first pass replaces (a model's sys.stdout, its
    # warnings filters) may run its finalizers, here or in the collection,
    # and change a setting again; the second pass checks every value.
    _defaults.restore(check=False)
    _collect()
    problems = _defaults.restore(check=True)
    if problems:
        raise LeaseStateError("the lease's settings could not be put back, so the interpreter "
                              "is not leased again: " + "; ".join(problems))


# ---- leases start clean: interpreter-wide settings ------------------------


class LeaseStateError(RuntimeError):
    """lease_end could not put back a setting that model code changed: the
    host retires the interpreter rather than lease it to another pool
    (core/src/interpreter_set.cpp, give_back)."""

    __module__ = "manypy"


_UNREADABLE = object()  # a getter that raised: never the saved value


def _read(get):
    try:
        return get()
    except Exception:
        return _UNREADABLE


def _flushes_denormals():
    """Whether this thread's CPU flushes denormals to zero (torch's
    set_flush_denormal sets the FTZ and DAZ bits of the calling thread; it
    has no getter). Python's own float arithmetic runs under the same bits."""
    return _TINY * _ONE == 0.0


_TINY, _ONE = 1e-310, 1.0  # globals, so the product is computed at run time


class _LeaseDefaults:
    """The settings model code can change for a whole interpreter, or for a
    thread that serves it, with their values before the first lease, and
    the functions that read and set them, bound before any model ran (a
    model that replaces gc.enable or deletes torch.set_default_dtype does
    not stop them being put back). Each setting is (name, get, set), its
    value in _saved or _thread_saved; a list whose entries are the setting
    (warnings.filters, gc.callbacks) is (owner, name, list, entries).

    Left alone on purpose: random number generators (torch.manual_seed,
    random, numpy) are state, not settings, and a model that wants a seed
    sets it; patches to installed modules are the trust history's
    (docs/security.md); sys.meta_path and sys.path_hooks keep what modules
    that stay imported added there."""

    def __init__(self):
        import threading
        import warnings

        self._plain = {bool, int, float, str, tuple, type(None)}
        self._settings = []
        self._thread = []
        self._fixed = {}  # name: a default that is not the value found
        self._streams = []
        self._lists = []
        self._warnings_mutated = getattr(warnings, "_filters_mutated", None)
        self._sys_settings()
        self._gc_settings()
        self._warnings_settings(warnings)
        self._attribute(threading, "excepthook")
        torch = sys.modules.get("torch")
        if torch is not None:
            self._plain |= {torch.dtype, torch.device}
            self._torch_settings(torch)
            self._torch_thread_settings(torch)
        self._saved = [get() for _, get, _ in self._settings]
        self._thread_saved = [self._fixed[name] if name in self._fixed else get()
                              for name, get, _ in self._thread]
        self._lists = [(owner, name, lst, list(lst)) for owner, name, lst in self._lists]

    # -- what is covered ----------------------------------------------------

    def _value(self, name, get, put, per_thread=False):
        (self._thread if per_thread else self._settings).append((name, get, put))

    def _attribute(self, owner, attr):
        """A module attribute that is itself the setting (a hook, a stream),
        put back as the same object."""
        if hasattr(owner, attr):
            self._value(f"{owner.__name__}.{attr}", lambda: getattr(owner, attr),
                        lambda v: setattr(owner, attr, v))

    def _sys_settings(self):
        self._value("sys.setrecursionlimit", sys.getrecursionlimit, sys.setrecursionlimit)
        self._value("sys.setswitchinterval", sys.getswitchinterval, sys.setswitchinterval)
        if hasattr(sys, "get_int_max_str_digits"):
            self._value("sys.set_int_max_str_digits", sys.get_int_max_str_digits,
                        sys.set_int_max_str_digits)
        # RTLD_GLOBAL in a namespace crashes glibc (docs/isolation.md, hazard 2).
        self._value("sys.setdlopenflags", sys.getdlopenflags, sys.setdlopenflags)
        for name in ("stdin", "stdout", "stderr"):
            self._attribute(sys, name)
            self._streams.append((f"sys.{name}", getattr(sys, name, None)))
        for name in ("displayhook", "excepthook", "unraisablehook", "breakpointhook"):
            self._attribute(sys, name)

    def _gc_settings(self):
        enable, disable = gc.enable, gc.disable
        self._value("gc.enable", gc.isenabled, lambda on: enable() if on else disable())
        set_threshold = gc.set_threshold
        self._value("gc.set_threshold", gc.get_threshold, lambda t: set_threshold(*t))
        self._value("gc.set_debug", gc.get_debug, gc.set_debug)
        self._attribute(gc, "callbacks")
        self._lists.append((gc, "callbacks", gc.callbacks))

    def _warnings_settings(self, warnings):
        for name in ("defaultaction", "onceregistry", "_onceregistry", "showwarning",
                     "formatwarning", "_showwarnmsg", "_formatwarnmsg", "_showwarnmsg_impl",
                     "_formatwarnmsg_impl"):
            self._attribute(warnings, name)
        # The filters list is the C side's too (_warnings reads the module's
        # attribute): the same list object, with the same entries.
        self._attribute(warnings, "filters")
        self._lists.append((warnings, "filters", warnings.filters))

    def _torch_settings(self, torch):
        import warnings

        C = torch._C
        empty, tensor_type = torch.empty, torch.Tensor.type
        cpu_type = getattr(torch, empty(0).type().rpartition(".")[2])
        catch, ignore = warnings.catch_warnings, warnings.simplefilter

        def set_tensor_type(_):
            with catch():  # torch 2.x: "set_default_tensor_type() is deprecated"
                ignore("ignore")
                C._set_default_tensor_type(cpu_type)

        self._value("torch.set_default_tensor_type", lambda: tensor_type(empty(0)),
                    set_tensor_type)
        self._value("torch.set_default_dtype", torch.get_default_dtype, C._set_default_dtype)
        get_mode = C._get_deterministic_algorithms
        get_warn = C._get_deterministic_algorithms_warn_only
        set_mode = C._set_deterministic_algorithms
        self._value("torch.use_deterministic_algorithms", lambda: (get_mode(), get_warn()),
                    lambda v: set_mode(v[0], warn_only=v[1]))
        anomaly, check_nan, set_anomaly = (torch.is_anomaly_enabled,
                                           torch.is_anomaly_check_nan_enabled,
                                           torch.set_anomaly_enabled)
        self._value("torch.set_anomaly_enabled", lambda: (anomaly(), check_nan()),
                    lambda v: set_anomaly(*v))
        # Flags with a C getter and setter: torch.set_warn_always,
        # set_float32_matmul_precision, torch.backends' cudnn, cuda.matmul,
        # mkldnn, nnpack and quantized.engine, and the deterministic filling
        # of new memory (those this torch has).
        for flag in ("warnAlways", "float32_matmul_precision", "cudnn_enabled",
                     "cudnn_benchmark", "cudnn_deterministic", "cudnn_allow_tf32",
                     "cublas_allow_tf32", "cublas_allow_fp16_reduced_precision_reduction",
                     "cublas_allow_bf16_reduced_precision_reduction",
                     "cpu_allow_fp16_reduced_precision_reduction", "mkldnn_enabled",
                     "mkldnn_deterministic", "nnpack_enabled", "qengine",
                     "deterministic_fill_uninitialized_memory"):
            get, put = getattr(C, "_get_" + flag, None), getattr(C, "_set_" + flag, None)
            if get is not None and put is not None:
                self._value(f"torch._C._set_{flag}", get, put)
        options = torch._tensor_str.PRINT_OPTS
        for name in ("precision", "threshold", "edgeitems", "linewidth", "sci_mode"):
            self._attribute_value(f"torch.set_printoptions({name})", options, name)

    def _attribute_value(self, name, owner, attr):
        self._value(name, lambda: getattr(owner, attr), lambda v: setattr(owner, attr, v))

    def _torch_thread_settings(self, torch):
        """torch keeps these per thread: lease_end puts them back on the
        interpreter's own thread, and every other thread (a host thread in
        DIRECT mode) at its first entry in the next lease."""
        import threading

        C = torch._C
        self._value("torch.set_grad_enabled", C.is_grad_enabled, C._set_grad_enabled, True)
        inference = C._InferenceMode
        guards = threading.local()
        self._value("torch.inference_mode", torch.is_inference_mode_enabled,
                    lambda on: on or _hold(guards, inference(False)), True)
        if hasattr(torch, "get_autocast_dtype"):  # torch 2.x
            for device in ("cpu", "cuda"):
                self._value(f"torch.set_autocast_enabled({device})",
                            _bind(torch.is_autocast_enabled, device),
                            _bind(torch.set_autocast_enabled, device), True)
                self._value(f"torch.set_autocast_dtype({device})",
                            _bind(torch.get_autocast_dtype, device),
                            _bind(torch.set_autocast_dtype, device), True)
        else:  # torch 1.13
            self._value("torch.set_autocast_cpu_enabled", torch.is_autocast_cpu_enabled,
                        torch.set_autocast_cpu_enabled, True)
            self._value("torch.set_autocast_enabled", torch.is_autocast_enabled,
                        torch.set_autocast_enabled, True)
            self._value("torch.set_autocast_cpu_dtype", torch.get_autocast_cpu_dtype,
                        torch.set_autocast_cpu_dtype, True)
            self._value("torch.set_autocast_gpu_dtype", torch.get_autocast_gpu_dtype,
                        torch.set_autocast_gpu_dtype, True)
        self._value("torch.set_autocast_cache_enabled", torch.is_autocast_cache_enabled,
                    torch.set_autocast_cache_enabled, True)
        decrement, increment = torch.autocast_decrement_nesting, torch.autocast_increment_nesting
        clear_cache = torch.clear_autocast_cache
        self._value("autocast nesting", lambda: _autocast_nesting(decrement, increment),
                    lambda _: _end_autocast_nesting(decrement, increment, clear_cache), True)
        if hasattr(torch, "get_default_device"):  # torch 2.x: a mode on the thread's stack
            contexts, set_device = torch._GLOBAL_DEVICE_CONTEXT, torch.set_default_device

            def no_default_device(_):
                try:
                    set_device(None)
                except Exception:  # its mode was popped: the stack is emptied below
                    contexts.device_context = None
                    device = sys.modules.get("torch.utils._device")
                    if device is not None:
                        device.CURRENT_DEVICE = None

            self._value("torch.set_default_device",
                        lambda: getattr(contexts, "device_context", None) is None,
                        no_default_device, True)
        # Modes a model entered and never left (every torch call of the
        # thread runs them), popped as torch pops them (torch 1.13 also
        # clears a flag when the stack empties).
        for kind, module in (("function", "torch.overrides"),
                             ("dispatch", "torch.utils._python_dispatch")):
            length = getattr(C, f"_len_torch_{kind}_stack", None)
            pop = getattr(importlib.import_module(module), "_pop_mode", None)
            if length is not None and pop is not None:
                self._value(f"torch {kind} modes", length, _popper(length, pop), True)
        if hasattr(C, "_is_multithreading_enabled"):
            self._value("torch.autograd.set_multithreading_enabled",
                        C._is_multithreading_enabled, C._set_multithreading_enabled, True)
        # Off, torch's default and every new thread's (the x86-64 and AArch64
        # ABIs), whatever the interpreter's thread had when it started.
        set_flush = torch.set_flush_denormal
        self._value("torch.set_flush_denormal", _flushes_denormals, set_flush, True)
        self._fixed["torch.set_flush_denormal"] = False

    # -- putting them back --------------------------------------------------

    def _same(self, a, b):
        return a is b or (type(a) is type(b) and type(a) in self._plain and a == b)

    def _put_back(self, settings, saved, problems):
        for (name, get, put), value in zip(settings, saved):
            if not self._same(_read(get), value):
                try:
                    put(value)
                except Exception as exc:
                    problems.append(f"{name}: {type(exc).__name__}: {str(exc)[:200]}")

    def restore(self, check):
        """Puts every setting back; with `check`, then reads every one, and
        returns those that are not back ([] when the interpreter may serve
        another pool)."""
        problems = []
        # The thread's first: a torch mode left on the stack or a default
        # device would see (or change) what torch.empty makes below.
        self._put_back(self._thread, self._thread_saved, problems)
        for owner, name, lst, items in self._lists:
            if len(lst) != len(items) or any(a is not b for a, b in zip(lst, items)):
                try:
                    lst[:] = items
                except Exception as exc:
                    problems.append(f"{owner.__name__}.{name}: {type(exc).__name__}")
        self._put_back(self._settings, self._saved, problems)
        if self._warnings_mutated is not None:
            self._warnings_mutated()  # the C side's cache of filter decisions
        if not check:
            return problems
        # Read last, all of them: putting one back may have dropped a
        # model's object whose finalizer changed another.
        for settings, saved in ((self._thread, self._thread_saved),
                                (self._settings, self._saved)):
            for (name, get, _), value in zip(settings, saved):
                if not self._same(_read(get), value) and not any(
                        p.startswith(name + ":") for p in problems):
                    problems.append(f"{name} is not back to its default")
        for owner, name, lst, items in self._lists:
            if len(lst) != len(items) or any(a is not b for a, b in zip(lst, items)):
                problems.append(f"{owner.__name__}.{name} is not back to its default")
        for name, stream in self._streams:
            if stream is not None and stream.closed:
                problems.append(f"{name}, the interpreter's own stream, was closed")
        return problems

    def restore_thread(self):
        """The per-thread settings, on a thread that enters in a new lease.
        What fails here stays failed (the bound setters of torch's thread
        state do not fail); the interpreter's own thread checks them at
        lease_end."""
        self._put_back(self._thread, self._thread_saved, [])


def _bind(function, device):
    return lambda *args: function(device, *args)


def _hold(guards, guard):
    """Keeps a torch inference-mode guard alive on its thread: a model left
    inference mode on (an entered context kept in a global), and dropping
    the guard would put back the state it found."""
    held = getattr(guards, "held", None)
    if held is None:
        held = guards.held = []
    held.append(guard)


def _autocast_nesting(decrement, increment):
    """torch's autocast nesting on this thread (it has no getter)."""
    depth = decrement() + 1
    increment()
    return depth


def _end_autocast_nesting(decrement, increment, clear_cache):
    """Ends the autocast regions a model entered and never left (their
    cache is cleared only as the last one ends), without going below 0."""
    depth = decrement()
    while depth > 0:
        depth = decrement()
    if depth < 0:
        increment()
    clear_cache()


def _popper(length, pop):
    def pop_all(depth):
        for _ in range(length() - depth):
            pop()

    return pop_all


def describe_exception(exc):
    """(qualified type name, one-line message, formatted traceback)."""
    cls = type(exc)
    name = cls.__qualname__
    if cls.__module__ not in ("builtins", "__main__"):
        name = cls.__module__ + "." + name
    text = str(exc)
    message = name + ": " + text if text else name
    message = message.replace("\n", " ")
    tb = "".join(traceback.format_exception(cls, exc, exc.__traceback__))
    return name, message, tb


# ---- packages and replicated objects -------------------------------------


_read_counts = {}  # HostArchive.readinto's results, one int object per count


class HostArchive(io.RawIOBase):
    """A read-only file over the host's copy of an archive (a memoryview).

    torch's PyTorchFileReader reads through readinto(), so records are copied
    straight from the host's memory; the archive is never copied whole.
    """

    def __init__(self, view):
        super().__init__()
        self._view = view
        self._pos = 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self._pos

    def seek(self, offset, whence=io.SEEK_SET):
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: len(self._view)}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer):
        n = max(0, min(len(buffer), len(self._view) - self._pos))
        buffer[:n] = self._view[self._pos : self._pos + n]
        self._pos += n
        # torch 1.13's reader never releases what readinto returns (later
        # torch does): each count above 256 was a new int object leaked, a
        # few per package opened. Counts kept here cost nothing to leak.
        return _read_counts.setdefault(n, n)


class SharedStorageReader:
    """The package's zip reader, except that tensor storages come from the host.

    The host hands out one view of each storage record to every interpreter,
    so N replicas of a model hold its weights once. Everything else (pickles,
    source files) is read by torch's own reader.
    """

    def __init__(self, reader, fetch):
        self._reader = reader
        self._fetch = fetch

    def get_storage_from_record(self, name, numel, dtype):
        import torch
        import torch.utils.dlpack

        nbytes = numel * torch._utils._element_size(dtype)
        raw = torch.utils.dlpack.from_dlpack(self._fetch(name, nbytes))
        return raw.view(dtype)

    def __getattr__(self, name):
        return getattr(self._reader, name)


_packages = {}
_objects = {}


def verify_records(view):
    """Check the CRC of every record but tensor data; raises BadZipFile.

    torch's reader is built without CRC checks, so a corrupt pickle would
    otherwise surface as a baffling unpickling error. Tensor records are
    skipped: they can be large, and torch never checks them either.
    """
    import zipfile

    with zipfile.ZipFile(HostArchive(view)) as archive:
        for info in archive.infolist():
            if not info.filename.endswith(".storage"):
                with archive.open(info) as record:
                    while record.read(1 << 20):
                        pass


_Importer = None


def _importer_class():
    """torch.package's PackageImporter, but a module whose body raised is
    not kept.

    PackageImporter records a module in its own table (importer.modules,
    not sys.modules) and in torch's registry of package modules before it
    runs the module's body, and keeps it there if the body raises. A stop
    that lands while a new interpreter imports a package's module to make a
    replica (a deadline firing during the lazy replica) left half a module
    behind: every later replica in that interpreter failed with
    AttributeError, for good. Python's own import drops a module whose body
    raised; this does the same, so the next import runs the body again.
    It overrides a private method (the same in torch 1.13 and 2.x):
    capi_stops fails on a torch where it no longer takes effect.
    """
    global _Importer
    if _Importer is None:
        import linecache

        from torch.package import PackageImporter
        from torch.package import package_importer

        class Importer(PackageImporter):
            def _make_module(self, name, filename, is_package, parent):
                try:
                    return super()._make_module(name, filename, is_package, parent)
                except BaseException:
                    module = self.modules.pop(name, None)
                    if module is not None:
                        registry = getattr(package_importer, "_package_imported_modules", {})
                        registry.pop(module.__name__, None)
                        linecache.cache.pop(getattr(module, "__file__", None), None)
                        leaf = name.rpartition(".")[2]
                        owner = self.modules.get(parent) if parent else None
                        if owner is not None and getattr(owner, leaf, None) is module:
                            delattr(owner, leaf)
                    raise

        _Importer = Importer
    return _Importer


def package_open(package_id, view, fetch):
    """Opens the package; any failure here is the archive's."""
    import torch

    try:
        verify_records(view)
        reader = torch._C.PyTorchFileReader(HostArchive(view))
        importer = _importer_class()(reader)
    except Exception as exc:
        raise _archive_error(exc) from exc
    importer.zip_reader = SharedStorageReader(reader, fetch)
    _packages[package_id] = importer


def forget_package_sources(importer):
    """Drop linecache's entries for a package's modules as the package closes.

    PackageImporter registers each module's source with linecache.lazycache
    under the module's mangled file name ("<torch_package_N>.name.py"), and
    the entry holds the importer's get_source: without this, every package
    ever opened stayed alive in each interpreter that opened it (its
    importer, modules, classes, functions and a reader over the host's
    archive, which the host unmaps when the package is freed), about 20 KB
    each for python_heavy.pt (docs/memory.md).
    """
    import linecache

    for module in list(importer.modules.values()):
        if getattr(module, "__loader__", None) is importer:
            linecache.cache.pop(getattr(module, "__file__", None), None)


def _is_archive_fault(exc):
    """Whether an exception from unpickling says the archive is bad: records
    that do not decode, compile or unpickle, or that torch's reader cannot
    read. A missing module is not (ModuleNotFoundError stays itself), nor is
    an exception the model's own code raises."""
    import pickle
    import zipfile

    if isinstance(exc, (UnicodeDecodeError, SyntaxError, EOFError, pickle.UnpicklingError,
                        zipfile.BadZipFile, ArchiveError)):
        return True
    return isinstance(exc, RuntimeError) and str(exc).startswith("PytorchStreamReader")


def package_close(package_id):
    importer = _packages.pop(package_id, None)
    if importer is not None:
        forget_package_sources(importer)


def object_load(object_id, package_id, module, name):
    try:
        obj = _packages[package_id].load_pickle(module, name)
    except Exception as exc:
        if _is_archive_fault(exc) and not isinstance(exc, ArchiveError):
            raise _archive_error(exc) from exc
        raise
    _objects[object_id] = obj


def object_drop(object_id):
    _objects.pop(object_id, None)
