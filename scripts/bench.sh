#!/usr/bin/env bash
# The peers benchmark (docs/performance.md): set up, build, then manypy vs a
# worker pool, N plain processes, a shared GIL and TorchScript on four models
# for N = 1, 2, 4, with the chart. Took 14 minutes on this 2-core machine;
# the first run also makes the 512 MB model (build/archives/peers). Arguments go to
# manypy_bench_peers: [--quick] [--seconds S] [--rounds R] [--n LIST]
# [--big-mb MB] [--archives DIR] [--chart PNG] (default chart: build/peers.png).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${MANYPY_BUILD_DIR:-$root/build}"
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
source "$root/scripts/env.sh"
chart=()
if [[ " $* " != *" --chart "* ]]; then chart=(--chart "$build/peers.png"); fi
exec "$build/bin/manypy_bench_peers" "${chart[@]}" "$@"
