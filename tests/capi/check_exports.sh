#!/bin/sh
# Fails unless every defined dynamic symbol of libmanypy.so starts with
# manypy_, every function the public header declares (MANYPY_API) is
# exported, every export carries exactly the version node the version
# script gives it (the node of the release that added it: by name, or the
# oldest node's manypy_* pattern), the script's newest node is the header's
# version (MANYPY_0.3 for manypy.h's 0.3.x) and inherits each older one,
# and the SONAME names the header's ABI (libmanypy.so.0.3). The ABI comes
# from the header's version macros: while the major is 0 it is major.minor,
# from 1.0 on the major (docs/c-api.md, "ABI and versions").
# usage: check_exports.sh <path to libmanypy.so> <path to manypy.h> <path to manypy.map>
set -u
lib=$1
header=$2
map=$3
symbols=$(mktemp)
nodes=$(mktemp)
trap 'rm -f "$symbols" "$nodes"' EXIT
if ! nm -D --defined-only "$lib" >"$symbols"; then
  echo "FAIL: nm -D --defined-only $lib failed"
  exit 1
fi
status=0

macro() { sed -n "s/^#define MANYPY_VERSION_$1 \([0-9][0-9]*\)\$/\1/p" "$header"; }
major=$(macro MAJOR)
minor=$(macro MINOR)
if [ -z "$major" ] || [ -z "$minor" ]; then
  echo "FAIL: no MANYPY_VERSION_MAJOR/MINOR in $header"
  exit 1
fi
if [ "$major" -eq 0 ]; then
  abi="$major.$minor"
  newest_expected="MANYPY_$abi"
else
  abi="$major"
  if [ "$minor" -eq 0 ]; then newest_expected="MANYPY_$major"; else newest_expected="MANYPY_$major.$minor"; fi
fi
soname_expected="libmanypy.so.$abi"

# The version script without its comments, as lines "node <name> <parent>"
# (parent "-" for none) and "name <node> <symbol>" for symbols it lists by
# name; patterns (manypy_*, *) are left out.
perl -0777 -pe 's{/\*.*?\*/}{}gs' "$map" | awk '
  /^[ \t]*[A-Za-z0-9_.]+[ \t]*\{/ { node = $1; sub(/\{.*/, "", node); next }
  /^[ \t]*\}/ { parent = $0; sub(/^[ \t]*\}[ \t]*/, "", parent); sub(/[ \t]*;.*/, "", parent);
                print "node", node, (parent == "" ? "-" : parent); node = ""; next }
  node != "" && /;/ && !/:/ && !/\*/ { name = $1; sub(/;.*/, "", name); print "name", node, name }
' >"$nodes"
oldest=$(awk '$1 == "node" { print $2; exit }' "$nodes")
newest=$(awk '$1 == "node" { n = $2 } END { print n }' "$nodes")
if [ -z "$oldest" ]; then
  echo "FAIL: no version node in $map"
  exit 1
fi
if [ "$newest" != "$newest_expected" ]; then
  echo "FAIL: the newest version node of $map is $newest; manypy.h is $major.$minor, so $newest_expected"
  status=1
fi
# Each node but the oldest inherits the one before it.
inheritance=$(awk '$1 == "node" { if (prev != "" && $3 != prev) print $2 " inherits " $3 ", not " prev; prev = $2 }' "$nodes")
if [ -n "$inheritance" ]; then
  echo "FAIL: version nodes out of order: $inheritance"
  status=1
fi
all_nodes=$(awk '$1 == "node" { print $2 }' "$nodes")

# Lines are "<address> <type> <name>[@@VERSION]". Each version node itself
# is listed as an absolute symbol named after it: not an export.
exports=$(awk -v nodes="$all_nodes" '
  BEGIN { n = split(nodes, list, "\n"); for (k = 1; k <= n; k++) is_node[list[k]] = 1 }
  NF >= 3 && !($2 == "A" && ($3 in is_node)) { print $3 }' "$symbols" | sort -u)
names=$(printf '%s\n' "$exports" | sed 's/@.*//' | sort -u)
count=$(printf '%s\n' "$names" | grep -c .)
echo "$count defined dynamic symbols in $lib"
offenders=$(printf '%s\n' "$names" | grep -v '^manypy_' | grep .)
if [ -n "$offenders" ]; then
  echo "FAIL: defined dynamic symbols without the manypy_ prefix:"
  printf '  %s\n' $offenders
  status=1
fi
declared=$(grep -o '^MANYPY_API[^(]*(' "$header" | sed 's/($//; s/.*[ *]//' | sort -u)
if [ -z "$declared" ]; then
  echo "FAIL: no MANYPY_API declarations found in $header"
  status=1
fi
for name in $declared; do
  if ! printf '%s\n' "$names" | grep -qx "$name"; then
    echo "FAIL: $name is declared in manypy.h but not exported"
    status=1
  fi
done
for name in $(printf '%s\n' "$names" | grep '^manypy_'); do
  if ! printf '%s\n' "$declared" | grep -qx "$name"; then
    echo "FAIL: $name is exported but not declared in manypy.h"
    status=1
  fi
done
# A name the script lists that manypy.h does not declare is a typo, which
# would leave the function it meant in the oldest node.
for name in $(awk '$1 == "name" { print $3 }' "$nodes"); do
  if ! printf '%s\n' "$declared" | grep -qx "$name"; then
    echo "FAIL: $map lists $name, which manypy.h does not declare"
    status=1
  fi
done

# Symbol versions: "name@@NODE" (the default version) with the node the
# script gives the name, and nothing else.
for export in $(printf '%s\n' "$exports" | grep '^manypy_'); do
  name=${export%%@*}
  node=$(awk -v name="$name" '$1 == "name" && $3 == name { print $2; exit }' "$nodes")
  [ -n "$node" ] || node=$oldest
  if [ "$export" != "$name@@$node" ]; then
    echo "FAIL: $export should carry exactly the version node $node ($name@@$node)"
    status=1
  fi
done

soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]$/\1/p')
if [ "$soname" != "$soname_expected" ]; then
  echo "FAIL: SONAME is '$soname', expected $soname_expected (manypy.h is $major.$minor)"
  status=1
fi

if [ "$status" -eq 0 ]; then
  added=$(awk -v n="$newest" '$1 == "name" && $2 == n' "$nodes" | grep -c .)
  echo "PASS: $(printf '%s\n' "$declared" | grep -c .) public functions exported, nothing else;" \
       "$added @@$newest, the rest by their release ($(printf '%s ' $all_nodes | sed 's/ $//'));" \
       "SONAME $soname"
fi
exit "$status"
