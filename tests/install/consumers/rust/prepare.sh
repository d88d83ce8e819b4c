#!/usr/bin/env bash
# On the host, with the network, before the clean root is entered:
#   prepare.sh <dist dir> <prep dir>
# vendors the third-party crates the consumer needs besides manypy's own
# (manypy-sys's build dependency pkg-config, ...) into <prep dir>/vendor, a
# Cargo directory source that run.sh joins with <dist dir>/crates/vendor.
# `cargo vendor` resolves the consumer's manifest with manypy and manypy-sys
# patched to the packaged crates, so it fetches exactly what they depend on
# and leaves them out (it vendors no path crates). Done again only when what
# decides the result changes: the packaged crates' manifests (their
# dependencies), the consumer's manifest or this script.
set -euo pipefail

if (($# != 2)); then
  echo "usage: prepare.sh <dist dir> <prep dir>" >&2
  exit 2
fi
here="$(cd "$(dirname "$0")" && pwd)"
crates="$(cd "$1" && pwd)/crates"
prep="$(mkdir -p "$2" && cd "$2" && pwd)"
cargo="$(command -v cargo || echo "$HOME/.cargo/bin/cargo")"

shopt -s nullglob
packaged=("$crates"/vendor/manypy-[0-9]* "$crates"/vendor/manypy-sys-[0-9]*)
if ((${#packaged[@]} != 2)); then
  echo "prepare.sh: $crates/vendor should hold one manypy and one manypy-sys: run scripts/package/crates.sh first" >&2
  exit 1
fi

key="$(cat "${packaged[0]}/Cargo.toml" "${packaged[1]}/Cargo.toml" "$here/Cargo.toml" "$0" |
  sha256sum | cut -d' ' -f1)"
if [[ -d "$prep/vendor" && "$(cat "$prep/key" 2>/dev/null)" == "$key" ]]; then
  echo "prepare.sh: $prep/vendor is up to date"
  exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -r "$here/Cargo.toml" "$here/src" "$work/"
rm -rf "$prep/vendor" "$prep/key"
"$cargo" vendor --manifest-path "$work/Cargo.toml" --versioned-dirs \
  --config "patch.crates-io.manypy.path='${packaged[0]}'" \
  --config "patch.crates-io.manypy-sys.path='${packaged[1]}'" \
  --quiet "$work/vendor" >/dev/null
mv "$work/vendor" "$prep/vendor"
echo "$key" > "$prep/key"
echo "prepare.sh: vendored into $prep/vendor: $(cd "$prep/vendor" && echo *)"
