#!/bin/sh
# The Go binding against an installed manypy: installs the build into a
# fresh temporary prefix, builds go/internal/installcheck with only the
# prefix's manypy.pc on PKG_CONFIG_PATH (and an rpath to its lib/, as a
# service would set), runs it, and checks from the loader's log that
# libmanypy.so came from the prefix.
# usage: install_build.sh <build dir> <go module dir>
set -eu
fail() { echo "FAIL: $*"; exit 1; }
[ $# -eq 2 ] || fail "usage: $0 <build dir> <go module dir>"
build=$(realpath "$1")
module=$(realpath "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" ||
  { cat "$tmp/install.log"; fail "cmake --install $build --prefix $prefix"; }
unset LD_LIBRARY_PATH
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
pkg-config --libs manypy | grep -qF "$prefix" || fail "pkg-config does not find $prefix's manypy.pc"
export CGO_LDFLAGS="-Wl,-rpath,$prefix/lib"
(cd "$module" && go build -o "$tmp/installcheck" ./internal/installcheck) ||
  fail "go build against $prefix"
LD_DEBUG=libs LD_DEBUG_OUTPUT="$tmp/ld" "$tmp/installcheck" || fail "installcheck failed"
grep -h "calling init: .*libmanypy.so" "$tmp"/ld.* | grep -qF "$prefix/lib/libmanypy.so" ||
  { grep -h "libmanypy.so" "$tmp"/ld.* | head; fail "libmanypy.so was not loaded from $prefix"; }
if grep -h "calling init: .*libmanypy.so" "$tmp"/ld.* | grep -qF "$build"; then
  fail "libmanypy.so was loaded from the build tree"
fi
echo "the Go binding built and ran against $prefix"
