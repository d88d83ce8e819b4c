#!/usr/bin/env bash
# Configures and builds manypy (incremental on later runs).
#   scripts/build.sh            build/: the library, tests, samples, Java,
#                               Rust, benchmarks (everything)
#   scripts/build.sh sanitize   build-sanitize/: clang with ASan and UBSan
#                               (docs/hardening.md): the libFuzzer targets
#                               and the suites that exercise memory, no
#                               Java, Rust or Go
#   scripts/build.sh torch2     build-torch2/: the second leg, PyPI's torch
#                               2.x on pyenv's CPython 3.12, from the venv
#                               that scripts/setup_torch2.sh makes (or
#                               finds): what its suites run
#   scripts/build.sh demo       build/: only the demo (manypy_demo, the
#                               library, the interpreter side, the archives);
#                               a new build/ is configured without tests,
#                               bindings or benchmarks
# Several may be given: scripts/build.sh main sanitize. With --suites, main
# builds what its ctest entries run (target manypy_suites_full) instead of
# everything; sanitize and torch2 always build only their suites
# (cmake/testing.cmake, MANYPY_TEST_SELECTION).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

suites=0
if [[ "${1:-}" == --suites ]]; then
  suites=1
  shift
fi

# Clang builds: -O1 and line tables only, which compile much faster than
# RelWithDebInfo's -O2 -g and still give sanitizer reports file:line.
# NDEBUG as libtorch was built: some of its headers' classes have members
# only without it (RecordFunction::inputs_valid_), so code compiled without
# NDEBUG disagrees with libtorch about their layout.
clang_flags=(
  -DCMAKE_BUILD_TYPE=RelWithDebInfo
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG"
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG"
  -DMANYPY_BUILD_JAVA=OFF -DMANYPY_BUILD_BENCH=OFF
)

# ccache, which scripts/setup.sh installs: the test command builds three
# trees, and CI builds them in a new clone each time. Paths are made
# relative to the clone (CCACHE_BASEDIR) and its directory kept out of the
# hash (CCACHE_NOHASHDIR), so a new clone of the same sources hits the
# cache; the torch 2.x tree's objects are large, hence the size.
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-20G}"
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
# The Rust binding's cargo target directory, <build>/cargo, is a link into
# the machine's cache, one per leg, so that a new clone (CI's) reuses the
# compiled third-party crates; cargo rebuilds the workspace's own crates,
# whose fingerprints name the clone's paths. A tree whose cargo directory
# is a real one keeps it.
cargo_target() {  # <build dir> <leg>
  local shared="${XDG_CACHE_HOME:-$HOME/.cache}/manypy/cargo-target/$2"
  mkdir -p "$shared" "$1"
  [[ -e "$1/cargo" || -L "$1/cargo" ]] || ln -s "$shared" "$1/cargo"
}

# The project's own C and C++ compile with warnings as errors in every tree
# these scripts make (MANYPY_WERROR; third-party headers are system headers).
common=(-G Ninja "${launcher[@]}" -DMANYPY_WERROR=ON)

build_one() {
  case "$1" in
    main)
      local build="${MANYPY_BUILD_DIR:-$root/build}"
      cargo_target "$build" main
      cmake -S "$root" -B "$build" "${common[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DMANYPY_BUILD_TESTS=ON -DMANYPY_BUILD_JAVA=ON -DMANYPY_BUILD_RUST=ON \
        -DMANYPY_BUILD_GO=ON -DMANYPY_BUILD_BENCH=ON -DMANYPY_TEST_SELECTION=full >/dev/null
      if ((suites)); then
        cmake --build "$build" --target manypy_suites_full
      else
        cmake --build "$build"
      fi
      ;;
    demo)
      local build="${MANYPY_BUILD_DIR:-$root/build}"
      if [[ ! -f "$build/CMakeCache.txt" ]]; then
        # Nothing but the demo needs configuring: no test framework, JDK,
        # cargo or Go is looked for (scripts/setup.sh --demo installs less).
        cmake -S "$root" -B "$build" "${common[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
          -DMANYPY_BUILD_TESTS=OFF -DMANYPY_BUILD_JAVA=OFF -DMANYPY_BUILD_RUST=OFF \
          -DMANYPY_BUILD_GO=OFF -DMANYPY_BUILD_BENCH=OFF >/dev/null
      fi
      cmake --build "$build" --target manypy_demo
      ;;
    sanitize)
      local build="${MANYPY_SANITIZE_BUILD_DIR:-$root/build-sanitize}"
      cmake -S "$root" -B "$build" "${common[@]}" "${clang_flags[@]}" \
        -DMANYPY_SANITIZE=address,undefined -DMANYPY_FUZZ=ON -DMANYPY_BUILD_TESTS=ON \
        -DMANYPY_TEST_SELECTION=memory >/dev/null
      cmake --build "$build" --target manypy_fuzz manypy_suites_memory
      ;;
    torch2)
      local build="${MANYPY_TORCH2_BUILD_DIR:-$root/build-torch2}"
      local venv
      venv="$("$root/scripts/setup_torch2.sh")"
      cargo_target "$build" torch2
      cmake -S "$root" -B "$build" "${common[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DMANYPY_PYTHON="$venv/bin/python" -DMANYPY_TEST_SELECTION=leg2 >/dev/null
      cmake --build "$build" --target manypy_suites_leg2
      ;;
    *)
      echo "usage: scripts/build.sh [--suites] [main|sanitize|torch2|demo]..." >&2
      exit 2
      ;;
  esac
}

if (($# == 0)); then set -- main; fi
for what in "$@"; do build_one "$what"; done
