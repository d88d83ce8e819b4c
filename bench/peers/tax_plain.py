"""The plain side of manypy_bench_tax (bench/peers/tax.c): one python3
process running the model loop in bursts on command, so that the host can
interleave them finely with manypy's.

  tax_plain.py ARCHIVE

Loads the model (torch.package, one intra-op thread), checks one output,
warms up, prints "ready". Then for every line K on stdin: K calls, and a
line with their wall time in seconds. Exits at the end of stdin.
"""

import sys
import time

import torch

from common import load_checked


def main():
    archive = sys.argv[1]
    model, x, kwargs = load_checked(archive, "tax_plain.py")
    with torch.no_grad():
        for _ in range(200):
            model(x, **kwargs)
        print("ready", flush=True)
        for line in sys.stdin:
            calls = int(line)
            start = time.perf_counter()
            for _ in range(calls):
                model(x, **kwargs)
            print(f"{time.perf_counter() - start:.9f}", flush=True)


if __name__ == "__main__":
    main()
