#!/usr/bin/env bash
# The main job: set up, build, and run the scaling benchmark (1 interpreter
# x T threads, the shared-GIL baseline, against T interpreters x T threads).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
source "$root/scripts/env.sh"
exec "${MANYPY_BUILD_DIR:-$root/build}/bin/manypy_bench_scaling" "$@"
