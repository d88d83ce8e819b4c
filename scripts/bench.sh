#!/usr/bin/env bash
# The peers benchmark (docs/performance.md): set up, build, then manypy vs a
# worker pool, N plain processes, a shared GIL and TorchScript on four models
# for N = 1, 2, 4, with the chart. Took 14 minutes on this 2-core machine;
# the first run also makes the 512 MB model (build/archives/peers).
#
#   scripts/bench.sh [--leg torch1|torch2|both] [manypy_bench_peers options]
#
# --leg picks the build leg (README, "Torch and Python versions"): torch1 is
# build/ (Debian's python3-torch, the default), torch2 is build-torch2/
# (PyPI's torch 2.x on pyenv's CPython 3.12), both runs one after the
# other. The other arguments go to manypy_bench_peers: [--quick]
# [--seconds S] [--rounds R] [--n LIST] [--models LIST] [--big-mb MB]
# [--archives DIR] [--chart PNG] (default chart: <build>/peers.png).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
leg=torch1
args=()
while (($#)); do
  case "$1" in
    --leg) leg="${2:?--leg wants torch1, torch2 or both}"; shift 2 ;;
    --leg=*) leg="${1#--leg=}"; shift ;;
    *) args+=("$1"); shift ;;
  esac
done
case "$leg" in
  torch1) legs=(torch1) ;;
  torch2) legs=(torch2) ;;
  both) legs=(torch1 torch2) ;;
  *) echo "bench.sh: --leg wants torch1, torch2 or both, not $leg" >&2; exit 2 ;;
esac
"$root/scripts/setup.sh"
source "$root/scripts/env.sh"
for one in "${legs[@]}"; do
  if [[ "$one" == torch1 ]]; then
    build="${MANYPY_BUILD_DIR:-$root/build}"
    "$root/scripts/build.sh" main
  else
    build="${MANYPY_TORCH2_BUILD_DIR:-$root/build-torch2}"
    "$root/scripts/build.sh" torch2
  fi
  chart=()
  if [[ " ${args[*]-} " != *" --chart "* ]]; then chart=(--chart "$build/peers.png"); fi
  "$build/bin/manypy_bench_peers" "${chart[@]}" "${args[@]}"
done
