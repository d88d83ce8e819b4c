#!/usr/bin/env bash
# The main job: set up, build, and run the demo (samples/demo): two packaged
# PyTorch models checked against eager Python on every interpreter, then
# served from T threads by 1 interpreter (one shared GIL) and by N.
# Arguments go to manypy_demo: [--threads T] [--interpreters N] [--seconds S]
# [--quick] [--archives DIR].
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
source "$root/scripts/env.sh"
exec "${MANYPY_BUILD_DIR:-$root/build}/bin/manypy_demo" "$@"
