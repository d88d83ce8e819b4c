#!/bin/sh
# Fails unless every defined dynamic symbol of libmanypy.so starts with
# manypy_, and every function the public header declares (MANYPY_API) is
# exported.
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
# Lines are "<address> <type> <name>"; strip any @VERSION suffix.
names=$(awk 'NF >= 3 { sub(/@.*/, "", $3); print $3 }' "$symbols" | sort -u)
count=$(printf '%s\n' "$names" | grep -c .)
echo "$count defined dynamic symbols in $lib"
status=0
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
if [ "$status" -eq 0 ]; then
  echo "PASS: $(printf '%s\n' "$declared" | grep -c .) public functions exported, nothing else"
fi
exit "$status"
