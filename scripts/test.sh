#!/usr/bin/env bash
# Set up, build, and run every test suite, in four build trees:
# - build/: the C++ core (GoogleTest), the C API (cmocka), Java (JUnit 5
#   through `mvn test`), Rust (`cargo test`, clippy), the samples, the soak
#   and the install tests;
# - build-fuzz/ (clang, ASan + UBSan): each libFuzzer target's seed and
#   regression corpora replayed and a short fuzz run;
# - build-sanitize/ (clang, UBSan): the C and C++ suites again, undefined
#   behaviour fatal (docs/hardening.md, "Sanitizers");
# - build-torch2/: the second leg, PyPI's torch 2.x on pyenv's CPython 3.12
#   (scripts/setup_torch2.sh makes its venv once per machine), with the
#   subset below.
# Every ctest run always runs; any failing fails the command.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh" main fuzz sanitize torch2
# The packages, which install_clean_root and install_tarball install.
"$root/scripts/package.sh" --no-build main torch2
source "$root/scripts/env.sh"

# The second leg runs every suite (C++ core, C API, Java, Rust, Go, the
# samples, the demo) but leaves out, to keep the whole command short (the aim
# is about 24 minutes on 2 cores with the venv in place), entries whose code
# paths the suites that do run here already take, or that check sources and
# not the torch they run on:
# - go_install_build: the Go binding against an installed tree, which
#   install_tarball already tests in this leg (its RUNPATH to the wheel's
#   libraries);
# - install_consumer: `cmake --install` and the consumer, which
#   install_tarball runs on the same install rules through CPack;
# - sample_java*, sample_rust*: the Java and Rust samples (synchronous and
#   asynchronous) drive the bindings that java_tests and rust_tests test in
#   this leg (the C samples, the Go HTTP sample and the demo run);
# - rust_clippy, go_vet*: lints of the same sources;
# - go_fuzz_values, go_test_cgocheck2: Go-side value fuzzing and pointer
#   checks, the same code as in the first leg (go_test_race runs);
# - bench_*_vs_c_quick, bench_*async_quick: the side-by-side benchmarks'
#   smoke runs, whose calls the binding suites and the C API suites
#   (capi_async, capi_batching, capi_async_stress) make in this leg.
torch2_exclude='^(go_install_build|install_consumer|sample_java.*|sample_rust.*|rust_clippy|go_vet.*|go_fuzz_values|go_test_cgocheck2|bench_.*_vs_c_quick|bench_.*async_quick)$'

status=0
run_ctest() {
  echo "== ctest in $1${2:+ (excluding $2)}"
  (cd "$1" && ctest --output-on-failure --timeout 600 -j "$(nproc)" ${2:+-E "$2"}) || status=1
}
for build in "${MANYPY_BUILD_DIR:-$root/build}" "${MANYPY_FUZZ_BUILD_DIR:-$root/build-fuzz}" \
  "${MANYPY_SANITIZE_BUILD_DIR:-$root/build-sanitize}"; do
  run_ctest "$build"
done
run_ctest "${MANYPY_TORCH2_BUILD_DIR:-$root/build-torch2}" "$torch2_exclude"
exit "$status"
