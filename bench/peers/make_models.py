"""Writes the models the peers benchmark needs beyond the sample archives.

  python3 make_models.py OUT_DIR --big-mb MB

OUT_DIR gets, in the layout of samples/models/make_archives.py:
  big_light_MB.pt          torch.package of samples/models/big_weights.py's
                           BigWeights(MB, light=True): MB of float32
                           weights, a light forward pass (one float
                           read per 4 KiB page: ~2 ms for 512 MB)
  big_light_MB_script.pt   the same model scripted (TorchScript on the host)
  big_light_MB.input.bin, big_light_MB.expected.out.bin, big_light_MB.json
  identity_script.pt       samples/models/identity.py's Identity, scripted

The benchmark runs this lazily (the 512 MB model is too big to build with
every build tree).  Files are written under a temporary name and renamed, so
an interrupted run leaves nothing half-written behind.
"""

import argparse
import json
import os
import sys

import torch
from torch.package import PackageExporter, PackageImporter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "samples", "models"))

from big_weights import BigWeights  # noqa: E402
from identity import Identity  # noqa: E402


def publish(tmp, final):
    os.replace(tmp, final)
    print(f"{os.path.basename(final):34s} {os.path.getsize(final):>11d} bytes")


def write_bytes(path, data):
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    publish(path + ".tmp", path)


def make_big(out, mb):
    name = f"big_light_{mb}"
    torch.manual_seed(0)
    model = BigWeights(mb, light=True).eval()
    g = torch.Generator().manual_seed(1)
    x = torch.randn([2, model.k], generator=g, dtype=torch.float32)
    pt = os.path.join(out, f"{name}.pt")
    with PackageExporter(pt + ".tmp") as e:
        e.intern("big_weights")
        e.save_pickle("model", "model.pkl", model)
    loaded = PackageImporter(pt + ".tmp").load_pickle("model", "model.pkl")
    with torch.no_grad():
        expected = loaded(x)
        if not torch.equal(expected, model(x)):
            sys.exit(f"{name}.pt: load-back differs from the model")
    publish(pt + ".tmp", pt)
    script = os.path.join(out, f"{name}_script.pt")
    torch.jit.save(torch.jit.script(model), script + ".tmp")
    with torch.no_grad():
        if not torch.allclose(torch.jit.load(script + ".tmp")(x), expected, atol=1e-5):
            sys.exit(f"{name}_script.pt: output differs from the package's")
    publish(script + ".tmp", script)
    write_bytes(os.path.join(out, f"{name}.input.bin"), x.numpy().tobytes())
    write_bytes(os.path.join(out, f"{name}.expected.out.bin"), expected.contiguous().numpy().tobytes())
    case = {"input": {"shape": list(x.shape), "dtype": "float32", "file": f"{name}.input.bin"},
            "kwargs": {},
            "outputs": {"out": {"shape": list(expected.shape), "dtype": "float32",
                                "file": f"{name}.expected.out.bin"}},
            "scalars": {}}
    write_bytes(os.path.join(out, f"{name}.json"), (json.dumps(case, indent=2) + "\n").encode())


def make_identity_script(out):
    path = os.path.join(out, "identity_script.pt")
    torch.jit.save(torch.jit.script(Identity().eval()), path + ".tmp")
    publish(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--big-mb", type=int, required=True)
    args = ap.parse_args()
    if args.big_mb < 1:
        sys.exit("--big-mb must be at least 1")
    os.makedirs(args.out_dir, exist_ok=True)
    torch.set_num_threads(1)
    if not os.path.exists(os.path.join(args.out_dir, "identity_script.pt")):
        make_identity_script(args.out_dir)
    if not os.path.exists(os.path.join(args.out_dir, f"big_light_{args.big_mb}.json")):
        make_big(args.out_dir, args.big_mb)


if __name__ == "__main__":
    main()
