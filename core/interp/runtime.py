# The Python half of libmanypy_interp.so: run once in every interpreter at
# start, as the module `_manypy_runtime`. Compiled into the library as a
# string (see CMakeLists.txt), so an installed library needs no extra files.
import builtins
import gc
import importlib
import os
import sys
import traceback


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


_lease = None
_intra_op_threads = 1


def lease_begin(extra_sys_path, intra_op_threads):
    """Remember the clean state, apply a pool's settings, return its globals."""
    global _lease, _intra_op_threads
    _lease = (list(sys.path), set(sys.modules))
    sys.path.extend(extra_sys_path)
    _intra_op_threads = intra_op_threads
    apply_intra_op_threads()
    return {"__name__": "__main__", "__builtins__": builtins}


def apply_intra_op_threads():
    """Set the lease's intra-op thread count on the calling thread."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != _intra_op_threads:
        torch.set_num_threads(_intra_op_threads)


def lease_end(globals_dict):
    """Give the interpreter back as lease_begin found it."""
    global _lease
    globals_dict.clear()
    if _lease is not None:
        saved_path, saved_modules = _lease
        for name in [m for m in sys.modules if m not in saved_modules]:
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
