#!/bin/sh
# The build tree's pkg-config file: with PKG_CONFIG_PATH=<build>/pkgconfig,
# pkg-config picks manypy-uninstalled.pc for "manypy", and the consumer
# sample builds and runs against the build tree without an install.
# usage: uninstalled_pkgconfig.sh <build dir> <source dir> <expected version>
set -eu
fail() { echo "FAIL: $*"; exit 1; }
build=$(realpath "$1")
source=$(realpath "$2")
version=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

export PKG_CONFIG_PATH="$build/pkgconfig"
got=$(pkg-config --modversion manypy) || fail "pkg-config finds no manypy in $PKG_CONFIG_PATH"
[ "$got" = "$version" ] || fail "pkg-config --modversion manypy is $got, expected $version"
includedir=$(pkg-config --variable=includedir manypy)
[ "$includedir" = "$source/capi/include" ] ||
  fail "pkg-config did not pick manypy-uninstalled.pc (includedir $includedir)"
flags=$(pkg-config --cflags --libs manypy)
echo "pkg-config --cflags --libs manypy: $flags"

# shellcheck disable=SC2086
cc "$source/samples/consumer/consumer.c" -o "$tmp/consumer" $flags -lm ||
  fail "building the consumer against the build tree"
out=$("$tmp/consumer") || fail "the consumer exited non-zero: $out"
echo "$out"
case "$out" in
  "manypy consumer: ok"*) echo "PASS" ;;
  *) fail "the consumer did not print its success line" ;;
esac
