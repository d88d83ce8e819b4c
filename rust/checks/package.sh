#!/usr/bin/env bash
# ctest rust_package: the crates stay publishable and documented.
#   rust/checks/package.sh <build dir>
# Runs scripts/package/crates.sh (cargo package --locked: each crate built as
# unpacked, manypy against the packaged manypy-sys, manypy-prometheus
# against both) into <build>/rust-package,
# checks what it wrote, then cargo doc with warnings denied. The packaging
# has a target directory of its own (<build>/cargo-package: crates.sh says
# why); cargo doc reuses the build's.
set -euo pipefail

if (($# != 1)); then
  echo "usage: rust/checks/package.sh <build dir>" >&2
  exit 2
fi
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "$1" && pwd)"
cargo="${CARGO:-cargo}"
fail() { echo "rust_package: FAILED: $*" >&2; exit 1; }

dist="$build/rust-package"
"$root/scripts/package/crates.sh" "$build" "$dist"

crates="$dist/crates"
for name in manypy-sys manypy manypy-prometheus; do
  crate="$(echo "$crates/$name"-[0-9]*.crate)"
  dir="$crates/vendor/$(basename "$crate" .crate)"
  [[ -f "$crate" && -d "$dir" ]] || fail "crates.sh wrote no $name crate and directory"
  sha="$(sha256sum "$crate" | cut -d' ' -f1)"
  grep -q "\"package\":\"$sha\"" "$dir/.cargo-checksum.json" ||
    fail "$dir/.cargo-checksum.json does not give $crate's sha256 ($sha)"
  # The LICENSE symlink must arrive as the file itself.
  for file in LICENSE README.md src/lib.rs build.rs; do
    [[ -f "$dir/$file" && ! -L "$dir/$file" && -s "$dir/$file" ]] || fail "$crate lacks $file"
  done
  for key in license description repository readme keywords categories rust-version; do
    grep -q "^$key = " "$dir/Cargo.toml" || fail "$crate's Cargo.toml has no $key"
  done
done
# manypy depends on manypy-sys by version, and manypy-prometheus on both,
# as the registry needs: cargo drops a path and keeps the version, or
# refuses a path alone.
depends_by_version() {
  local manifest
  manifest="$(echo "$crates"/vendor/"$1"-[0-9]*/Cargo.toml)"
  grep -A2 "^\[dependencies.$2\]" "$manifest" | grep -q '^version = "' ||
    fail "$manifest: $2 has no version"
}
depends_by_version manypy manypy-sys
depends_by_version manypy-prometheus manypy
depends_by_version manypy-prometheus manypy-sys
echo "rust_package: the three crates packaged, with their metadata, LICENSE and checksums"

CARGO_TARGET_DIR="$build/cargo" PKG_CONFIG_PATH="$build/pkgconfig" RUSTDOCFLAGS="-D warnings" \
  "$cargo" doc --manifest-path "$root/rust/Cargo.toml" --locked --no-deps --all-features \
  -p manypy-sys -p manypy -p manypy-prometheus
echo "rust_package: cargo doc passed with warnings denied"
