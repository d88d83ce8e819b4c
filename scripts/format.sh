#!/usr/bin/env bash
# Formats the tree, or checks that it is formatted (the test command's lint
# tier runs the checks as ctest entries lint_format_<language>):
#   scripts/format.sh [--check] [c] [rust] [go] [java]     (default: all four)
# - c:    clang-format (Debian's clang-format 14) with .clang-format, on every
#         committed C and C++ file;
# - rust: cargo fmt (rustfmt's defaults) on the workspace in rust/ and on the
#         install test's Rust consumer;
# - go:   gofmt on every committed Go file;
# - java: google-java-format through Maven's Spotless plugin, on every
#         committed Java file (scripts/format/java.sh).
# Formatting only what git tracks keeps build trees and generated code out.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

check=0
if [[ "${1:-}" == --check ]]; then
  check=1
  shift
fi
(($#)) || set -- c rust go java

# rustup's cargo and the official Go tarball may not be on a non-login
# shell's PATH (CI).
export PATH="$PATH:$HOME/.cargo/bin:/usr/local/go/bin"

need() {  # <command> <what installs it>
  command -v "$1" >/dev/null || { echo "format: no $1 on PATH ($2)" >&2; exit 2; }
}

status=0
for language in "$@"; do
  case "$language" in
    c)
      need clang-format "scripts/setup.sh installs Debian's clang-format"
      mapfile -t files < <(git ls-files '*.c' '*.h' '*.cpp')
      if ((check)); then
        clang-format --dry-run -Werror "${files[@]}" || status=1
      else
        clang-format -i "${files[@]}"
      fi
      ;;
    rust)
      need cargo "rustup, with its rustfmt component"
      mode=()
      ((check)) && mode=(--check)
      for manifest in rust/Cargo.toml tests/install/consumers/rust/Cargo.toml; do
        cargo fmt --all --manifest-path "$manifest" "${mode[@]}" || status=1
      done
      ;;
    go)
      need gofmt "Go 1.24 or later (docs/go.md)"
      mapfile -t files < <(git ls-files '*.go')
      if ((check)); then
        unformatted=$(gofmt -l "${files[@]}")
        if [[ -n "$unformatted" ]]; then
          echo "format: gofmt would change:" >&2
          echo "$unformatted" >&2
          gofmt -d "${files[@]}" >&2
          status=1
        fi
      else
        gofmt -w "${files[@]}"
      fi
      ;;
    java)
      need mvn "scripts/setup.sh installs Debian's maven"
      bash "$root/scripts/format/java.sh" "$( ((check)) && echo check || echo apply)" || status=1
      ;;
    *)
      echo "usage: scripts/format.sh [--check] [c] [rust] [go] [java]" >&2
      exit 2
      ;;
  esac
done
if ((status)); then
  echo "format: the tree is not formatted; scripts/format.sh $* formats it" >&2
fi
exit "$status"
