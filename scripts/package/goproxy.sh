#!/usr/bin/env bash
# Writes the Go binding, module manypy.dev/manypy at the build's version,
# into <dist dir>/goproxy/: a directory in the module proxy protocol's
# layout, which `go` reads with GOPROXY=file://<dist dir>/goproxy
# (docs/go.md, "Installing"). Then proves the zip builds: a throwaway module
# gets manypy.dev/manypy from that directory alone and builds every package
# of it against the build tree.
#
# usage: scripts/package/goproxy.sh <build dir> <dist dir>
#
# The version is the build's (CMake's PROJECT_VERSION, as its pkg-config
# file gives it); the .info time is the commit's. The zip is made by
# scripts/package/goproxy (golang.org/x/mod/zip) from the files of go/ that
# git tracks or would add (not ignored ones, not a developer's leftovers),
# plus the repository's LICENSE, as the go command adds the root LICENSE to
# the zip of a module in a subdirectory.
set -euo pipefail
fail() { echo "goproxy.sh: $*" >&2; exit 1; }
[[ $# -eq 2 ]] || fail "usage: $0 <build dir> <dist dir>"
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(realpath "$1")"
mkdir -p "$2"
dist="$(realpath "$2")"
command -v go >/dev/null || PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || fail "no go on PATH (Go 1.24 or later is needed)"
# The toolchain found, never one the go.mod files could ask to download.
export GOTOOLCHAIN=local

[[ -f "$build/pkgconfig/manypy-uninstalled.pc" ]] ||
  fail "$build is not a manypy build tree (no pkgconfig/manypy-uninstalled.pc): run scripts/build.sh main"
# Only the build tree's pkg-config file: never an installed manypy's.
version="v$(PKG_CONFIG_LIBDIR= PKG_CONFIG_PATH="$build/pkgconfig" pkg-config --modversion manypy)"
stamp="$(git -C "$root" log -1 --format=%cI)"
[[ -f "$root/LICENSE" ]] || fail "no LICENSE at $root: the module zip must carry one"
if [[ -n "$(git -C "$root" status --porcelain -- go)" ]]; then
  echo "goproxy.sh: note: go/ has uncommitted changes; they are in the zip"
fi

tmp="$(mktemp -d)"
cleanup() {
  # The module cache's files are read-only; go clean removes them.
  if [[ -d "$tmp/mod" ]]; then GOMODCACHE="$tmp/mod" go clean -modcache || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# The module's files: tracked, or new and not ignored; not deleted ones.
stage="$tmp/stage"
mkdir -p "$stage"
(cd "$root/go" && git ls-files -z --cached --others --exclude-standard . |
  while IFS= read -r -d '' f; do [[ -e "$f" ]] && printf '%s\0' "$f"; done |
  xargs -0 cp --parents -t "$stage")
[[ -e "$stage/LICENSE" ]] || cp "$root/LICENSE" "$stage/LICENSE"

# The tool, pinned by its own go.mod and go.sum.
(cd "$root/scripts/package/goproxy" && GOFLAGS=-mod=readonly go build -o "$tmp/goproxy" .)
"$tmp/goproxy" -dir "$stage" -version "$version" -time "$stamp" -out "$dist/goproxy"

# The proof: a module with only the proxy directory for manypy, in a fresh
# module cache. Third-party modules come from the host's module cache when
# it has them, otherwise from the default proxy; they are checked against
# the module's own go.sum (see tests/install/consumers/go/run.sh).
echo "goproxy.sh: building manypy.dev/manypy@$version from $dist/goproxy against $build"
check="$tmp/check"
mkdir -p "$check"
cat >"$check/go.mod" <<'EOF'
module example.com/goproxycheck

go 1.24
EOF
cp "$root/go/go.sum" "$check/go.sum"
host_cache="$(go env GOMODCACHE)/cache/download"
default_proxy="$(go env GOPROXY)"
(
  cd "$check"
  # The build cache is the host's: it is keyed by the files' contents, so a
  # file missing from the zip still fails the build.
  export GOMODCACHE="$tmp/mod" GOFLAGS=-mod=mod
  export GOPROXY="file://$dist/goproxy,file://$host_cache,$default_proxy"
  export GONOSUMDB=manypy.dev/manypy
  export PKG_CONFIG_LIBDIR= PKG_CONFIG_PATH="$build/pkgconfig"
  go get "manypy.dev/manypy@$version"
  go build "manypy.dev/manypy/..."
  go list -m manypy.dev/manypy
) || fail "manypy.dev/manypy@$version does not build from $dist/goproxy"
echo "goproxy.sh: $dist/goproxy holds manypy.dev/manypy@$version, and it builds"
