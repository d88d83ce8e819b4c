"""Models that attack the host, or that do what ordinary models do at the
worst moment, for manypy's hardening tests (docs/hardening.md, "Hostile
models"; tests/capi/capi_hostile_*.c).

Each method is one way model code has reached, or could reach, the process
that hosts it: results that lie about their type or change while they are
converted, tensors the model keeps and reallocates after returning them,
clean-up that a stop must let run, slow code outside the call itself,
forked children, signal handlers, patches of installed modules, and
settings that would pass from one pool to the next (change_lease_state).
forward(x) returns x * 2, so a test can check that an interpreter still
serves correctly after each.
"""

import gc
import importlib
import logging
import multiprocessing
import os
import signal
import threading
import time
import warnings
import typing  # noqa: F401 (subclassing Dataset, a Generic, needs it on 3.12)

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

# torch.package extern-matches neither sys nor io by default: the real ones.
io = importlib.import_module("io")
sys = importlib.import_module("sys")

# Per interpreter: torch.package runs this module's source once in each.
_LOCK = threading.Lock()
_KEPT = []  # tensors the model still holds after returning them


def _wait(seconds):
    """Sleep in short steps, so that a stop lands between them (a single
    time.sleep cannot be interrupted)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.005)


class FakeTensor:
    """Claims to be a torch.Tensor through __class__ (isinstance believes it)."""

    @property
    def __class__(self):
        return torch.Tensor


class PlainSubclass(torch.Tensor):
    """A tensor subclass that does nothing unusual."""


class ClearsList(torch.Tensor):
    """A tensor subclass whose every torch function empties `victim`: the
    result list it sits in, while the host converts that list."""

    victim = None

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if cls.victim is not None:
            cls.victim.clear()
        return super().__torch_function__(func, types, args, kwargs or {})


class SlowStr(Exception):
    """An exception whose message takes `seconds` to build."""

    seconds = 2.0

    def __str__(self):
        _wait(self.seconds)
        return "slow message"


class SlowDel:
    """Takes two seconds to be freed."""

    def __del__(self):
        _wait(2.0)


class SlowToUnpickle:
    """Takes `seconds` to unpickle: a slow lazy replica in a new interpreter."""

    def __init__(self, seconds):
        self.seconds = seconds

    def __setstate__(self, state):
        self.__dict__.update(state)
        _wait(self.seconds)

    def __call__(self, x):
        return x * 2


class SpinningHandler(logging.Handler):
    """A log handler that never returns from its first record, holding the
    handler's lock (logging.Handler.handle takes it around emit)."""

    spun = False

    def emit(self, record):
        if not SpinningHandler.spun:
            SpinningHandler.spun = True
            while True:
                pass


class Squares(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return torch.tensor(i * i)


# ---- settings a lease must not pass on (Hostile.change_lease_state) --------

_KEPT_CONTEXTS = []  # contexts entered and never left


class _PassThrough(torch.overrides.TorchFunctionMode):
    """A torch function mode that changes nothing: left on a thread's mode
    stack, it runs model code in every torch call of that thread."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def _hook(*args, **kwargs):
    return None


def _raises(*args, **kwargs):
    raise RuntimeError("replaced by a hostile model")


def _replace(owner, name, value):
    """Replaces owner.name, keeping the original where a later pool (a
    test's) can put it back: Hostile.undo_replacements."""
    import builtins

    builtins.__dict__.setdefault("_hostile_replaced", []).append(
        (owner, name, owner.__dict__[name]))
    if value is None:
        delattr(owner, name)
    else:
        setattr(owner, name, value)


def _autocast_on():
    if hasattr(torch, "get_autocast_dtype"):  # torch 2.x
        torch.set_autocast_enabled("cpu", True)
        torch.set_autocast_dtype("cpu", torch.float16)
    else:  # torch 1.13: bfloat16 is the only CPU dtype it takes
        torch.set_autocast_cpu_enabled(True)
    torch.autocast_increment_nesting()
    torch.set_autocast_cache_enabled(False)


def _inference_mode_on():
    context = torch.inference_mode()
    context.__enter__()
    _KEPT_CONTEXTS.append(context)


def _function_mode_on():
    mode = _PassThrough()
    mode.__enter__()
    _KEPT_CONTEXTS.append(mode)


def _torch_flags():
    torch.set_warn_always(True)
    torch.set_float32_matmul_precision("medium")
    torch.backends.mkldnn.enabled = False
    torch.backends.cudnn.benchmark = True
    torch.set_printoptions(precision=2)


def _streams():
    sys.stdin, sys.stdout, sys.stderr = io.StringIO(), io.StringIO(), io.StringIO()


def _hooks():
    sys.displayhook = sys.excepthook = sys.unraisablehook = _hook
    threading.excepthook = _hook


def _default_dtype_deleted():
    torch.set_default_dtype(torch.float64)
    _replace(torch, "set_default_dtype", None)


def _gc_enable_raises():
    gc.disable()
    _replace(gc, "enable", _raises)


# Each one way model code changes what a whole interpreter, or the thread
# that runs it, does for every later caller (docs/isolation.md, "What a
# lease puts back").
LEASE_STATE_SETTERS = {
    "gc_disable": gc.disable,
    "gc_threshold": lambda: gc.set_threshold(100000, 50, 50),
    "gc_debug": lambda: gc.set_debug(gc.DEBUG_SAVEALL),
    "gc_callback": lambda: gc.callbacks.append(_hook),
    "warnings_error": lambda: warnings.simplefilter("error"),
    "warnings_default_action": lambda: setattr(warnings, "defaultaction", "error"),
    "warnings_showwarning": lambda: setattr(warnings, "showwarning", _hook),
    "warnings_filters_not_a_list": lambda: setattr(warnings, "filters", 5),
    "default_dtype": lambda: torch.set_default_dtype(torch.float64),
    "default_tensor_type": lambda: torch.set_default_tensor_type(torch.DoubleTensor),
    "deterministic": lambda: torch.use_deterministic_algorithms(True, warn_only=True),
    "flush_denormal": lambda: torch.set_flush_denormal(True),
    "grad_mode": lambda: torch.set_grad_enabled(False),
    "inference_mode": _inference_mode_on,
    "autocast": _autocast_on,
    "default_device": lambda: torch.set_default_device("meta"),  # torch 2.x
    "function_mode": _function_mode_on,
    "anomaly": lambda: torch.set_anomaly_enabled(True),
    "torch_flags": _torch_flags,
    "recursion_limit": lambda: sys.setrecursionlimit(5000),
    "switch_interval": lambda: sys.setswitchinterval(0.02),
    "streams": _streams,
    "hooks": _hooks,
    "int_max_str_digits": lambda: sys.set_int_max_str_digits(640),
    "dlopen_global": lambda: sys.setdlopenflags(sys.getdlopenflags() | os.RTLD_GLOBAL),
    "default_dtype_deleted": _default_dtype_deleted,
    "gc_enable_raises": _gc_enable_raises,
    "stdout_closed": lambda: sys.stdout.close(),
}


# --- stop evasion (issue 36) ------------------------------------------------
# Ways model code has tried to outlast a deadline or a cancel (docs/hardening.md,
# "Stops model code cannot defeat"). Each runs until manypy stops it;
# Hostile.evade_stop(name) runs one. A stop must end every one of them
# within the deadline plus the grace period (tests/capi/capi_stop_evasion.c).


def _settrace_none_in_a_loop():
    """Swallows the stop and removes the trace function that raised it."""
    while True:
        try:
            while True:
                sys.settrace(None)
        except BaseException:
            pass


def _bare_except_around_a_loop():
    """Swallows every stop."""
    while True:
        try:
            while True:
                pass
        except BaseException:
            pass


def _noop():
    pass


def _spin_once(*args):
    """A trace, profile or monitoring callback that never returns: CPython
    sends no trace events while a callback runs."""
    while True:
        pass


def _spin_in_profile_function():
    def profile(frame, event, arg):
        sys.setprofile(None)
        _spin_once()

    sys.setprofile(profile)
    _noop()


_MONITORING_TOOL = 4  # of the six sys.monitoring lets tools use


def _spin_in_monitoring_callback():
    """Python 3.12: spins in a sys.monitoring callback. Python 3.11 has no
    sys.monitoring: spins in its own trace function, set before the stop."""
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is None:
        def trace(frame, event, arg):
            sys.settrace(None)
            _spin_once()

        sys.settrace(trace)
        _noop()
        return
    monitoring.use_tool_id(_MONITORING_TOOL, "manypy hostile")

    def on_start(code, offset):
        monitoring.set_events(_MONITORING_TOOL, 0)
        try:
            _spin_once()
        finally:
            monitoring.register_callback(_MONITORING_TOOL, monitoring.events.PY_START, None)
            monitoring.free_tool_id(_MONITORING_TOOL)

    monitoring.register_callback(_MONITORING_TOOL, monitoring.events.PY_START, on_start)
    monitoring.set_events(_MONITORING_TOOL, monitoring.events.PY_START)
    _noop()


def _long_switch_interval():
    """Holds the GIL for as long as Python lets it: a stop must take the GIL
    to begin."""
    sys.setswitchinterval(1000)
    while True:
        pass


class _SlowToFinalize:
    def __del__(self):
        _wait(0.01)


def _stopped_in_finalizers():
    """Spends its time in __del__, where a stop raised cannot propagate: it
    is "ignored", and printed to stderr unless manypy keeps it quiet."""
    while True:
        _SlowToFinalize()


def _hold_the_gil():
    """The one form no stop can end: C code that holds the GIL (a foreign
    call through ctypes.PyDLL keeps it) for 3 s. Its interpreter is lost
    (docs/serving.md, "Lost interpreters") until the call returns."""
    import ctypes

    ctypes.PyDLL("libc.so.6").sleep(3)


STOP_EVASIONS = {
    "finalizers": _stopped_in_finalizers,
    "hold_gil": _hold_the_gil,
    "settrace_none": _settrace_none_in_a_loop,
    "bare_except": _bare_except_around_a_loop,
    "profile": _spin_in_profile_function,
    "monitoring": _spin_in_monitoring_callback,
    "switch_interval": _long_switch_interval,
}


class Hostile(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.arange(6.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2

    # ---- writes to what the host lends ------------------------------------

    def scale_in_place(self, x):
        """Doubles the caller's tensor in place."""
        x.mul_(2)

    # ---- results that lie, or change while converted -----------------------

    def fake_tensor(self):
        return FakeTensor()

    def fake_tensors_in_a_list(self):
        return [torch.ones(2), FakeTensor(), torch.ones(2)]

    def tensor_subclass(self):
        return torch.ones(3).as_subclass(PlainSubclass)

    def list_cleared_during_conversion(self, n):
        """A list of n tensor subclasses that empty it when any torch function
        touches them: torch 1.13 cannot export bool tensors through DLPack and
        no torch exports conjugated ones, so a converter that asks them
        anything runs ClearsList.__torch_function__."""
        out = []
        for k in range(n):
            if k % 2 == 0:
                t = torch.ones(4, dtype=torch.bool)
            else:
                t = torch.ones(4, dtype=torch.complex64).conj()
            out.append(t.as_subclass(ClearsList))
        ClearsList.victim = out
        return out

    def keep(self, n):
        """Returns a new tensor of n floats 0..n-1 that the model also keeps."""
        t = torch.arange(float(n))
        _KEPT.append(t)
        return t

    def keep_and_return_a_view(self, n):
        """Keeps a tensor and returns a view of its elements 1..n-1."""
        t = torch.arange(float(n))
        _KEPT.append(t)
        return t[1:]

    def change_kept(self, how):
        """Changes what keep() returned earlier: 'resize' grows it (torch
        reallocates its storage), 'set' points it at other storage, 'out'
        writes a larger result into it, 'fill' overwrites it in place."""
        for t in _KEPT:
            n = t.numel()
            if how == "resize":
                t.resize_(n * 64)
            elif how == "set":
                t.set_(torch.zeros(3))
            elif how == "out":
                torch.mul(torch.ones(n * 64), 3.0, out=t)
            elif how == "fill":
                t.fill_(-1.0)
        _KEPT.clear()

    def fresh_view(self, n):
        """A view of a tensor nothing else holds: may cross without a copy."""
        return torch.arange(float(n))[1:]

    def parameter(self):
        return self.weight

    def slow_to_free(self):
        """An unsupported result whose clean-up takes two seconds."""
        return [1, SlowDel()]

    def raise_slow_message(self, seconds):
        SlowStr.seconds = seconds
        raise SlowStr()

    # ---- clean-up that a stop must let run ----------------------------------

    def spin_holding_lock(self):
        with _LOCK:
            while True:
                pass

    def spin_holding_lock_catching(self):
        """Swallows every stop, so only escalation ends it."""
        with _LOCK:
            while True:
                try:
                    while True:
                        pass
                except BaseException:
                    pass

    def take_lock(self):
        with _LOCK:
            return 1

    def spin_in_autocast(self):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            while True:
                pass

    def matmul_dtype(self):
        x = torch.ones(2, 2)
        return str((x @ x).dtype)

    def spin_in_log_handler(self):
        logger = logging.getLogger("manypy_hostile")
        logger.propagate = False
        logger.addHandler(SpinningHandler())
        logger.warning("first record")

    def log(self):
        logging.getLogger("manypy_hostile").warning("another record")
        return 1

    def import_module(self, name):
        """Imports an installed module lazily (a stop may land inside it).
        importlib, not __import__, which torch.package limits to the
        package's own and extern modules."""
        module = importlib.import_module(name)
        return getattr(module, "DONE", None)

    # ---- settings a lease must not pass on ---------------------------------

    def change_lease_state(self, name):
        """Runs LEASE_STATE_SETTERS[name]."""
        LEASE_STATE_SETTERS[name]()

    def undo_replacements(self):
        """Puts back what _replace replaced (for a test's later pools)."""
        import builtins

        for owner, name, value in reversed(builtins.__dict__.pop("_hostile_replaced", [])):
            setattr(owner, name, value)

    # ---- processes and signals ---------------------------------------------

    def data_loader(self, workers):
        loader = DataLoader(Squares(), batch_size=2, num_workers=workers)
        return sum(int(batch.sum()) for batch in loader)

    def process_pool(self, processes):
        with multiprocessing.get_context("fork").Pool(processes) as pool:
            return sum(pool.map(abs, range(-8, 0)))

    def fork_and_return(self):
        """The child returns from the call, as the parent does."""
        pid = os.fork()
        if pid == 0:
            return "child"
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status)

    def fork_and_exit(self, code):
        pid = os.fork()
        if pid == 0:
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status)

    def process_exit_code(self):
        """A multiprocessing.Process child whose target does nothing: its
        exit code, which is 0 in a Python program."""
        child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(0,))
        child.start()
        child.join()
        return child.exitcode

    def set_signal(self, signum):
        signal.signal(signum, signal.SIG_IGN)

    # ---- patches of installed modules ---------------------------------------

    def patch_installed(self, marker):
        """Patches a torch class and a stdlib function so that every later
        use, by any model in this interpreter, appends to `marker`."""
        call, join = nn.Module.__call__, os.path.join

        def patched_call(module, *args, **kwargs):
            with open(marker, "a") as f:
                f.write("torch.nn.Module.__call__\n")
            return call(module, *args, **kwargs)

        def patched_join(*parts):
            with open(marker, "a") as f:
                f.write("os.path.join\n")
            return join(*parts)

        nn.Module.__call__ = patched_call
        os.path.join = patched_join

    # --- process-wide state (issue 36) ---------------------------------------
    # What belongs to the whole host process, not to one interpreter: a
    # faulthandler timer, the working directory, threads' signal masks, the
    # program dlopen(NULL) opens (docs/security.md, "The process stays the
    # host's"; tests/capi/capi_process_state.c).

    def dump_traceback_later(self, seconds, exit):
        """A timer thread that dumps every thread's stack to stderr after
        `seconds`, then (exit=True) ends the process."""
        importlib.import_module("faulthandler").dump_traceback_later(seconds, exit=exit)

    def cancel_dump_traceback_later(self):
        importlib.import_module("faulthandler").cancel_dump_traceback_later()

    def chdir(self, path):
        os.chdir(path)

    def fchdir(self, path):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fchdir(fd)
        finally:
            os.close(fd)

    def signal_mask(self):
        """The calling thread's blocked signals, sorted (reading only)."""
        return sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, []))

    def block_signal(self, signum):
        signal.pthread_sigmask(signal.SIG_BLOCK, [signum])

    def unblock_signal(self, signum):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])

    def dlopen_program(self):
        """ctypes.CDLL(None), what a C program's dlopen(NULL) is: in a link-
        map namespace, glibc gives the host program instead. "" when it is
        this interpreter's own libpython (and libc through it), else what
        differs."""
        ctypes = importlib.import_module("ctypes")
        lib = ctypes.CDLL(None)
        problems = []
        if lib._handle != ctypes.pythonapi._handle:
            problems.append("CDLL(None) is not ctypes.pythonapi's library")
        try:
            mine = ctypes.cast(lib.Py_IsInitialized, ctypes.c_void_p).value
            theirs = ctypes.cast(ctypes.pythonapi.Py_IsInitialized, ctypes.c_void_p).value
            if mine != theirs:
                problems.append("its Py_IsInitialized is another libpython's")
        except AttributeError as e:
            problems.append(f"it has no Py_IsInitialized ({e})")
        try:
            if lib.getpid() != os.getpid():
                problems.append("its getpid() is not this process's")
        except AttributeError as e:
            problems.append(f"it has no getpid ({e})")
        return "; ".join(problems)

    def recurse_through_c(self, limit, depth):
        """Raises the recursion limit to `limit`, then recurses `depth` deep
        with a C function (map, list) between every two Python frames: each
        level takes the thread's C stack, which the limit alone does not
        bound (docs/threads.md, "Deep recursion")."""
        sys.setrecursionlimit(limit)

        def through_c(n):
            return list(map(through_c, [n - 1])) if n > 0 else []

        through_c(depth)

    # --- stop evasion (issue 36) --------------------------------------------

    def evade_stop(self, name):
        """Runs STOP_EVASIONS[name], which never returns by itself."""
        STOP_EVASIONS[name]()

    def set_switch_interval(self, seconds):
        """Sets sys.setswitchinterval(seconds); returns what it became."""
        sys.setswitchinterval(seconds)
        return sys.getswitchinterval()
