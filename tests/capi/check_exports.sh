#!/bin/sh
# Fails unless every defined dynamic symbol of libmanypy.so starts with
# manypy_, every function the public header declares (MANYPY_API) is
# exported, every export carries exactly the version node of the ABI
# (MANYPY_0.2 for manypy.h's 0.2.x), and the SONAME names the same ABI
# (libmanypy.so.0.2). The ABI comes from the header's version macros: while
# the major is 0 it is major.minor, from 1.0 on the major (docs/c-api.md).
# usage: check_exports.sh <path to libmanypy.so> <path to manypy.h>
set -u
lib=$1
header=$2
symbols=$(mktemp)
trap 'rm -f "$symbols"' EXIT
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
if [ "$major" -eq 0 ]; then abi="$major.$minor"; else abi="$major"; fi
node="MANYPY_$abi"
soname_expected="libmanypy.so.$abi"

# Lines are "<address> <type> <name>[@@VERSION]". The version node itself is
# listed as an absolute symbol named after it: not an export.
exports=$(awk -v node="$node" 'NF >= 3 && !($2 == "A" && $3 == node) { print $3 }' "$symbols" |
          sort -u)
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

# Symbol versions: "name@@MANYPY_0.2" (the default version) and nothing else.
unversioned=$(printf '%s\n' "$exports" | grep '^manypy_' | grep -v "^[^@]*@@$node\$")
if [ -n "$unversioned" ]; then
  echo "FAIL: exports without exactly the version node $node:"
  printf '  %s\n' $unversioned
  status=1
fi

soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]$/\1/p')
if [ "$soname" != "$soname_expected" ]; then
  echo "FAIL: SONAME is '$soname', expected $soname_expected (manypy.h is $major.$minor)"
  status=1
fi

if [ "$status" -eq 0 ]; then
  echo "PASS: $(printf '%s\n' "$declared" | grep -c .) public functions exported, nothing else;" \
       "each @@$node; SONAME $soname"
fi
exit "$status"
