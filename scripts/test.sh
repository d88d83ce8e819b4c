#!/usr/bin/env bash
# Set up, build, and run every test suite, in three build trees:
# - build/: the C++ core (GoogleTest), the C API (cmocka), Java (JUnit 5
#   through `mvn test`), Rust (`cargo test`, clippy), the samples, the soak
#   and the install tests;
# - build-fuzz/ (clang, ASan + UBSan): each libFuzzer target's seed and
#   regression corpora replayed and a short fuzz run;
# - build-sanitize/ (clang, UBSan): the C and C++ suites again, undefined
#   behaviour fatal (docs/hardening.md, "Sanitizers").
# Every ctest run always runs; any failing fails the command.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh" main fuzz sanitize
source "$root/scripts/env.sh"
status=0
for build in "${MANYPY_BUILD_DIR:-$root/build}" "${MANYPY_FUZZ_BUILD_DIR:-$root/build-fuzz}" \
  "${MANYPY_SANITIZE_BUILD_DIR:-$root/build-sanitize}"; do
  echo "== ctest in $build"
  (cd "$build" && ctest --output-on-failure --timeout 600 -j "$(nproc)") || status=1
done
exit "$status"
