"""Models that attack the host, or that do what ordinary models do at the
worst moment, for manypy's hardening tests (docs/hardening.md, "Hostile
models"; tests/capi/capi_hostile_*.c).

Each method is one way model code has reached, or could reach, the process
that hosts it: results that lie about their type or change while they are
converted, tensors the model keeps and reallocates after returning them,
clean-up that a stop must let run, slow code outside the call itself,
forked children, signal handlers, and patches of installed modules.
forward(x) returns x * 2, so a test can check that an interpreter still
serves correctly after each.
"""

import importlib
import logging
import multiprocessing
import os
import signal
import threading
import time
import typing  # noqa: F401 (subclassing Dataset, a Generic, needs it on 3.12)

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

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
