#!/usr/bin/env bash
# google-java-format, through Maven's Spotless plugin, on every Java file git
# tracks: the binding (java/), its benchmarks (bench/java), the samples
# (samples/java) and the install test's consumer. Spotless formats only
# files below its project's directory, and these lie in four trees, so the
# project is made in a temporary directory with the clone linked into it;
# the pom (java-format.pom.xml) lists the files.
# usage: scripts/format/java.sh check|apply
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
goal=${1:?usage: $0 check|apply}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ln -s "$root" "$work/tree"
includes=$(cd "$root" && git ls-files '*.java' | sed 's|.*|<include>tree/&</include>|')
[[ -n "$includes" ]] || exit 0
awk -v includes="$includes" '{ if ($0 ~ /@INCLUDES@/) print includes; else print }' \
  "$root/scripts/format/java-format.pom.xml" >"$work/pom.xml"
mvn -B -q -f "$work/pom.xml" "spotless:$goal"
