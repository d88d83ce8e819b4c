#!/usr/bin/env bash
# Set up, build, and run every test suite (C++ core: GoogleTest; C API: cmocka;
# Java: JUnit 5 through `mvn test`).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
source "$root/scripts/env.sh"
cd "${MANYPY_BUILD_DIR:-$root/build}"
ctest --output-on-failure --timeout 600 -j "$(nproc)"
