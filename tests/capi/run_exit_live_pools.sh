#!/bin/sh
# Runs capi_exit_live_pools in one mode and passes only when the process
# exited with code 0 AND printed both marker lines (the one printed just
# before exit, and the one from its ELF destructor, which runs during exit()).
# ctest's PASS_REGULAR_EXPRESSION alone would ignore the exit code.
# usage: run_exit_live_pools.sh <path to capi_exit_live_pools> return|thread-exit|async|starting
set -u
program=$1
mode=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$program" "$mode" >"$out" 2>&1
rc=$?
cat "$out"
status=0
if [ "$rc" -ne 0 ]; then
  echo "FAIL: exit code $rc, expected 0 (above 128: a signal; 134 SIGABRT, 139 SIGSEGV)"
  status=1
fi
for marker in "capi_exit_live_pools[$mode]: reached exit" \
              "capi_exit_live_pools: destructors ran"; do
  if ! grep -qF "$marker" "$out"; then
    echo "FAIL: missing output line: $marker"
    status=1
  fi
done
if [ "$status" -eq 0 ]; then
  echo "PASS: exit code 0 with a live pool ($mode)"
fi
exit "$status"
