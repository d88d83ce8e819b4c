#!/bin/sh
# Groups crashing inputs by what they found (docs/hardening.md):
#   tests/fuzz/triage.sh TARGET FILE...
# Replays each FILE alone with build-sanitize/bin/TARGET and prints one line per
# input: the first line of its report (a broken invariant, a sanitizer's
# SUMMARY, a libFuzzer deadly signal), numbers and hex masked, then the file.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target=$1
shift
MANYPY_FUZZ_REPLAY=1
fuzz_dir="$here"
. "$fuzz_dir/sanitizer_env.sh"
for f in "$@"; do
  sig=$("${MANYPY_SANITIZE_BUILD_DIR:-$root/build-sanitize}/bin/$target" -rss_limit_mb=4096 -timeout=60 "$f" 2>&1 |
    grep -a -E -m1 'FUZZ INVARIANT BROKEN|^SUMMARY|ERROR: libFuzzer|runtime error' |
    sed -E 's/0x[0-9a-f]+/0x?/g; s/[0-9]+/N/g' | cut -c1-200)
  printf '%s\t%s\n' "${sig:-no crash}" "$f"
done
