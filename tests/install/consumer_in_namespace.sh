#!/bin/sh
# Run by install_consumer.sh in a private mount namespace: hides the build
# and source trees under an empty read-only tmpfs, checks that they are gone,
# then builds the consumer against the prefix both ways and runs both with
# the loader logging (LD_DEBUG=libs) to <tmp>/ld.<way>.<pid>.
# usage: consumer_in_namespace.sh <tmp> <prefix> <expected version> <build> <source>
set -eu
fail() { echo "FAIL: $*"; exit 1; }
tmp=$1 prefix=$2 version=$3 build=$4 source=$5

# A working directory inside a tree would keep it reachable under the mount.
cd "$tmp"
for tree in "$build" "$source"; do
  # The build tree may be inside the source tree, hidden already.
  [ -d "$tree" ] || continue
  mount -t tmpfs -o ro,size=4k manypy-hidden "$tree" || fail "cannot mount a tmpfs over $tree"
done
for tree in "$build" "$source"; do
  if [ -e "$tree" ] && [ -n "$(ls -A "$tree")" ]; then fail "$tree is still visible"; fi
done
for file in "$build/CMakeCache.txt" "$build/lib/libmanypy.so" "$source/capi/include/manypy.h"; do
  if [ -e "$file" ]; then fail "$file is still reachable"; fi
done
echo "build tree $build and source tree $source hidden (empty)"

export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
got=$(pkg-config --modversion manypy) || fail "pkg-config finds no manypy in $PKG_CONFIG_PATH"
[ "$got" = "$version" ] || fail "pkg-config --modversion manypy is $got, expected $version"
echo "pkg-config --modversion manypy: $got"

# CMake: find_package(manypy 0.3) through CMAKE_PREFIX_PATH, nothing else.
cmake -S consumer -B consumer-cmake -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF >cmake.log 2>&1 &&
  cmake --build consumer-cmake >>cmake.log 2>&1 ||
  { cat cmake.log; fail "the CMake build of the consumer"; }

# The one-liner of the sample's README, with the prefix's lib as RUNPATH.
# shellcheck disable=SC2046
cc consumer/consumer.c -o consumer-pkg-config $(pkg-config --cflags --libs manypy) -lm \
   -Wl,-rpath,"$prefix/lib" || fail "the pkg-config build of the consumer"

for way in cmake pkg-config; do
  case $way in
    cmake) program=consumer-cmake/consumer ;;
    pkg-config) program=./consumer-pkg-config ;;
  esac
  out=$(LD_DEBUG=libs LD_DEBUG_OUTPUT="$tmp/ld.$way" "$program") ||
    fail "the $way consumer exited non-zero: $out"
  echo "$way consumer: $out"
  case "$out" in
    "manypy consumer: ok"*) ;;
    *) fail "the $way consumer did not print its success line" ;;
  esac
done
# And serving a model (a torch.package), every output checked.
out=$(consumer-cmake/consumer model/seed_example.pt model/seed_example.expected.out.bin) ||
  fail "the consumer could not serve model/seed_example.pt: $out"
echo "$out"
