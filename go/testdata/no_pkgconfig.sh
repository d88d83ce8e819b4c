#!/bin/sh
# A go build of the binding on a machine where pkg-config finds no
# manypy.pc must fail saying so, naming manypy.pc and PKG_CONFIG_PATH (the
# message is pkg-config's, through cgo's `#cgo pkg-config: manypy`;
# docs/go.md, "Installing", says what to do). Fails if the build succeeds
# or fails for another reason (a #cgo LDFLAGS: -lmanypy instead would fail
# on manypy.h, without naming manypy.pc).
# usage: no_pkgconfig.sh <go module dir>
set -eu
fail() { echo "FAIL: $*"; exit 1; }
[ $# -eq 1 ] || fail "usage: $0 <go module dir>"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/empty"
unset PKG_CONFIG_PATH
# pkg-config searches only an empty directory: no system manypy.pc either.
export PKG_CONFIG_LIBDIR="$tmp/empty"
# Go's build cache does not run pkg-config again for a package it has
# built with the same CGO_* flags, so a flag of this run's own makes it
# build (and ask pkg-config) instead of reusing an earlier build.
export CGO_CFLAGS="-g -O2 -DMANYPY_NO_PKGCONFIG_CHECK=$$$(date +%s%N)"
if (cd "$1" && go build -o "$tmp/out" .) >"$tmp/log" 2>&1; then
  cat "$tmp/log"
  fail "go build succeeded with no manypy.pc to be found"
fi
cat "$tmp/log"
grep -qF "manypy.pc" "$tmp/log" || fail "the build failed without naming manypy.pc"
grep -qF "PKG_CONFIG_PATH" "$tmp/log" || fail "the build failed without naming PKG_CONFIG_PATH"
echo "go build without manypy.pc fails naming manypy.pc and PKG_CONFIG_PATH"
