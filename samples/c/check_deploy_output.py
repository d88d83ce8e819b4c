#!/usr/bin/python3
"""Run manypy_deploy_example and check what it prints (ctest sample_deploy_example).

Usage: check_deploy_output.py PROGRAM PACKAGE.pt EXPECTED.bin

The program prints the model output's slice [:, :5] as libtorch does:
"(1,1,.,.) =" blocks of numbers with 4 decimals, then
"[ CPUFloatType{1,5,2,2} ]".  EXPECTED.bin is eager Python's whole output
(raw float32); its shape comes from NAME.json beside it.  PASS (exit 0) if
the program exits 0, says "Loaded model", and prints the expected shape and
values to within printing precision.  Standard library only.
"""

import json
import os
import re
import struct
import subprocess
import sys

# Printed with 4 decimals (rounding error up to 5e-5) after float32 math
# that may differ slightly from eager Python's.
ATOL = 1.5e-4


def fail(msg, out=""):
    print(f"FAIL: {msg}")
    if out:
        print("--- program output ---")
        print(out, end="")
    sys.exit(1)


def main():
    if len(sys.argv) != 4:
        fail(__doc__)
    program, package, expected_bin = sys.argv[1:]
    name = os.path.basename(expected_bin).split(".expected.")[0]
    with open(os.path.join(os.path.dirname(expected_bin), name + ".json")) as f:
        shape = json.load(f)["outputs"]["out"]["shape"]
    with open(expected_bin, "rb") as f:
        data = f.read()
    expected = struct.unpack(f"<{len(data) // 4}f", data)

    proc = subprocess.run([program, package], capture_output=True, text=True, timeout=600)
    out = proc.stdout
    print(out, end="")
    if proc.returncode != 0:
        fail(f"exit status {proc.returncode}; stderr:\n{proc.stderr}")
    lines = out.splitlines()
    if "Loaded model" not in lines:
        fail("no 'Loaded model' line", out)
    body = lines[lines.index("Loaded model") + 1:]

    # The slice [:, :5] of the expected output, in C order.
    sliced = list(shape)
    sliced[1] = min(sliced[1], 5)
    want = []

    def walk(dim, offset):
        if dim == len(shape):
            want.append(expected[offset])
            return
        stride = 1
        for s in shape[dim + 1:]:
            stride *= s
        for i in range(sliced[dim]):
            walk(dim + 1, offset + i * stride)

    walk(0, 0)

    type_line = "[ CPUFloatType{%s} ]" % ",".join(str(s) for s in sliced)
    if type_line not in body:
        fail(f"no line '{type_line}'", out)
    got = []
    for line in body[:body.index(type_line)]:
        if line.startswith("(") or not line.strip():
            continue  # a "(1,2,.,.) =" header or a blank separator
        got.extend(float(x) for x in line.split())
    if len(got) != len(want):
        fail(f"printed {len(got)} numbers, expected {len(want)}", out)
    worst = max(abs(g - w) for g, w in zip(got, want))
    if worst > ATOL:
        bad = next(i for i, (g, w) in enumerate(zip(got, want)) if abs(g - w) > ATOL)
        fail(f"number {bad} is {got[bad]}, eager Python gave {want[bad]:.6f}", out)
    if not any(re.fullmatch(r"\(1,\d+,\.,\.\) = ", line) for line in body):
        fail("no '(1,N,.,.) = ' block header", out)
    print(f"PASS: {len(got)} values equal eager Python's out[:, :5] "
          f"(max abs diff {worst:.1e}, tolerance {ATOL:.1e})")


if __name__ == "__main__":
    main()
