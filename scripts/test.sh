#!/usr/bin/env bash
# Set up, build, and run the test suites (CONTRIBUTING.md, "Testing, by tier").
#
#   scripts/test.sh           every suite, in three build trees (the README's
#                             test command, and CI's):
#     build/           the first leg (Debian's torch 1.13): every entry but
#                      the quick forms (ctest -LE quick)
#     build-sanitize/  clang, ASan + UBSan: the suites that exercise memory
#                      and the libFuzzer targets (labels memory and fuzz)
#     build-torch2/    the second leg (PyPI's torch 2.x on CPython 3.12):
#                      every entry but the leg1 ones (below), the bindings'
#                      suites in their quick forms
#   scripts/test.sh --quick   the edit-test loop: build/ only, the unit, capi
#                             and lint tiers and each binding's suite without
#                             its race, cgocheck and fuzz passes and without
#                             its long tests (label quick)
#
# Which entries a tree runs is decided by their labels (cmake/testing.cmake);
# each tree builds only what its entries run (scripts/build.sh --suites).
# Every ctest run always runs; any failing fails the command.
#
# The second leg leaves out (label leg1) entries whose code paths the suites
# that do run there already take, or that check sources and not the torch
# they run on:
# - java_tests, rust_tests, go_test_race: the bindings' suites run there in
#   their quick forms (java_tests_quick, rust_tests_quick, go_test_quick):
#   every test that reaches the library, which is what differs on torch 2.x,
#   without the long ones, which drive the bindings' own concurrency and
#   lifecycles (the same code on both legs), and without the race detector,
#   which watches only Go's side;
# - go_install_build: the Go binding against an installed tree, which
#   install_tarball already tests in this leg (its RUNPATH to the wheel's
#   libraries);
# - install_consumer: `cmake --install` and the consumer, which
#   install_tarball runs on the same install rules through CPack;
# - sample_java*, sample_rust*: the Java and Rust samples (synchronous and
#   asynchronous) drive the bindings that java_tests and rust_tests test in
#   this leg (the C samples, the Go HTTP sample and the demo run);
# - rust_clippy, go_vet*, lint_format_*: lints of the same sources;
# - go_fuzz_values, go_test_cgocheck2: Go-side value fuzzing and pointer
#   checks, the same code as in the first leg (go_test_race runs);
# - bench_*_vs_c_quick, bench_async_quick, bench_java_async_quick: the
#   side-by-side benchmarks' smoke runs, whose calls the binding suites and
#   the C API suites (capi_async, capi_batching, capi_async_stress) make in
#   this leg.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
quick=0
case "${1:-}" in
  --quick) quick=1 ;;
  "") ;;
  *) echo "usage: scripts/test.sh [--quick]" >&2; exit 2 ;;
esac

main_build="${MANYPY_BUILD_DIR:-$root/build}"
sanitize_build="${MANYPY_SANITIZE_BUILD_DIR:-$root/build-sanitize}"
torch2_build="${MANYPY_TORCH2_BUILD_DIR:-$root/build-torch2}"

status=0
run_ctest() {  # <build dir> <ctest label options>...
  local build=$1
  shift
  echo "== ctest in $build ($*)"
  (cd "$build" && ctest --output-on-failure --timeout 600 -j "$(nproc)" "$@") || status=1
}

"$root/scripts/setup.sh"
source "$root/scripts/env.sh"

if ((quick)); then
  "$root/scripts/build.sh" --suites main
  run_ctest "$main_build" -L '^(unit|capi|lint|quick)$'
  exit "$status"
fi

# What waits on the network runs beside the first build, which waits on the
# processor: the second leg's venv (pip) and the clean Debian root of the
# install test (mmdebstrap); each is made once per machine and only checked
# later. Their output goes to a log, shown if they fail.
logs="$main_build/setup-logs"
mkdir -p "$logs"
"$root/scripts/setup_torch2.sh" >"$logs/torch2-venv.log" 2>&1 &
venv_pid=$!
bash "$root/tests/install/clean_root.sh" --prepare >"$logs/clean-root.log" 2>&1 &
clean_root_pid=$!

"$root/scripts/build.sh" --suites main
"$root/scripts/build.sh" sanitize
wait "$venv_pid" || cat "$logs/torch2-venv.log"  # build.sh torch2 says why it cannot go on
"$root/scripts/build.sh" torch2
# The packages, which install_clean_root and install_tarball install.
"$root/scripts/package.sh" --no-build main torch2
wait "$clean_root_pid" || cat "$logs/clean-root.log"  # install_clean_root will fail

run_ctest "$main_build" -LE '^quick$'
run_ctest "$sanitize_build"
run_ctest "$torch2_build"
exit "$status"
