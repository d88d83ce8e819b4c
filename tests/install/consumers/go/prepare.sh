#!/usr/bin/env bash
# Runs on the host, with network, before the clean root is entered: puts
# into <prep dir>/goproxy the third-party modules that run.sh's build needs
# besides manypy (client_golang and its dependencies, as manypy's go.mod
# and go.sum pin them), in the module proxy layout: a Go module cache's
# cache/download directory, which run.sh reads with GOPROXY=file://.
#
# usage: prepare.sh <dist dir> <prep dir>
#
# It resolves them as run.sh will, from a copy of this module: manypy from
# <dist dir>/goproxy, the rest from the default module proxy, checked
# against manypy's go.sum and the checksum database. Idempotent: keyed by
# manypy's go.mod, this module, this script and the Go version, so that
# a second run with nothing changed returns at once.
set -euo pipefail
fail() { echo "prepare.sh: $*" >&2; exit 1; }
[[ $# -eq 2 ]] || fail "usage: $0 <dist dir> <prep dir>"
dist="$(realpath "$1")"
mkdir -p "$2"
prep="$(realpath "$2")"
here="$(cd "$(dirname "$0")" && pwd)"
command -v go >/dev/null || PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || fail "no go on PATH"
export GOTOOLCHAIN=local
proxy="$dist/goproxy/manypy.dev/manypy/@v"
[[ -f "$proxy/list" ]] || fail "no $proxy/list: run scripts/package/goproxy.sh first"

key="$(cat "$proxy"/*.mod "$here/go.mod" "$here/main.go" "$0" <(go version) | sha256sum | cut -d' ' -f1)"
if [[ -d "$prep/goproxy" && "$(cat "$prep/key" 2>/dev/null)" == "$key" ]]; then
  echo "prepare.sh: $prep/goproxy is up to date"
  exit 0
fi

default_proxy="$(go env GOPROXY)"
tmp="$(mktemp -d)"
cleanup() {
  GOMODCACHE="$tmp/mod" go clean -modcache 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
mkdir "$tmp/consumer"
cp "$here/go.mod" "$here/main.go" "$tmp/consumer/"
cd "$tmp/consumer"
export GOMODCACHE="$tmp/mod" GOFLAGS=-mod=mod GONOSUMDB=manypy.dev/manypy
export GOPROXY="file://$dist/goproxy,$default_proxy"
# Each version the dist holds (normally one), as run.sh gets it.
while read -r version; do
  moddir="$(go mod download -json "manypy.dev/manypy@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
  cp "$moddir/go.sum" go.sum
  go get "manypy.dev/manypy@$version"
  # Every module the build graph names, and the packages main.go imports.
  go mod download all
  go list -deps . >/dev/null
done <"$proxy/list"

# Only third-party modules: manypy itself comes from /dist.
rm -rf "$tmp/mod/cache/download/manypy.dev" "$tmp/mod/cache/download/sumdb"
rm -rf "$prep/goproxy.new"
cp -r "$tmp/mod/cache/download" "$prep/goproxy.new"
rm -rf "$prep/goproxy"
mv "$prep/goproxy.new" "$prep/goproxy"
echo "$key" >"$prep/key"
echo "prepare.sh: $prep/goproxy holds $(find "$prep/goproxy" -name '*.zip' | wc -l) module zips: $(cd "$prep/goproxy" && find . -name '*.zip' | sed 's|^\./||; s|/@v/| |; s|\.zip$||' | sort | tr '\n' ';')"
