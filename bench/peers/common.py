"""What worker.py and plain_loop.py share: loading the model the way a
worker process of TorchServe or Triton's Python backend does (torch.package,
one intra-op thread), its keyword arguments, and the output check."""

import json
import os
import sys

import torch
from torch.package import PackageImporter

TOLERANCE = 1e-4  # as OUTPUT_TOLERANCE in bench/outputs.h


def load_model(archive):
    """The model of a torch.package archive, on one intra-op thread (as each
    manypy interpreter runs by default)."""
    torch.set_num_threads(1)
    model = PackageImporter(archive).load_pickle("model", "model.pkl")
    model.eval()
    return model


def case_of(archive):
    """NAME.json next to NAME.pt: input shape, kwargs, expected outputs."""
    base = archive[:-3] if archive.endswith(".pt") else archive
    with open(base + ".json") as f:
        return json.load(f)


def read_tensor(directory, spec):
    with open(os.path.join(directory, spec["file"]), "rb") as f:
        data = bytearray(f.read())
    return torch.frombuffer(data, dtype=torch.float32).reshape(spec["shape"])


def check_output(out, case, directory):
    """Raises ValueError naming what differs from the expected outputs."""
    if isinstance(out, torch.Tensor):
        out = {"out": out}
    for key, spec in case["outputs"].items():
        got = out.get(key)
        if not isinstance(got, torch.Tensor):
            raise ValueError(f"output '{key}' is missing or not a tensor")
        want = read_tensor(directory, spec)
        if got.shape != want.shape or got.dtype != torch.float32:
            raise ValueError(f"output '{key}' is {got.dtype} {list(got.shape)}, "
                             f"expected float32 {list(want.shape)}")
        diff = (got - want).abs().max().item() if got.numel() else 0.0
        if not diff <= TOLERANCE:
            raise ValueError(f"output '{key}' differs by {diff} (tolerance {TOLERANCE})")
    for key, value in case.get("scalars", {}).items():
        if out.get(key) != value:
            raise ValueError(f"output '{key}' is {out.get(key)!r}, expected {value!r}")


def load_checked(archive, script):
    """The model of ARCHIVE, its input and its kwargs, after checking one
    output against the expected files (grad off); exits naming SCRIPT and
    the difference when it is wrong. The plain sides' shared start."""
    model = load_model(archive)
    case = case_of(archive)
    directory = os.path.dirname(archive)
    x = read_tensor(directory, case["input"])
    kwargs = case["kwargs"]
    with torch.no_grad():
        try:
            check_output(model(x, **kwargs), case, directory)
        except ValueError as e:
            sys.exit(f"{script}: {archive}: wrong output: {e}")
    return model, x, kwargs
