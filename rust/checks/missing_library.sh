#!/usr/bin/env bash
# ctest rust_missing_library: manypy-sys's build script where there is no
# libmanypy to find.
#   rust/checks/missing_library.sh <build dir>
# 1. Neither MANYPY_LIB_DIR nor pkg-config finds it: the build must fail
#    with a message that says how to fix it (manypy.pc, PKG_CONFIG_PATH,
#    MANYPY_LIB_DIR, libmanypy-dev).
# 2. MANYPY_LIB_DIR names a directory without the library: it must fail
#    and name that directory.
# 3. docs.rs (DOCS_RS=1), which has no libmanypy: the docs must build.
# pkg-config is kept from every directory it searches (PKG_CONFIG_LIBDIR
# empty), so a libmanypy-dev on this machine makes no difference. Its own
# target directory: the changed environment would otherwise make cargo
# rebuild the workspace's.
set -euo pipefail

if (($# != 1)); then
  echo "usage: rust/checks/missing_library.sh <build dir>" >&2
  exit 2
fi
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "$1" && pwd)"
cargo="${CARGO:-cargo}"
fail() { echo "rust_missing_library: FAILED: $*" >&2; exit 1; }

nowhere="$build/rust-missing-library"
mkdir -p "$nowhere/empty"
unset MANYPY_LIB_DIR MANYPY_INCLUDE_DIR PKG_CONFIG_PATH DOCS_RS
export CARGO_TARGET_DIR="$nowhere/target" PKG_CONFIG_LIBDIR="$nowhere/empty"
check=("$cargo" check --manifest-path "$root/rust/Cargo.toml" --locked -p manypy-sys)

# Expects the build to fail; prints its output and checks it names $@.
expect_failure() {
  local what="$1" output
  shift
  if output="$("$@" 2>&1)"; then
    fail "$what: the build passed"
  fi
  grep -qF "manypy-sys: cannot find libmanypy" <<<"$output" || { echo "$output" >&2; fail "$what: not manypy-sys's message"; }
  # Our own words: the message from its start, or (in_advice) only the
  # advice after the reason, which quotes the pkg-config crate's error
  # (naming manypy.pc and PKG_CONFIG_PATH itself).
  local ours="${output#*manypy-sys: cannot find libmanypy}"
  if [[ -n "$in_advice" ]]; then ours="${ours#*Tell the build where it is}"; fi
  for word in "${needed[@]}"; do
    grep -qF -- "$word" <<<"$ours" || { echo "$output" >&2; fail "$what: the message does not name $word"; }
  done
  echo "rust_missing_library: $what: the build stops and names ${needed[*]}"
}

needed=(manypy.pc PKG_CONFIG_PATH MANYPY_LIB_DIR libmanypy-dev) in_advice=1
expect_failure "no library anywhere" "${check[@]}"

needed=("MANYPY_LIB_DIR=$nowhere/empty holds no libmanypy.so") in_advice=
expect_failure "MANYPY_LIB_DIR without the library" env MANYPY_LIB_DIR="$nowhere/empty" "${check[@]}"

DOCS_RS=1 RUSTDOCFLAGS="-D warnings" "$cargo" doc --manifest-path "$root/rust/Cargo.toml" --locked \
  --no-deps --features manypy/ndarray -p manypy-sys -p manypy ||
  fail "docs.rs (DOCS_RS=1): the docs did not build without libmanypy"
echo "rust_missing_library: with DOCS_RS=1 the docs build without libmanypy"
