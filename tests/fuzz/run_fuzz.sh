#!/bin/sh
# Runs a libFuzzer target for ctest (tests/fuzz/CMakeLists.txt):
#   run_fuzz.sh replay TARGET DIR...
#       runs every file under the DIRs once (the seed and regression
#       corpora); fails on the first crash, leak, sanitizer report or
#       broken invariant.
#   run_fuzz.sh fuzz TARGET WORKDIR SECONDS MAX_LEN DIR...
#       fuzzes for SECONDS from the DIRs' inputs, in one process. New inputs
#       go to WORKDIR/corpus (emptied first), a crashing input to
#       WORKDIR/crash-* (the path is printed; copy it into the target's
#       regression corpus once minimized, docs/hardening.md).
set -eu
mode=$1 target=$2
shift 2

if [ "$mode" = replay ]; then MANYPY_FUZZ_REPLAY=1; fi
fuzz_dir="$(cd "$(dirname "$0")" && pwd)"
. "$fuzz_dir/sanitizer_env.sh"

# Only the directories that exist (a regression corpus may be empty, and git
# keeps no empty directory).
existing() {
  for d in "$@"; do
    if [ -d "$d" ]; then printf '%s\n' "$d"; fi
  done
}

case "$mode" in
  replay)
    set -- $(existing "$@")
    files=$(find "$@" -type f ! -name 'README*' | sort)
    if [ -z "$files" ]; then
      echo "run_fuzz.sh: no inputs under $*" >&2
      exit 1
    fi
    echo "replaying $(echo "$files" | wc -l) inputs from $*"
    # shellcheck disable=SC2086 # one argument per file (no spaces in names)
    exec "$target" -rss_limit_mb=4096 -timeout=60 $files
    ;;
  fuzz)
    work=$1 seconds=$2 max_len=$3
    shift 3
    set -- $(existing "$@")
    rm -rf "$work/corpus"
    mkdir -p "$work/corpus"
    # Fuzzing runs without LeakSanitizer: libtorch's reader leaks on every
    # archive it refuses (lsan_fuzzing.supp), and the leak check libFuzzer
    # then runs after each such input made the archive targets 50 times
    # slower (30 inputs/s instead of 2,000). The new inputs are then
    # replayed with it, as the _replay entries replay the corpora.
    ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" \
      "$target" -max_total_time="$seconds" -max_len="$max_len" -rss_limit_mb=4096 \
      -timeout=60 -print_final_stats=1 -artifact_prefix="$work/" "$work/corpus" "$@"
    new=$(find "$work/corpus" -type f | sort)
    if [ -z "$new" ]; then exit 0; fi
    echo "replaying the $(echo "$new" | wc -l) new inputs with leak detection"
    # (sanitizer_env.sh's replay settings; it keeps options already set)
    unset ASAN_OPTIONS LSAN_OPTIONS
    MANYPY_FUZZ_REPLAY=1
    . "$fuzz_dir/sanitizer_env.sh"
    # shellcheck disable=SC2086 # one argument per file (no spaces in names)
    exec "$target" -rss_limit_mb=4096 -timeout=60 $new
    ;;
  *)
    echo "usage: run_fuzz.sh replay|fuzz ..." >&2
    exit 2
    ;;
esac
