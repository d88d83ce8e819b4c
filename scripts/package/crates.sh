#!/usr/bin/env bash
# Packages the Rust crates for installing by version (docs/rust.md,
# "Installing"):
#   scripts/package/crates.sh <build dir> <dist dir>
# writes <dist dir>/crates/:
#   manypy-sys-<v>.crate, manypy-<v>.crate   what `cargo publish` would upload
#   vendor/<name>-<v>/                        the same crates as a Cargo
#                                             directory source
# A consumer replaces the crates registry with vendor/ (plus its third-party
# crates) and resolves `manypy = "0.3"` by version, as from the registry
# (tests/install/consumers/rust).
#
# `cargo package` builds each crate as unpacked, against the build tree's
# libmanypy (its uninstalled pkg-config file), manypy against the packaged
# manypy-sys through a temporary registry. It runs with --allow-dirty: this
# is for testing a tree as it is (the crate's .cargo_vcs_info.json records
# that it was dirty). Publishing is `cargo publish`, which refuses a dirty
# tree.
set -euo pipefail

if (($# != 2)); then
  echo "usage: scripts/package/crates.sh <build dir> <dist dir>" >&2
  exit 2
fi
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "$1" && pwd)"
dist="$(mkdir -p "$2" && cd "$2" && pwd)"
manifest="$root/rust/Cargo.toml"

cargo="${CARGO:-$(command -v cargo || echo "$HOME/.cargo/bin/cargo")}"
if [[ ! -x "$cargo" ]]; then
  echo "crates.sh: no cargo on the PATH (nor in ~/.cargo/bin): install Rust 1.82 or later (rustup)" >&2
  exit 1
fi
if [[ ! -f "$build/pkgconfig/manypy-uninstalled.pc" ]]; then
  echo "crates.sh: $build/pkgconfig/manypy-uninstalled.pc is missing: give a built manypy build tree (scripts/build.sh)" >&2
  exit 1
fi

# The build tree's libmanypy for the verify builds, whatever the caller's
# environment says; the workspace's target directory, so they reuse its
# compiled dependencies.
export PKG_CONFIG_PATH="$build/pkgconfig" CARGO_TARGET_DIR="$build/cargo"
unset MANYPY_LIB_DIR MANYPY_INCLUDE_DIR
"$cargo" package --manifest-path "$manifest" --locked --allow-dirty -p manypy-sys -p manypy

out="$dist/crates"
rm -rf "$out"
mkdir -p "$out/vendor"
for name in manypy-sys manypy; do
  # `cargo pkgid` ends in #<version> for a workspace member.
  version="$("$cargo" pkgid --manifest-path "$manifest" -p "$name")"
  version="${version##*[#@]}"
  crate="$CARGO_TARGET_DIR/package/$name-$version.crate"
  cp "$crate" "$out/"
  tar -xzf "$crate" -C "$out/vendor"
  "$root/scripts/package/cargo_checksum.sh" "$out/vendor/$name-$version" "$crate"
done
echo "crates.sh: wrote $out:"
(cd "$out" && ls -1 ./*.crate vendor)
