#!/usr/bin/env bash
# Configures and builds manypy into build/ (incremental on later runs).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${MANYPY_BUILD_DIR:-$root/build}"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build"
