#!/usr/bin/env bash
# The main job: set up, build, and run the demo (samples/demo): two packaged
# PyTorch models checked against eager Python on every interpreter, then
# served from T threads by 1 interpreter (one shared GIL) and by N.
# It installs and builds only what the demo needs (scripts/setup.sh --demo,
# scripts/build.sh demo): the library, the interpreter side, manypy_demo and
# the sample archives, in build/.
# Arguments go to manypy_demo: [--threads T] [--interpreters N] [--seconds S]
# [--quick] [--archives DIR].
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh" --demo
"$root/scripts/build.sh" demo
source "$root/scripts/env.sh"
exec "${MANYPY_BUILD_DIR:-$root/build}/bin/manypy_demo" "$@"
