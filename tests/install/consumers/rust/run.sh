#!/usr/bin/env bash
# Inside the clean root, offline (tests/install/clean_root.sh): builds this
# crate, which asks for `manypy = "0.3"` as any crate would, with the crates
# registry replaced by a directory source made of /dist/crates/vendor (the
# packaged manypy and manypy-sys) and /prep/vendor (their third-party
# dependencies, from prepare.sh). libmanypy comes from the Debian packages:
# manypy-sys finds manypy.pc where pkg-config looks, and the program finds
# libmanypy.so where the loader looks (it has no build.rs, no RUNPATH).
# Then it serves /model/seed_example.pt and checks every output.
set -euo pipefail

dist=/dist/crates prep=/prep/vendor model=/model
work=/tmp/manypy-rust-consumer
fail() { echo "rust consumer: FAILED: $*" >&2; exit 1; }

for dir in "$dist/vendor" "$prep"; do
  [[ -d "$dir" ]] || fail "$dir is missing (scripts/package/crates.sh and prepare.sh make it)"
done
[[ ! -e build.rs ]] || fail "the consumer must not have a build.rs: linking is the installed packages' job"

# A fresh CARGO_HOME: no registry cache, no config but ours.
rm -rf "$work"
mkdir -p "$work/cargo-home" "$work/sources"
export CARGO_HOME="$work/cargo-home" CARGO_TARGET_DIR="$work/target"
# One directory source holding both: the registry can be replaced by one
# source only. Cargo follows the links.
ln -s "$dist"/vendor/* "$prep"/* "$work/sources/"
cat > "$CARGO_HOME/config.toml" <<TOML
[source.crates-io]
replace-with = "manypy-install"

[source.manypy-install]
directory = "$work/sources"

[net]
offline = true
TOML
echo "rust consumer: crates available: $(cd "$work/sources" && echo *)"

rm -f Cargo.lock
cargo build --release
echo "rust consumer: built; dependency tree:"
cargo tree

# manypy came by version from the registry's stand-in, not by path: the
# lockfile records a registry source and the checksum of /dist's .crate.
crate="$(echo "$dist"/manypy-[0-9]*.crate)"
sha="$(sha256sum "$crate" | cut -d' ' -f1)"
entry="$(grep -A3 '^name = "manypy"$' Cargo.lock)"
grep -q '^source = "registry+' <<<"$entry" || fail "Cargo.lock has manypy from no registry: $entry"
grep -q "^checksum = \"$sha\"" <<<"$entry" || fail "Cargo.lock's manypy is not $crate (sha256 $sha): $entry"
echo "rust consumer: Cargo.lock: manypy $(sed -n 's/^version = "\(.*\)"$/\1/p' <<<"$entry") from the registry source, checksum of $(basename "$crate")"

"$CARGO_TARGET_DIR/release/manypy-install-consumer" \
  "$model/seed_example.pt" "$model/seed_example.expected.out.bin"
