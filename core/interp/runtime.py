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
    """Make ctypes.pythonapi this interpreter's libpython.

    ctypes.pythonapi is PyDLL(None), and dlopen(NULL) inside a link-map
    namespace gives the host program: its symbols, or "undefined symbol",
    and if the host itself embeds a Python, that Python's functions called
    with this interpreter's objects. This namespace's libpython is already
    loaded, so opening it by soname finds that copy.
    """
    import ctypes
    import sysconfig

    soname = sysconfig.get_config_var("INSTSONAME")
    if soname and ".so" in soname:
        try:
            ctypes.pythonapi = ctypes.PyDLL(soname)
        except OSError:
            pass  # left as it was: model code that needs it will say so


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


def lease_begin(extra_sys_path, intra_op_threads, allow_process_exit):
    """Remember the clean state, apply a pool's settings, return its globals."""
    global _lease, _intra_op_threads, _allow_process_exit
    _lease = (list(sys.path), set(sys.modules))
    sys.path.extend(extra_sys_path)
    _intra_op_threads = intra_op_threads
    _allow_process_exit = bool(allow_process_exit)
    apply_intra_op_threads()
    return {"__name__": "__main__", "__builtins__": builtins}


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
    gc.collect()


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
