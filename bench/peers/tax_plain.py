"""The plain side of manypy_bench_tax (bench/peers/tax.c): one python3
process running the model loop in bursts on command, so that the host can
interleave them finely with manypy's.

  tax_plain.py ARCHIVE

Loads the model (torch.package, one intra-op thread), checks one output,
warms up, prints "ready". Then for every line K on stdin: K calls, and a
line with their wall time in seconds. Exits at the end of stdin.
"""

import os
import sys
import time

import torch

from common import case_of, check_output, load_model, read_tensor


def main():
    archive = sys.argv[1]
    model = load_model(archive)
    case = case_of(archive)
    x = read_tensor(os.path.dirname(archive), case["input"])
    kwargs = case["kwargs"]
    with torch.no_grad():
        try:
            check_output(model(x, **kwargs), case, os.path.dirname(archive))
        except ValueError as e:
            sys.exit(f"tax_plain.py: {archive}: wrong output: {e}")
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
