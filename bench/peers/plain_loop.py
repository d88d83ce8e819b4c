"""One of the N plain processes of the ceiling (bench/peers/plain.c): the
model loop in a process of its own, with no IPC at all.

  plain_loop.py ARCHIVE WARMUP_S SECONDS LATENCY_FILE

Loads the model (torch.package, one intra-op thread), checks one output
against the expected files, prints "ready", and waits for a line on stdin so
that all N start at the same moment.  Then calls the model for WARMUP_S
seconds, and for SECONDS more timing each call.  It writes the latencies
(int64 ns) to LATENCY_FILE, prints "done CALLS ELAPSED_S", and waits for
stdin to close before exiting, so that the host can read its memory first.
"""

import array
import sys
import time

import torch

from common import load_checked


def main():
    archive, warmup, seconds, latency_file = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    model, x, kwargs = load_checked(archive, "plain_loop.py")
    with torch.no_grad():
        print("ready", flush=True)
        if not sys.stdin.readline():
            return
        clock = time.perf_counter_ns
        end = time.monotonic() + warmup
        while time.monotonic() < end:
            model(x, **kwargs)
        lat = array.array("q")
        t0 = time.monotonic()
        end = t0 + seconds
        while True:
            a = clock()
            model(x, **kwargs)
            lat.append(clock() - a)
            if time.monotonic() >= end:
                break
        elapsed = time.monotonic() - t0
    with open(latency_file, "wb") as f:
        lat.tofile(f)
    print(f"done {len(lat)} {elapsed:.6f}", flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
