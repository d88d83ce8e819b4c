#!/usr/bin/env bash
# The Go consumer, run inside the clean root (tests/install/clean_root.sh)
# with no network: gets manypy.dev/manypy from the module proxy directory
# that scripts/package/goproxy.sh wrote (/dist/goproxy), its third-party
# modules from the one prepare.sh wrote (/prep/goproxy), builds this module
# through pkg-config against the installed libmanypy-dev (manypy.pc in the
# system's directory) and serves seed_example.pt (main.go).
#
# MANYPY_DIST, MANYPY_PREP and MANYPY_MODEL_DIR replace /dist, /prep and
# /model, to run it on a host against another install (then set
# PKG_CONFIG_PATH and LD_LIBRARY_PATH for it too).
set -euo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
dist="${MANYPY_DIST:-/dist}"
prep="${MANYPY_PREP:-/prep}"
model="${MANYPY_MODEL_DIR:-/model}"
here="$(cd "$(dirname "$0")" && pwd)"
command -v go >/dev/null || PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || fail "no go on PATH"
[[ -d "$dist/goproxy" ]] || fail "no $dist/goproxy: run scripts/package/goproxy.sh (scripts/package.sh)"
[[ -d "$prep/goproxy" ]] || fail "no $prep/goproxy: run prepare.sh <dist> <prep> first"

tmp="$(mktemp -d /tmp/manypy-go-consumer.XXXXXX)"
cleanup() {
  # The module cache's files are read-only; go clean removes them.
  GOMODCACHE="$tmp/gomodcache" go clean -modcache 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# Go as a service's build would run it, with nothing from the host: fresh
# caches, the bind-mounted toolchain only (never one a go.mod asks to
# download), the two proxy directories as the only module sources.
export GOTOOLCHAIN=local GOPATH="$tmp/gopath" GOMODCACHE="$tmp/gomodcache" GOCACHE="$tmp/gocache"
export GOPROXY="file://$dist/goproxy,file://$prep/goproxy"
export GOFLAGS=-mod=mod
# Checksums. manypy.dev/manypy is in no checksum database (the real one
# knows only public modules), so GONOSUMDB exempts it: its go.sum line is
# written from the zip as downloaded. Not GOPRIVATE=manypy.dev: that also
# sets GONOPROXY, and the go command would then skip the proxy and ask
# manypy.dev's server for the repository.
# The third-party modules are not exempt: instead of GOSUMDB=off, which
# would accept whatever /prep holds, this module's go.sum starts as
# manypy's own go.sum, the hashes its authors verified against the checksum
# database when they added the requirements, so the go command checks every
# third-party module against those and never needs the database (offline).
# A module missing from it makes the go command ask the database, which
# fails here: that is a finding, not something to switch off.
export GONOSUMDB=manypy.dev/manypy

echo "go: $(go version)"
version="v$(pkg-config --modversion manypy)" ||
  fail "pkg-config finds no manypy.pc: is libmanypy-dev installed?"
echo "pkg-config: manypy $version from $(pkg-config --variable=pcfiledir manypy)/manypy.pc: $(pkg-config --cflags --libs manypy)"
grep -qxF "$version" "$dist/goproxy/manypy.dev/manypy/@v/list" ||
  fail "$dist/goproxy has no manypy.dev/manypy $version (it lists: $(tr '\n' ' ' <"$dist/goproxy/manypy.dev/manypy/@v/list"))"

work="$tmp/consumer"
mkdir -p "$work"
cp "$here/go.mod" "$here/main.go" "$work/"
cd "$work"
grep -qE '^\s*replace\b' go.mod && fail "the consumer's go.mod must have no replace directive"

moddir="$(go mod download -json "manypy.dev/manypy@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
[[ -f "$moddir/go.sum" ]] || fail "manypy.dev/manypy@$version from $dist/goproxy has no go.sum (dir: '$moddir')"
cp "$moddir/go.sum" go.sum
echo "go.sum: seeded with the $(wc -l <go.sum) lines of manypy.dev/manypy@$version's go.sum"

go get "manypy.dev/manypy@$version"
grep -E '^(require )?\s*manypy.dev/manypy ' go.mod || fail "go get did not add manypy.dev/manypy to go.mod"
go build -o "$tmp/manypy-consumer" .
echo "built: $(ldd "$tmp/manypy-consumer" | grep -F libmanypy)"

"$tmp/manypy-consumer" -model "$model/seed_example.pt" \
  -expected "$model/seed_example.expected.out.bin" -goroutines 4 -calls 5 ||
  fail "serving seed_example.pt from Go"
echo "PASS: Go consumer (manypy.dev/manypy@$version from a module proxy directory)"
