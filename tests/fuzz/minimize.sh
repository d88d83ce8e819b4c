#!/bin/sh
# Minimizes a crashing input (docs/hardening.md):
#   tests/fuzz/minimize.sh TARGET INPUT OUTPUT [SECONDS]
# Runs libFuzzer's -minimize_crash for SECONDS (default 60) and writes the
# smallest input that still crashes build-sanitize/bin/TARGET to OUTPUT (check
# with triage.sh that it still finds the same thing before keeping it in
# regress/TARGET/).
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target=$1 input=$2 output=$3 seconds=${4:-60}
fuzz_dir="$here"
. "$fuzz_dir/sanitizer_env.sh"
"${MANYPY_SANITIZE_BUILD_DIR:-$root/build-sanitize}/bin/$target" -minimize_crash=1 \
  -max_total_time="$seconds" -timeout=60 -rss_limit_mb=4096 \
  -exact_artifact_path="$output" "$input" >"$output.log" 2>&1 || true
echo "$(wc -c <"$input") -> $(wc -c <"$output") bytes: $output (log: $output.log)"
