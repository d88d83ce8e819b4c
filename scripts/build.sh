#!/usr/bin/env bash
# Configures and builds manypy (incremental on later runs).
#   scripts/build.sh            build/: the library, tests, samples, Java
#   scripts/build.sh fuzz       build-fuzz/: clang, ASan + UBSan, only the
#                               libFuzzer targets and what they link
#                               (tests/fuzz, docs/hardening.md)
#   scripts/build.sh sanitize   build-sanitize/: clang, the whole C/C++ side
#                               and its tests with MANYPY_SANITIZE (default
#                               undefined), no Java (docs/hardening.md)
#   scripts/build.sh torch2     build-torch2/: the second leg, everything as
#                               in build/ but on PyPI's torch 2.x and pyenv's
#                               CPython 3.12, from the venv that
#                               scripts/setup_torch2.sh makes (or finds)
# Several may be given: scripts/build.sh main fuzz.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

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

# ccache, which scripts/setup.sh installs: the test command builds four
# trees, and CI builds them in a new clone each time. Paths are made
# relative to the clone (CCACHE_BASEDIR) and its directory kept out of the
# hash (CCACHE_NOHASHDIR), so a new clone of the same sources hits the
# cache; the torch 2.x tree's objects are large, hence the size.
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-20G}"
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

build_one() {
  case "$1" in
    main)
      local build="${MANYPY_BUILD_DIR:-$root/build}"
      cmake -S "$root" -B "$build" -G Ninja "${launcher[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
      cmake --build "$build"
      ;;
    fuzz)
      local build="${MANYPY_FUZZ_BUILD_DIR:-$root/build-fuzz}"
      cmake -S "$root" -B "$build" -G Ninja "${launcher[@]}" "${clang_flags[@]}" -DMANYPY_BUILD_TESTS=OFF \
        -DMANYPY_FUZZ=ON -DMANYPY_SANITIZE=address,undefined >/dev/null
      cmake --build "$build" --target manypy_fuzz
      ;;
    sanitize)
      local build="${MANYPY_SANITIZE_BUILD_DIR:-$root/build-sanitize}"
      cmake -S "$root" -B "$build" -G Ninja "${launcher[@]}" "${clang_flags[@]}" \
        -DMANYPY_SANITIZE="${MANYPY_SANITIZE:-undefined}" >/dev/null
      cmake --build "$build"
      ;;
    torch2)
      local build="${MANYPY_TORCH2_BUILD_DIR:-$root/build-torch2}"
      local venv
      venv="$("$root/scripts/setup_torch2.sh")"
      cmake -S "$root" -B "$build" -G Ninja "${launcher[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DMANYPY_PYTHON="$venv/bin/python" >/dev/null
      cmake --build "$build"
      ;;
    *)
      echo "usage: scripts/build.sh [main|fuzz|sanitize|torch2]..." >&2
      exit 2
      ;;
  esac
}

if (($# == 0)); then set -- main; fi
for what in "$@"; do build_one "$what"; done
