#!/bin/sh
# Runs on the host, with network, before the clean root is entered: fills
# <prep dir>/m2 with a Maven local repository holding every plugin and
# library the consumer's offline build (run.sh, mvn -o) needs, except manypy
# itself, which run.sh takes from /dist/maven. It does so by building the
# consumer once, online, against the manypy of <dist dir>/maven, in a copy
# of this directory (the source tree is never written).
# Idempotent: keyed by the consumer's pom.xml and this script; when the key
# matches, it does nothing.
# usage: prepare.sh <dist dir> <prep dir>
set -eu
fail() { echo "java prepare.sh: $*" >&2; exit 1; }
[ $# -eq 2 ] || fail "usage: $0 <dist dir> <prep dir>"
dist=$(realpath "$1")
mkdir -p "$2"
prep=$(realpath "$2")
here=$(dirname "$(realpath "$0")")
published=$dist/maven/org/manypy/manypy
[ -d "$published" ] || fail "$published is missing: run scripts/package/maven.sh <build> $dist first"

key=$(cat "$here/pom.xml" "$0" | sha256sum | cut -d' ' -f1)
if [ -d "$prep/m2" ] && [ "$(cat "$prep/key" 2>/dev/null)" = "$key" ]; then
  echo "java prepare.sh: $prep/m2 is up to date"
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rm -rf "$prep/m2" "$prep/key"
mkdir -p "$prep/m2/org/manypy"
cp -r "$published" "$prep/m2/org/manypy/"
cp -r "$here/pom.xml" "$here/src" "$tmp/"
(cd "$tmp" && mvn -B -q -Dmaven.repo.local="$prep/m2" package) ||
  fail "the online build of the consumer failed (output above)"
# manypy comes from /dist only: a stale copy here must never stand in for it.
rm -rf "$prep/m2/org/manypy"
echo "$key" >"$prep/key"
echo "java prepare.sh: $prep/m2 holds $(du -sh "$prep/m2" | cut -f1) of plugins and libraries"
