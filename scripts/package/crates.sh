#!/usr/bin/env bash
# Packages the Rust crates for installing by version (docs/rust.md,
# "Installing"):
#   scripts/package/crates.sh <build dir> <dist dir>
# writes <dist dir>/crates/:
#   manypy-sys-<v>.crate, manypy-<v>.crate,   what `cargo publish` would upload
#   manypy-prometheus-<v>.crate
#   vendor/<name>-<v>/                        the same crates as a Cargo
#                                             directory source
# A consumer replaces the crates registry with vendor/ (plus its third-party
# crates) and resolves `manypy = "0.3"` by version, as from the registry
# (tests/install/consumers/rust). A crate of a directory source is read
# only when something depends on it: a consumer without manypy-prometheus
# needs none of its dependencies (the prometheus crate and what it brings).
#
# `cargo package` builds each crate as unpacked, against the build tree's
# libmanypy (its uninstalled pkg-config file), manypy against the packaged
# manypy-sys and manypy-prometheus against both through a temporary
# registry; the prometheus crate comes from the registry (or cargo's cache),
# pinned by the workspace's Cargo.lock. It runs with --allow-dirty: this
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
# environment says.
export PKG_CONFIG_PATH="$build/pkgconfig"
unset MANYPY_LIB_DIR MANYPY_INCLUDE_DIR
# The verify builds of manypy and manypy-prometheus take the packaged
# manypy-sys (and manypy) from a temporary local registry, and cargo takes a
# registry crate of a given version to be the same forever: it extracts it
# under $CARGO_HOME/registry/src/-<hash of the registry's path>/ only if
# that directory is missing, and a target directory that compiled it once
# never compiles it again. So a manypy-sys or manypy changed without a
# version bump (new bindings between releases) would be built from an older
# tree's copy. Hence: extractions whose sources differ from this tree's go,
# and the verify builds have a target directory of their own (its
# third-party crates stay compiled), from which every manypy crate's
# artifacts go.
cargo_home="${CARGO_HOME:-$HOME/.cargo}"
for name in manypy-sys manypy; do
  for extracted in "$cargo_home"/registry/src/-*/"$name"-[0-9]*/; do
    [[ -d "$extracted" ]] || continue
    if ! diff -rq "$extracted/src" "$root/rust/$name/src" >/dev/null 2>&1 ||
       ! cmp -s "$extracted/build.rs" "$root/rust/$name/build.rs"; then
      rm -rf "$extracted"
    fi
  done
done
export CARGO_TARGET_DIR="$build/cargo-package"
if [[ -d "$CARGO_TARGET_DIR/debug" ]]; then
  find "$CARGO_TARGET_DIR/debug" -maxdepth 2 -name '*manypy*' -exec rm -rf {} +
fi
crates=(manypy-sys manypy manypy-prometheus)
"$cargo" package --manifest-path "$manifest" --locked --allow-dirty \
  -p manypy-sys -p manypy -p manypy-prometheus

# Writes the .cargo-checksum.json that makes an unpacked crate a member of a
# Cargo directory source, as `cargo vendor` writes it:
#   cargo_checksum <unpacked crate dir> <its .crate file>
# "package" is the .crate's SHA-256, which lockfiles record for registry
# crates (so a lockfile made against the registry still matches); "files"
# maps each file to its SHA-256, which cargo checks before building. (cargo
# vendor does this only for crates it resolves from a registry, and ours
# are not published yet.)
cargo_checksum() {
  local dir="$1" package path files=()
  package="$(sha256sum "$2" | cut -d' ' -f1)"
  while IFS= read -r -d '' path; do
    path="${path#./}"
    # JSON strings as written here: a path with a quote, a backslash or a
    # control character would need escaping, and a crate of ours has none.
    if [[ "$path" =~ [\"\\[:cntrl:]] ]]; then
      echo "crates.sh: cannot quote the file name '$path' in JSON" >&2
      exit 1
    fi
    files+=("\"$path\":\"$(sha256sum "$dir/$path" | cut -d' ' -f1)\"")
  done < <(cd "$dir" && find . -type f ! -name .cargo-checksum.json -print0 | sort -z)
  (IFS=,; printf '{"files":{%s},"package":"%s"}\n' "${files[*]}" "$package") > "$dir/.cargo-checksum.json"
}

out="$dist/crates"
rm -rf "$out"
mkdir -p "$out/vendor"
for name in "${crates[@]}"; do
  # `cargo pkgid` ends in #<version> for a workspace member.
  version="$("$cargo" pkgid --manifest-path "$manifest" -p "$name")"
  version="${version##*[#@]}"
  crate="$CARGO_TARGET_DIR/package/$name-$version.crate"
  cp "$crate" "$out/"
  tar -xzf "$crate" -C "$out/vendor"
  cargo_checksum "$out/vendor/$name-$version" "$crate"
done
echo "crates.sh: wrote $out:"
(cd "$out" && ls -1 ./*.crate vendor)
