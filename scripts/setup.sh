#!/usr/bin/env bash
# Installs, from Debian's packages, whatever manypy needs that is missing.
# Does nothing (and needs no network) when everything is already there.
#   scripts/setup.sh          what the test command needs (everything)
#   scripts/setup.sh --demo   only what the demo needs (scripts/demo.sh)
set -euo pipefail

# The demo: the library, the interpreter side and the sample archives.
demo_packages=(
  build-essential cmake ninja-build pkg-config ccache
  python3.11-dev python3-torch libtorch-dev python3-torchvision
  libdlpack-dev nlohmann-json3-dev libzip-dev libssl-dev
)
packages=(
  "${demo_packages[@]}"
  swig libcmocka-dev googletest libgtest-dev
  python3-prometheus-client
  # The chart of the peers benchmark (bench/peers/chart.py, docs/performance.md).
  python3-matplotlib
  openjdk-17-jdk-headless maven
  # The sanitizer and fuzz build (build-sanitize, docs/hardening.md): clang
  # with its sanitizer runtimes, libFuzzer, llvm-symbolizer for their reports.
  clang libclang-rt-14-dev libfuzzer-14-dev llvm-14
  # The Rust binding's test that regenerates its bindings (bindgen loads libclang).
  libclang1-14
  # The C and C++ format gate (scripts/format.sh, lint_format_c).
  clang-format
  # The packages (scripts/package.sh: CPack's DEB generator runs
  # dpkg-shlibdeps, then lintian checks them) and the clean Debian root the
  # install test installs them into (tests/install/clean_root.sh).
  dpkg-dev lintian mmdebstrap
)
if [[ "${1:-}" == --demo ]]; then
  packages=("${demo_packages[@]}")
elif (($#)); then
  echo "usage: scripts/setup.sh [--demo]" >&2
  exit 2
else
  # The Go binding's tests need Go 1.24 or later, which Debian 12 does not
  # package (golang-go is 1.19): without it, CMake skips them with a message.
  if ! command -v go >/dev/null && [[ -x /usr/local/go/bin/go ]]; then
    PATH="$PATH:/usr/local/go/bin"
  fi
  if ! command -v go >/dev/null || ! go version | grep -Eq 'go1\.(2[4-9]|[3-9][0-9])'; then
    echo "setup: no Go 1.24 or later on PATH: the Go binding's tests will be skipped (docs/go.md)"
  fi
fi

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [[ "$(id -u)" -ne 0 ]]; then sudo="sudo"; fi
echo "setup: installing ${missing[*]}"
$sudo apt-get update -q
# Without the packages' recommendations: nothing manypy uses comes only
# through one, and python3-torchvision's alone (codecs, speech models) are
# hundreds of megabytes.
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
