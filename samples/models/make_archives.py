#!/usr/bin/python3
"""Build the sample model archives used by manypy's tests, demo and benchmarks.

Usage:  /usr/bin/python3 samples/models/make_archives.py OUT_DIR [--big-mb N]

Run it with Debian's Python (/usr/bin/python3), which has torch and
torchvision.  Everything is built from seeded random weights (no network).
Every archive is loaded back and checked here; the script exits non-zero on
any verification failure.  See README.md next to this file for what each
archive is for.
"""

import argparse
import json
import os
import pickle
import shutil
import struct
import sys
import tempfile
import time
import zipfile

import torch
from torch.package import PackageExporter, PackageImporter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # for python_heavy, identity, big_weights
sys.dont_write_bytecode = True  # no __pycache__ in the source tree

from batching import Batching  # noqa: E402
from big_weights import BigWeights  # noqa: E402
from encoder import Encoder, Invert  # noqa: E402
from hostile import Hostile, SlowToUnpickle  # noqa: E402
from slow_body import Twice  # noqa: E402
from identity import Identity  # noqa: E402
from python_heavy import PythonHeavy  # noqa: E402
from stuck import Loop, Stuck  # noqa: E402
from versioned import Versioned  # noqa: E402

# Keyword arguments used for python_heavy's expected outputs.  They are not
# the defaults (steps=8, normalize=True) on purpose: a host that drops the
# kwargs gets different outputs and fails the test.
PYTHON_HEAVY_KWARGS = {"steps": 5, "normalize": False}

OUT = ""  # set in main()
MANIFEST = []  # [{"file", "bytes", "purpose"}], written to manifest.json


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def check(ok, msg):
    if not ok:
        fail(msg)


def path(name):
    return os.path.join(OUT, name)


def record(name, purpose):
    """Note a written file in the manifest and print one line for it."""
    size = os.path.getsize(path(name))
    MANIFEST.append({"file": name, "bytes": size, "purpose": purpose})
    print(f"{name:34s} {size:>11d} bytes  {purpose}")


def write_bytes(name, data, purpose):
    with open(path(name), "wb") as f:
        f.write(data)
    record(name, purpose)


def tensor_bytes(t):
    """Raw little-endian, C-contiguous bytes of a float32 tensor."""
    check(t.dtype == torch.float32, f"expected float32, got {t.dtype}")
    return t.detach().contiguous().numpy().astype("<f4").tobytes()


def export_package(name, obj, intern=(), extern=()):
    """torch.package `obj` as NAME.pt, pickled at model/model.pkl.

    torch itself and the standard library are implicitly extern: the loader
    provides them.  Anything else the pickle needs must be interned (its
    source goes into the archive) or externed (the loader must have it).
    """
    with PackageExporter(path(name)) as e:
        for pattern in intern:
            e.intern(pattern)
        for pattern in extern:
            e.extern(pattern)
        e.save_pickle("model", "model.pkl", obj)


def load_package(name):
    return PackageImporter(path(name)).load_pickle("model", "model.pkl")


def outputs_as_dict(out):
    """Split a model output into ({key: tensor}, {key: int scalar})."""
    if isinstance(out, torch.Tensor):
        return {"out": out}, {}
    tensors = {k: v for k, v in out.items() if isinstance(v, torch.Tensor)}
    scalars = {k: v for k, v in out.items() if not isinstance(v, torch.Tensor)}
    return tensors, scalars


def same_outputs(a, b, exact, what):
    ta, sa = outputs_as_dict(a)
    tb, sb = outputs_as_dict(b)
    check(ta.keys() == tb.keys() and sa == sb, f"{what}: output keys/scalars differ")
    for k in ta:
        if exact:
            ok = torch.equal(ta[k], tb[k])
        else:
            ok = ta[k].shape == tb[k].shape and torch.allclose(ta[k], tb[k], atol=1e-5)
        check(ok, f"{what}: output {k!r} differs")


def make_input(shape):
    g = torch.Generator().manual_seed(1)
    return torch.randn(shape, generator=g, dtype=torch.float32)


def write_case(name, model, x, kwargs):
    """Package `model` as NAME.pt, verify, and write NAME.input.bin,
    NAME.expected.<key>.bin and NAME.json.  Returns the expected output."""
    with torch.no_grad():
        before = model(x, **kwargs)
    loaded = load_package(f"{name}.pt")
    check(not loaded.training, f"{name}: loaded model is not in eval mode")
    # Expected outputs come from plain eager Python on the loaded-back package.
    with torch.no_grad():
        expected = loaded(x, **kwargs)
    same_outputs(before, expected, exact=True, what=f"{name}.pt load-back")

    write_bytes(f"{name}.input.bin", tensor_bytes(x), f"{name}: input tensor (float32 LE)")
    tensors, scalars = outputs_as_dict(expected)
    for k, t in tensors.items():
        write_bytes(f"{name}.expected.{k}.bin", tensor_bytes(t),
                    f"{name}: expected output {k!r} (float32 LE)")
    desc = {
        "input": {"shape": list(x.shape), "dtype": "float32",
                  "file": f"{name}.input.bin"},
        "kwargs": kwargs,
        "outputs": {k: {"shape": list(t.shape), "dtype": "float32",
                        "file": f"{name}.expected.{k}.bin"}
                    for k, t in tensors.items()},
        "scalars": scalars,
    }
    with open(path(f"{name}.json"), "w") as f:
        json.dump(desc, f, indent=2)
        f.write("\n")
    record(f"{name}.json", f"{name}: shapes, dtypes, kwargs and scalar outputs")
    return expected


def write_encoder_case(encoder):
    """encoder.src.bin (float32 [3, 7, 32]), encoder.mask.bin (bool [3, 7] as
    one byte per element, True = padding) and encoder.expected.out.bin, the
    loaded-back package's output under no_grad."""
    src = make_input([3, 7, 32])
    lengths = torch.tensor([7, 4, 1])
    mask = torch.arange(7)[None, :] >= lengths[:, None]
    loaded = load_package("encoder.pt")
    with torch.no_grad():
        before = encoder(src, mask)
        expected = loaded(src, mask)
    same_outputs(before, expected, exact=True, what="encoder.pt load-back")
    with torch.no_grad():
        unmasked = loaded(src, torch.zeros_like(mask))
    check(not torch.allclose(unmasked, expected), "encoder: the padding mask changes nothing")
    check(torch.equal(loaded.invert(mask), ~mask), "encoder: invert(mask) is not ~mask")
    write_bytes("encoder.src.bin", tensor_bytes(src), "encoder: src (float32 LE [3, 7, 32])")
    write_bytes("encoder.mask.bin", mask.numpy().astype("u1").tobytes(),
                "encoder: src_key_padding_mask (bool [3, 7], one byte each, 1 = padding)")
    write_bytes("encoder.expected.out.bin", tensor_bytes(expected),
                "encoder: expected output (float32 LE [3, 7, 32])")


def write_script(name, scripted, x, kwargs, expected, purpose):
    """torch.jit.save `scripted` as NAME, reload it and compare to eager."""
    torch.jit.save(scripted, path(name))
    reloaded = torch.jit.load(path(name))
    with torch.no_grad():
        same_outputs(scripted(x, **kwargs), expected, exact=False, what=name)
        same_outputs(reloaded(x, **kwargs), expected, exact=False, what=f"{name} reloaded")
    record(name, purpose)


# --- malformed archives -------------------------------------------------

def local_data_offset(zip_path, info):
    """Offset of a record's data: its local header offset plus the local
    header's own length.  The local header's extra field can differ from
    the central directory's (torch pads it to align data to 64 bytes), so
    read the lengths from the local header itself."""
    with open(zip_path, "rb") as f:
        f.seek(info.header_offset)
        header = f.read(30)
    check(header[:4] == b"PK\x03\x04", "bad local header signature")
    name_len, extra_len = struct.unpack("<HH", header[26:30])
    return info.header_offset + 30 + name_len + extra_len


def load_error(name):
    """Try to load a malformed archive; return the exception (None if it loaded)."""
    try:
        load_package(name)
    except BaseException as ex:  # noqa: B902 - we want to see anything
        return ex
    return None


def make_malformed(identity_name):
    os.makedirs(path("malformed"), exist_ok=True)
    src = path(identity_name)
    with open(src, "rb") as f:
        good = f.read()

    name = "malformed/not_a_zip.pt"
    write_bytes(name, b"this is not a zip archive, just some text\n" * 4,
                "malformed: plain text, not a zip at all")
    check(not zipfile.is_zipfile(path(name)), f"{name} is a zip")
    check(load_error(name) is not None, f"{name} loaded")

    name = "malformed/plain.zip"
    with zipfile.ZipFile(path(name), "w") as z:
        # Fixed timestamp so the file is the same on every run.
        z.writestr(zipfile.ZipInfo("hello.txt", (1980, 1, 1, 0, 0, 0)),
                   "a valid zip, but not a torch.package\n")
    record(name, "malformed: valid zip with one text file, not a torch.package")
    check(load_error(name) is not None, f"{name} loaded")

    name = "malformed/truncated.pt"
    write_bytes(name, good[: len(good) * 60 // 100],
                "malformed: first 60% of identity.pt (no central directory)")
    check(load_error(name) is not None, f"{name} loaded")

    # corrupt.pt: flip bytes inside model.pkl's data.  The zip structure is
    # intact (same names and offsets) but that record's CRC-32 no longer
    # matches.  The first bytes are flipped so that, even for a reader that
    # skips CRC checks, the pickle starts with an invalid opcode (0x80 PROTO
    # becomes 0x7f) and unpickling fails.
    name = "malformed/corrupt.pt"
    with zipfile.ZipFile(src) as z:
        pkl = next(i for i in z.infolist() if i.filename.endswith("/model/model.pkl"))
    check(pkl.compress_type == zipfile.ZIP_STORED, "model.pkl is compressed")
    start = local_data_offset(src, pkl)
    data = bytearray(good)
    check(data[start] == 0x80, "model.pkl does not start with a pickle PROTO opcode")
    for i in range(start, start + 4):
        data[i] ^= 0xFF
    write_bytes(name, bytes(data), f"malformed: identity.pt with bytes flipped in {pkl.filename}")
    with zipfile.ZipFile(path(name)) as z:
        check(z.testzip() == pkl.filename, f"{name}: CRC of {pkl.filename} still matches")
    check(load_error(name) is not None, f"{name} loaded")

    # missing_extern.pt: the pickled object's class lives in a module that
    # exists only while packaging, and is extern (not copied in the archive).
    name = "malformed/missing_extern.pt"
    mod = "manypy_missing_dep"
    tmp = tempfile.mkdtemp(prefix="manypy-missing-")
    try:
        with open(os.path.join(tmp, mod + ".py"), "w") as f:
            f.write("class Dep:\n    def __init__(self):\n        self.value = 42\n")
        sys.path.insert(0, tmp)
        dep = __import__(mod).Dep()
        with PackageExporter(path(name)) as e:
            e.extern(mod)
            e.save_pickle("model", "model.pkl", dep)
    finally:
        sys.path.remove(tmp)
        sys.modules.pop(mod, None)
        shutil.rmtree(tmp)
    record(name, f"malformed: needs extern module {mod!r}, which does not exist")
    ex = load_error(name)
    check(isinstance(ex, ModuleNotFoundError),
          f"{name}: expected ModuleNotFoundError, got {ex!r}")

    # future_version.pt: identity.pt with .data/version = 99.  Rewritten with
    # zipfile (ZIP_STORED), every other record copied unchanged under the
    # same name.  zipfile does not reproduce torch's 64-byte data alignment;
    # identity.pt has no tensor storages, so that does not matter here.
    name = "malformed/future_version.pt"
    with zipfile.ZipFile(src) as zin, \
            zipfile.ZipFile(path(name), "w", zipfile.ZIP_STORED) as zout:
        versions = [n for n in zin.namelist() if n.endswith("/.data/version")]
        check(len(versions) == 1 and zin.read(versions[0]) == b"6\n",
              f"{identity_name}: unexpected .data/version record")
        for info in zin.infolist():
            data = b"99\n" if info.filename == versions[0] else zin.read(info)
            zout.writestr(zipfile.ZipInfo(info.filename, info.date_time), data)
    record(name, "malformed: identity.pt with .data/version 99 (unsupported)")
    with zipfile.ZipFile(path(name)) as z:
        check(z.read(versions[0]) == b"99\n", f"{name}: version not rewritten")
    check(load_error(name) is not None, f"{name} loaded")


def rewrite_zip(src_name, name, transform, purpose):
    """Copies archive SRC_NAME to NAME record by record, with zipfile:
    transform(record name, data) returns (data, zipfile compression) for
    each.  zipfile does not keep torch's 64-byte data alignment, which none
    of these archives gets far enough to need."""
    with zipfile.ZipFile(path(src_name)) as zin, \
            zipfile.ZipFile(path(name), "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data, compression = transform(info.filename, zin.read(info))
            zout.writestr(zipfile.ZipInfo(info.filename, info.date_time), data,
                          compress_type=compression)
    record(name, purpose)


def make_malformed_records(heavy_name, identity_name, script_name):
    """Archives whose zip structure is sound but whose records are not."""
    first_storage = []

    def short_storage(name, data):
        if name.endswith(".storage") and not first_storage:
            first_storage.append(name)
            return b"", zipfile.ZIP_STORED
        return data, zipfile.ZIP_STORED

    rewrite_zip(heavy_name, "malformed/short_storage.pt", short_storage,
                "malformed: python_heavy.pt with its first storage record emptied")
    
    def deflated_storages(name, data):
        return data, zipfile.ZIP_DEFLATED if name.endswith(".storage") else zipfile.ZIP_STORED

    rewrite_zip(heavy_name, "malformed/deflated_storage.pt", deflated_storages,
                "malformed: python_heavy.pt with its storage records deflated")

    def huge_version(name, data):
        return (b"99999999999999999999999\n" if name.endswith("/.data/version") else data,
                zipfile.ZIP_STORED)

    rewrite_zip(identity_name, "malformed/huge_version.pt", huge_version,
                "malformed: identity.pt with a .data/version beyond 64 bits")

    def bad_source(name, data):
        return (b"\xff\xfe not UTF-8 \x80\n" if name.endswith("/identity.py") else data,
                zipfile.ZIP_STORED)

    rewrite_zip(identity_name, "malformed/bad_source.pt", bad_source,
                "malformed: identity.pt whose packaged source is not UTF-8")
    check(isinstance(load_error("malformed/bad_source.pt"), (UnicodeDecodeError, SyntaxError)),
          "bad_source.pt: expected a decoding error from torch.package")

    def bad_code(name, data):
        if name.endswith(".py") and "/code/" in name:
            return b"def forward(self, x:\n  return )))\n", zipfile.ZIP_STORED
        return data, zipfile.ZIP_STORED

    rewrite_zip(script_name, "malformed/bad_script.pt", bad_code,
                "malformed: loop_script.pt whose TorchScript code does not parse")

    # bad_pickle_script.pt: constants.pkl is PROTO 2, BUILD, STOP. BUILD pops
    # two items from an empty stack; libtorch's unpickler does not check and
    # crashed the process (found by fuzz_script_load).
    rewrite_zip(script_name, "malformed/bad_pickle_script.pt",
                lambda name, data: (b"\x80\x02b." if name.endswith("/constants.pkl") else data,
                                    zipfile.ZIP_STORED),
                "malformed: loop_script.pt whose constants.pkl pops an empty stack")

    # runs_code.pt: a pickle is a program. This one calls builtins.exec, which
    # torch.package always allows, to write the file $MANYPY_MARKER names.
    # It shows what a trusted-archive allow-list is for (docs/security.md).
    class RunsCode:
        def __reduce__(self):
            return (exec, ("import os, pathlib\n"
                           "m = os.environ.get('MANYPY_MARKER')\n"
                           "m and pathlib.Path(m).write_text('the pickle ran')\n",))

    payload = pickle.dumps(RunsCode(), protocol=3)
    rewrite_zip(identity_name, "malformed/runs_code.pt",
                lambda name, data: (payload if name.endswith("/model/model.pkl") else data,
                                    zipfile.ZIP_STORED),
                "malformed: identity.pt whose pickle runs code (writes $MANYPY_MARKER)")
    marker = os.path.join(tempfile.mkdtemp(prefix="manypy-marker-"), "ran")
    os.environ["MANYPY_MARKER"] = marker
    try:
        load_error("malformed/runs_code.pt")
        check(os.path.exists(marker), "runs_code.pt: its pickle did not run")
    finally:
        del os.environ["MANYPY_MARKER"]
        shutil.rmtree(os.path.dirname(marker))

    # twin_harmless.pt and twin_runs_code.pt: the same records at the same
    # offsets, of the same sizes, but the pickle of one runs nothing and the
    # other's writes $MANYPY_MARKER. Writing the second over the first in
    # place (same size, as `dd conv=notrunc` or a careless deploy would) is
    # what a host that reads a file after checking its digest must survive
    # (docs/security.md).
    runs = ("import os, pathlib\n"
            "m = os.environ.get('MANYPY_MARKER')\n"
            "m and pathlib.Path(m).write_text('the pickle ran')\n")
    harmless = "pass".ljust(len(runs), " ")
    payloads = {}
    for twin, code in (("twin_harmless", harmless), ("twin_runs_code", runs)):
        class Exec:
            def __reduce__(self, code=code):
                return (exec, (code,))

        payloads[twin] = pickle.dumps(Exec(), protocol=3)
        rewrite_zip(identity_name, f"malformed/{twin}.pt",
                    lambda name, data, twin=twin:
                        (payloads[twin] if name.endswith("/model/model.pkl") else data,
                         zipfile.ZIP_STORED),
                    f"malformed: identity.pt whose pickle runs {'nothing' if twin == 'twin_harmless' else 'code'}"
                    ", same size and layout as its twin")
    with open(path("malformed/twin_harmless.pt"), "rb") as a, \
            open(path("malformed/twin_runs_code.pt"), "rb") as b:
        a, b = a.read(), b.read()
    check(len(a) == len(b) and a != b, "the twins differ in size, or not at all")


def write_hostile():
    """hostile.pt: Hostile (model/model.pkl), whose methods attack the host,
    a SlowToUnpickle that takes 2 s to unpickle (model/slow.pkl), and a
    slow_body.Twice whose module's body takes 1 s to run
    (model/slow_body.pkl)."""
    with PackageExporter(path("hostile.pt")) as e:
        e.intern(["hostile", "slow_body"])
        e.save_pickle("model", "model.pkl", Hostile().eval())
        e.save_pickle("model", "slow.pkl", SlowToUnpickle(2.0))
        e.save_pickle("model", "slow_body.pkl", Twice())
    record("hostile.pt", "torch.package of Hostile: models that attack the host (hardening tests)")
    model = load_package("hostile.pt")
    check(torch.equal(model(torch.ones(2)), torch.full((2,), 2.0)),
          "hostile.pt: forward(x) is not x * 2")


def write_pickles():
    """pickles/protocolN.pkl: one object written by Python's pickle at each
    protocol, with what libtorch's pickles do not use (frames, memoize, sets,
    bytes, shared references): the pickle check (core/src/pickle_check.h)
    must accept every well-formed pickle, not only torch's."""
    os.makedirs(path("pickles"), exist_ok=True)
    shared = [1.5, "shared"]
    obj = {"ints": [0, 1, -1, 255, 65536, 2**40, -2**70], "text": "é ünïcode",
           "bytes": b"\x00\xff", "tuple": (1, (2, 3), ()), "set": {1, 2}, "none": None,
           "bools": [True, False], "frozen": frozenset({"a"}), "shared": (shared, shared),
           "nested": {"a": {"b": [{"c": 1.0}]}}, "big": "x" * 70000, "range": range(3)}
    for protocol in range(6):
        data = pickle.dumps(obj, protocol=protocol)
        check(pickle.loads(data) == obj, f"pickle protocol {protocol} round trip")
        write_bytes(f"pickles/protocol{protocol}.pkl", data,
                    f"a Python pickle, protocol {protocol} (pickle check tests)")


def main():
    global OUT
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--big-mb", type=int, default=256,
                    help="size of big_weights.pt's parameters in MB (default 256)")
    args = ap.parse_args()
    OUT = args.out_dir
    os.makedirs(OUT, exist_ok=True)
    t0 = time.monotonic()

    # resnet18 ------------------------------------------------------------
    import torchvision

    torch.manual_seed(0)
    resnet = torchvision.models.resnet18(weights=None).eval()
    # torchvision and numpy are extern: the loader must have them installed.
    export_package("resnet18.pt", resnet, extern=["torchvision.**", "numpy.**"])
    record("resnet18.pt", "torch.package of torchvision resnet18 (random weights, seed 0)")
    x = make_input([1, 3, 224, 224])
    expected = write_case("resnet18", resnet, x, {})
    write_script("resnet18_script.pt", torch.jit.script(resnet), x, {}, expected,
                 "TorchScript (torch.jit.script) of the same resnet18")

    # python_heavy --------------------------------------------------------
    torch.manual_seed(0)
    heavy = PythonHeavy().eval()
    # Interned: the module's source goes into the archive, so the loader
    # needs nothing from samples/models.
    export_package("python_heavy.pt", heavy, intern=["python_heavy"])
    record("python_heavy.pt", "torch.package of PythonHeavy (interned source, seed 0)")
    x = make_input([4, 64])
    expected = write_case("python_heavy", heavy, x, PYTHON_HEAVY_KWARGS)
    with torch.no_grad():
        defaults = heavy(x)
    check(not torch.allclose(defaults["logits"], expected["logits"]),
          "python_heavy: kwargs do not change the output")
    write_script("python_heavy_script.pt", torch.jit.script(heavy), x,
                 PYTHON_HEAVY_KWARGS, expected,
                 "TorchScript (torch.jit.script) of the same PythonHeavy")

    # identity ------------------------------------------------------------
    torch.manual_seed(0)
    export_package("identity.pt", Identity().eval(), intern=["identity"])
    record("identity.pt", "torch.package of Identity (interned source)")
    x = make_input([2, 3])
    write_case("identity", Identity().eval(), x, {})

    # seed_example ----------------------------------------------------------
    # The model of the torch::deploy tutorial (its "my_package.pt"), exported
    # exactly as the tutorial does (numpy extern), but seeded so that the
    # output of samples/c/deploy_example.c can be checked.  Called with
    # torch.ones(1, 1, 10, 10), as the tutorial's C++ program does.
    torch.manual_seed(0)
    seed = torch.nn.Sequential(
        torch.nn.Conv2d(1, 20, 5),
        torch.nn.ReLU(),
        torch.nn.Conv2d(20, 64, 5),
        torch.nn.ReLU(),
    ).eval()  # no dropout or batch norm: eval() changes nothing but the flag
    export_package("seed_example.pt", seed, extern=["numpy.**"])
    record("seed_example.pt", "torch.package of the torch::deploy tutorial's model (seed 0)")
    expected = write_case("seed_example", seed, torch.ones(1, 1, 10, 10), {})
    # The sample prints out[:, :5]; a slice of zeros (all ReLU'd away) would
    # make its check meaningless.
    check(bool((expected[:, :5] != 0).any()), "seed_example: out[:, :5] is all zeros")

    # stuck, loop_script --------------------------------------------------
    export_package("stuck.pt", Stuck().eval(), intern=["stuck"])
    record("stuck.pt", "torch.package of Stuck: methods that never return (deadline tests)")
    check(torch.equal(load_package("stuck.pt")(torch.ones(2)), torch.full((2,), 2.0)),
          "stuck.pt: forward(x) is not x * 2")
    loop = torch.jit.script(Loop())
    check(torch.equal(loop(torch.zeros(2), 3), torch.full((2,), 3.0)), "loop: wrong result")
    torch.jit.save(loop, path("loop_script.pt"))
    record("loop_script.pt", "TorchScript of Loop: forward(x, n) adds 1 n times")

    # batching: the dynamic batcher's tests ----------------------------------
    export_package("batching.pt", Batching().eval(), intern=["batching"])
    record("batching.pt", "torch.package of Batching: methods that report the batch they ran in "
           "(dynamic batching tests)")
    b = load_package("batching.pt")
    check(torch.equal(b.rows(torch.zeros(3, 2)), torch.full((3,), 3.0)), "batching: rows")
    check(torch.equal(b(torch.ones(2, 2)), torch.full((2, 2), 3.0)), "batching: forward")

    # versioned: two versions of one model, for hot swap tests ---------------
    for number in (1, 2):
        name = f"version_{number}.pt"
        export_package(name, Versioned(number, weight_mib=32).eval(), intern=["versioned"])
        record(name, f"torch.package of Versioned({number}): forward(x) is x's shape filled "
               f"with {number}, version() is {number}, 32 MiB of weights (hot swap tests)")
        v = load_package(name)
        check(v.version() == number, f"{name}: version()")
        check(torch.equal(v(torch.zeros(2)), torch.full((2,), float(number))), f"{name}: forward")

    # pickles: one of each protocol, for the pickle check's tests ------------
    write_pickles()

    # encoder: bool padding mask --------------------------------------------
    torch.manual_seed(0)
    encoder = Encoder().eval()
    export_package("encoder.pt", encoder, intern=["encoder"])
    record("encoder.pt", "torch.package of a 2-layer nn.TransformerEncoder (seed 0)")
    write_encoder_case(encoder)
    invert = torch.jit.script(Invert())
    check(torch.equal(invert(torch.tensor([True, False])), torch.tensor([False, True])),
          "invert: wrong result")
    torch.jit.save(invert, path("invert_script.pt"))
    record("invert_script.pt", "TorchScript of Invert: forward(mask) -> ~mask (bool)")

    # big_weights ---------------------------------------------------------
    torch.manual_seed(0)
    big = BigWeights(args.big_mb).eval()
    export_package("big_weights.pt", big, intern=["big_weights"])
    record("big_weights.pt", f"torch.package of BigWeights ({args.big_mb} MB of float32)")
    xb = make_input([2, big.k])
    loaded = load_package("big_weights.pt")
    with torch.no_grad():
        check(torch.equal(big(xb), loaded(xb)), "big_weights.pt load-back differs")
    del big, loaded

    # hostile -------------------------------------------------------------
    write_hostile()

    # malformed -----------------------------------------------------------
    make_malformed("identity.pt")
    make_malformed_records("python_heavy.pt", "identity.pt", "loop_script.pt")

    MANIFEST.append({"file": "manifest.json", "bytes": None,
                     "purpose": "this list of files and their purposes"})
    with open(path("manifest.json"), "w") as f:
        json.dump({"files": MANIFEST}, f, indent=2)
        f.write("\n")
    print(f"{'manifest.json':34s} {os.path.getsize(path('manifest.json')):>11d} bytes  "
          "list of files and their purposes")
    print(f"done in {time.monotonic() - t0:.1f} s")


if __name__ == "__main__":
    main()
