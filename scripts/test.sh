#!/usr/bin/env bash
# Set up, build, and run every test suite: in build/, the C++ core
# (GoogleTest), the C API (cmocka), Java (JUnit 5 through `mvn test`), the
# samples and the install tests; in build-fuzz/ (clang, ASan + UBSan), each
# libFuzzer target's seed and regression corpora replayed and a short fuzz
# run (docs/hardening.md). Both ctest runs always run; either failing fails.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh" main fuzz
source "$root/scripts/env.sh"
status=0
(cd "${MANYPY_BUILD_DIR:-$root/build}" &&
  ctest --output-on-failure --timeout 600 -j "$(nproc)") || status=1
(cd "${MANYPY_FUZZ_BUILD_DIR:-$root/build-fuzz}" &&
  ctest --output-on-failure --timeout 600 -j "$(nproc)") || status=1
exit "$status"
