#!/bin/sh
# A longer fuzz campaign of one target, outside ctest (docs/hardening.md):
#   tests/fuzz/campaign.sh TARGET SECONDS [libFuzzer flags...]
# Runs build-sanitize/bin/TARGET in libFuzzer's fork mode with one worker (one
# fuzzing process at a time), which goes on after a crash, for SECONDS.
# Its corpus grows in build-sanitize/campaign/TARGET/corpus (kept between
# campaigns, seeded from the target's seed and regression corpora) and each
# crashing input lands in build-sanitize/campaign/TARGET/ as crash-*, leak-*,
# oom-* or timeout-*; the log is build-sanitize/campaign/TARGET/log.
# MANYPY_FUZZ_TOLERATE (fuzz_support.h) looks past a known INTERNAL.
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target=$1 seconds=$2
shift 2
build="${MANYPY_SANITIZE_BUILD_DIR:-$root/build-sanitize}"
case "$target" in
  fuzz_archive_read|fuzz_script_load|fuzz_package_open) seeds=archives max_len=32768 ;;
  fuzz_values) seeds=values max_len=4096 ;;
  fuzz_tensors) seeds=tensors max_len=1024 ;;
  *) echo "campaign.sh: unknown target $target" >&2; exit 2 ;;
esac
work="$build/campaign/$target"
mkdir -p "$work/corpus"
fuzz_dir="$here"
. "$fuzz_dir/sanitizer_env.sh"
dirs="$here/corpus/$seeds"
if [ -d "$here/regress/$target" ]; then dirs="$dirs $here/regress/$target"; fi
# shellcheck disable=SC2086
"$build/bin/$target" -fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1 \
  -max_total_time="$seconds" -max_len="$max_len" -rss_limit_mb=4096 -timeout=60 \
  -print_final_stats=1 -artifact_prefix="$work/" "$@" "$work/corpus" $dirs \
  >"$work/log" 2>&1 || true
grep -E '^#[0-9]+' "$work/log" | tail -1
ls "$work" | grep -E '^(crash|leak|oom|timeout)-' | wc -l | sed 's/$/ crashing inputs kept/'
