"""Build the AOTInductor packages (.pt2) of the sample models (torch 2.x).

torch.export captures each model, torch._inductor.aoti_compile_and_package
compiles it for this machine's CPU, and the package is loaded back with
torch._inductor.aoti_load_package and checked against eager PyTorch. Beside
each NAME.pt2: NAME_pt2.expected.<key>.bin, its outputs on the input that
make_archives.py wrote (NAME.input.bin), raw little-endian float32.
python_heavy.pt2 is exported with python_heavy's case (steps=5,
normalize=False), so its outputs are those of the other designs' calls.

Also writes malformed/*.pt2, packages doctored one way each, for the tests
of the loader's refusals (docs/models.md):
  truncated.pt2        the first half of python_heavy.pt2
  no_library.pt2       its compiled library removed
  bad_library.pt2      its library cut to 4 KiB (an ELF header, no body)
  missing_dependency.pt2  a library that needs a library no system has
  cuda_device.pt2      metadata saying it was compiled for CUDA
  other_machine.pt2    metadata saying aarch64
  aarch64_library.pt2  an x86_64 package whose library's ELF header says aarch64
  newer_torch.pt2      a library that needs a function this libtorch lacks
                       (as one compiled by a newer torch does)
  exported_only.pt2    torch.export.save: an exported program, not compiled

Run with the torch 2.x leg's Python (samples/CMakeLists.txt does, where
manypy is built with AOTInductor). Compiling takes minutes on 2 cores;
Inductor caches its work under /tmp/torchinductor_$USER, so a rebuild of the
same models is faster.
"""

import argparse
import os
import sys
import time
import zipfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_archives import PYTHON_HEAVY_KWARGS  # noqa: E402
from python_heavy import PythonHeavy, PythonHeavyExport  # noqa: E402

OUT = ""


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def path(name):
    return os.path.join(OUT, name)


def read_input(name, shape):
    with open(path(f"{name}.input.bin"), "rb") as f:
        data = bytearray(f.read())
    return torch.frombuffer(data, dtype=torch.float32).reshape(shape).clone()


def write_tensor(name, t):
    with open(path(name), "wb") as f:
        f.write(t.detach().contiguous().numpy().astype("<f4").tobytes())


def compile_package(name, model, x):
    """Export `model` on example input `x`, compile it as NAME.pt2, load it
    back and check it against eager; write its expected outputs."""
    started = time.monotonic()
    # Inductor's layout optimisation runs convolutions channels-last; without
    # freezing it does not fold the weights' conversion into the package, so
    # the compiled model copies every convolution weight into that layout on
    # every call (ResNet-18: 46 MB a call, and 0.7x TorchScript's throughput
    # with it, 1.1x to 1.2x without). docs/models.md tells users the same.
    with torch.no_grad(), torch._inductor.config.patch(layout_optimization=False):
        eager = model(x)
        exported = torch.export.export(model, (x,))
        torch._inductor.aoti_compile_and_package(exported, package_path=path(f"{name}.pt2"))
    compiled = torch._inductor.aoti_load_package(path(f"{name}.pt2"))
    with torch.no_grad():
        got = compiled(x)
    eager = eager if isinstance(eager, dict) else {"out": eager}
    got = got if isinstance(got, dict) else {"out": got}
    if eager.keys() != got.keys():
        fail(f"{name}.pt2: outputs {sorted(got)} but eager gives {sorted(eager)}")
    for key in eager:
        if not torch.allclose(eager[key], got[key], rtol=1e-4, atol=1e-4):
            fail(f"{name}.pt2: output {key!r} differs from eager")
        write_tensor(f"{name}_pt2.expected.{key}.bin", got[key])
    size = os.path.getsize(path(f"{name}.pt2"))
    print(f"{name}.pt2 {size:>11d} bytes  compiled in {time.monotonic() - started:.0f} s")


def library_record(zf):
    names = [n for n in zf.namelist() if "/data/aotinductor/" in n and n.endswith(".so")]
    if len(names) != 1:
        fail(f"expected one compiled library, found {names}")
    return names[0]


def rewrite(src, dst, transform):
    """Copy package SRC to malformed/DST, each record through transform(name,
    data) -> data, or None to drop it. Records keep their compression."""
    os.makedirs(path("malformed"), exist_ok=True)
    with zipfile.ZipFile(path(src)) as zin, zipfile.ZipFile(path(f"malformed/{dst}"), "w") as zout:
        for info in zin.infolist():
            data = transform(info.filename, zin.read(info.filename))
            if data is not None:
                zout.writestr(info, data)


def make_malformed(src):
    with zipfile.ZipFile(path(src)) as zf:
        library = library_record(zf)
    metadata = library[: -len(".so")] + "_metadata.json"

    with open(path(src), "rb") as f:
        whole = f.read()
    os.makedirs(path("malformed"), exist_ok=True)
    with open(path("malformed/truncated.pt2"), "wb") as f:
        f.write(whole[: len(whole) // 2])

    rewrite(src, "no_library.pt2", lambda n, d: None if n == library else d)
    rewrite(src, "bad_library.pt2", lambda n, d: d[:4096] if n == library else d)

    def metadata_says(key, value):
        def transform(n, d):
            if n != metadata:
                return d
            text = d.decode()
            old = text.split(f'"{key}": "')[1].split('"')[0]
            return text.replace(f'"{key}": "{old}"', f'"{key}": "{value}"').encode()
        return transform

    rewrite(src, "cuda_device.pt2", metadata_says("AOTI_DEVICE_KEY", "cuda"))
    rewrite(src, "other_machine.pt2", metadata_says("AOTI_MACHINE", "aarch64"))
    # e_machine, bytes 18-19 of the ELF header: EM_AARCH64 (183).
    rewrite(src, "aarch64_library.pt2",
            lambda n, d: d[:18] + (183).to_bytes(2, "little") + d[20:] if n == library else d)

    # A compiled library names the libtorch functions it calls (aoti_torch_*,
    # the C shim). One compiled by a newer torch may need one that this
    # libtorch lacks: renaming one reference (same length) makes that so.
    def newer_torch(n, d):
        if n != library:
            return d
        needle = b"aoti_torch_get_dtype\x00"
        if needle not in d:
            fail(f"{src}: its library does not reference aoti_torch_get_dtype")
        return d.replace(needle, b"aoti_torch_get_dtypf\x00")
    rewrite(src, "newer_torch.pt2", newer_torch)

    def missing_dependency(n, d):
        if n != library:
            return d
        needle = b"libtorch.so\x00"
        if needle not in d:
            fail(f"{src}: its library does not need libtorch.so")
        return d.replace(needle, b"libtorcx.so\x00")
    rewrite(src, "missing_dependency.pt2", missing_dependency)


def main():
    global OUT
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", help="the archives directory (make_archives.py's)")
    args = ap.parse_args()
    OUT = args.out_dir
    torch.set_num_threads(max(1, os.cpu_count() or 1))

    import torchvision

    # The same models, weights and inputs as make_archives.py's.
    torch.manual_seed(0)
    resnet = torchvision.models.resnet18(weights=None).eval()
    compile_package("resnet18", resnet, read_input("resnet18", [1, 3, 224, 224]))

    # Exported with the keyword arguments of python_heavy's case, which the
    # export fixes: the package computes what the other designs' calls do.
    torch.manual_seed(0)
    heavy = PythonHeavyExport(PythonHeavy(), **PYTHON_HEAVY_KWARGS).eval()
    compile_package("python_heavy", heavy, read_input("python_heavy", [4, 64]))

    make_malformed("python_heavy.pt2")
    with torch.no_grad():
        exported = torch.export.export(heavy, (read_input("python_heavy", [4, 64]),))
    torch.export.save(exported, path("malformed/exported_only.pt2"))

    with open(path("pt2.stamp"), "w") as f:
        f.write(f"torch {torch.__version__}\n")


if __name__ == "__main__":
    main()
