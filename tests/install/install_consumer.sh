#!/bin/sh
# Installs manypy into a fresh temporary prefix, then builds and runs the
# consumer sample (samples/consumer) against that prefix only: with CMake
# (find_package) and with the pkg-config one-liner. The build and source
# trees are made unreachable for that part: it runs in a private mount
# namespace with an empty read-only tmpfs over both (consumer_in_namespace.sh),
# so any access to them fails. Then checks, from the loader's own log, that
# libmanypy and its private libraries were loaded from the prefix.
# Given a tarball (the second leg's CPack TGZ, scripts/package.sh), the
# prefix is that tarball unpacked instead, and the interpreters use the
# Python environment named at run time by MANYPY_PYTHON_HOME (which must be
# set): the tarball is relocatable, its Python is the user's.
# Needs root (unshare --mount); without it the test fails, it never skips.
# usage: install_consumer.sh <build dir> <source dir> <expected version> [<tarball>]
set -eu
fail() { echo "FAIL: $*"; exit 1; }

[ $# -eq 3 ] || [ $# -eq 4 ] ||
  fail "usage: $0 <build dir> <source dir> <expected version> [<tarball>]"
build=$(realpath "$1")
source=$(realpath "$2")
version=$3
tarball=${4:-}
here=$(dirname "$(realpath "$0")")

if [ "$(id -u)" -ne 0 ]; then
  fail "must run as root: it hides the build tree with unshare --mount and a tmpfs" \
       "(CI runs as root); without that the test could not prove the tree is unused"
fi
command -v unshare >/dev/null || fail "unshare (util-linux) not found"

tmp=$(realpath "$(mktemp -d)")
trap 'rm -rf "$tmp"' EXIT
case "$tmp/" in
  "$build"/*|"$source"/*) fail "the temporary directory $tmp is inside the trees it must hide" ;;
esac
prefix=$tmp/prefix

# The host environment manypy needs (scripts/env.sh), and nothing that
# could point anywhere but the prefix.
case "${GLIBC_TUNABLES:-}" in
  *optional_static_tls*) ;;
  *) GLIBC_TUNABLES="${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.rtld.optional_static_tls=16384"
     export GLIBC_TUNABLES ;;
esac
unset MANYPY_INTERP_LIBRARY MANYPY_HOOKS_LIBRARY LD_LIBRARY_PATH CMAKE_PREFIX_PATH PKG_CONFIG_PATH
if [ -n "$tarball" ]; then
  [ -n "${MANYPY_PYTHON_HOME:-}" ] || fail "a tarball's test needs MANYPY_PYTHON_HOME (its Python)"
  [ -f "$tarball" ] || fail "no tarball $tarball: run scripts/package.sh torch2"
  [ "$build/lib/libmanypy.so" -ot "$tarball" ] ||
    fail "$tarball is older than the build's libmanypy.so: run scripts/package.sh torch2"
  mkdir "$prefix"
  tar -xzf "$tarball" -C "$prefix" --strip-components=1 || fail "unpacking $tarball"
  echo "unpacked $tarball ($(du -k "$tarball" | cut -f1) KiB) into $prefix;" \
       "MANYPY_PYTHON_HOME=$MANYPY_PYTHON_HOME"
else
  unset MANYPY_PYTHON_HOME
  cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" ||
    { cat "$tmp/install.log"; fail "cmake --install $build --prefix $prefix"; }
fi
echo "installed into $prefix:"
(cd "$prefix" && find . ! -type d | sort | sed 's|^\./|  |')

# Nothing installed may name the build or source tree. Debug information
# does (file names for debuggers), so ELF files are checked without it; the
# jar is checked unpacked. A tree's path counts only as a whole name: a
# source tree /x/manypy is not named by /x/manypy-cache/venv, a path the
# torch 2.x library rightly carries when the cache is there.
as_whole_name() {  # <path>: an extended regex matching it, not a longer name
  printf '%s([^A-Za-z0-9._+-]|$)' "$(printf '%s' "$1" | sed 's/[][\.*^$+?(){}|/]/\\&/g')"
}
tree_names="$(as_whole_name "$build")|$(as_whole_name "$source")"
names_a_tree() {  # <file or directory> <what it is>
  if grep -rqaE -e "$tree_names" "$1"; then fail "$2 names the build or source tree"; fi
}
mkdir "$tmp/check"
for file in $(find "$prefix" -type f); do
  case "$file" in
    *.jar) python3 -m zipfile -e "$file" "$tmp/check/jar"
           names_a_tree "$tmp/check/jar" "$file" ;;
    *) if [ "$(head -c 4 "$file" | tail -c 3)" = ELF ]; then
         objcopy --strip-debug "$file" "$tmp/check/stripped"
         names_a_tree "$tmp/check/stripped" "$file"
       else
         names_a_tree "$file" "$file"
       fi ;;
  esac
done
echo "no installed file names $build or $source"

# The part that must work without the trees. Its inputs are copied out first.
cp -r "$source/samples/consumer" "$tmp/consumer"
mkdir "$tmp/model"
cp "$build/archives/seed_example.pt" "$build/archives/seed_example.expected.out.bin" "$tmp/model/"
cp "$here/consumer_in_namespace.sh" "$tmp/"
unshare --mount --propagation private \
  sh "$tmp/consumer_in_namespace.sh" "$tmp" "$prefix" "$version" "$build" "$source" ||
  fail "building or running the consumer against $prefix (output above)"

# The tarball's interpreters use the Python that MANYPY_PYTHON_HOME names at
# run time: the venv's base Python, which has no torch, must be refused with
# the message that says so.
if [ -n "$tarball" ]; then
  base=$("$MANYPY_PYTHON_HOME/bin/python3" -c 'import sys; print(sys.base_prefix)')
  [ "$base" != "$MANYPY_PYTHON_HOME" ] || fail "$MANYPY_PYTHON_HOME is not a virtual environment"
  if out=$(MANYPY_PYTHON_HOME=$base "$tmp/consumer-cmake/consumer" 2>&1); then
    fail "the consumer ran with MANYPY_PYTHON_HOME=$base, a Python without torch: $out"
  fi
  case "$out" in
    *"the Python at $base cannot import torch"*) echo "MANYPY_PYTHON_HOME=$base: $out" ;;
    *) fail "with MANYPY_PYTHON_HOME=$base (no torch) the error does not say so: $out" ;;
  esac
fi

# Where the loader found manypy's libraries (LD_DEBUG=libs logs from the runs).
for way in cmake pkg-config; do
  log=$(ls "$tmp"/ld.$way.* 2>/dev/null | head -n 1)
  [ -n "$log" ] || fail "no loader log for the $way consumer"
  for lib in lib/libmanypy.so. lib/manypy/libmanypy_interp.so lib/manypy/libmanypy_hooks.so; do
    grep -qF "calling init: $prefix/$lib" "$log" ||
      fail "the $way consumer did not load $prefix/$lib; it loaded:" \
           "$(grep 'calling init: .*manypy' "$log")"
  done
  others=$(grep 'calling init: .*libmanypy' "$log" | grep -vF "calling init: $prefix/lib/" || true)
  [ -z "$others" ] || fail "the $way consumer loaded manypy libraries from elsewhere: $others"
  echo "the $way consumer loaded libmanypy.so, libmanypy_interp.so and libmanypy_hooks.so from $prefix/lib"
done
echo "PASS"
