#!/usr/bin/env bash
# The second build leg's Python (README, "Torch and Python versions"): a venv made
# from pyenv's CPython 3.12 (built with --enable-shared, so it has
# libpython3.12.so to embed) with torch and torchvision from PyPI, pinned.
# It lives outside the clone so that every clone (and CI) on the machine
# reuses it: $MANYPY_TORCH2_VENV, or below the user's cache directory.
# Idempotent: when the venv has the pinned versions, it only checks them.
# Prints nothing on stdout but the venv's path (scripts/build.sh reads it).
set -euo pipefail

# The newest torch 2.x that pip offers for cp312 (pip index versions torch),
# the newest torchvision (it requires torch >= 2.14: resnet18 in the sample
# archives), and prometheus-client, whose parser tests/capi/capi_profiler.c
# runs in an interpreter (the first leg has Debian's).
pins=(torch==2.15.0 torchvision==0.29.2 prometheus-client==0.26.0)
python_version=3.12

venv="${MANYPY_TORCH2_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/manypy/venv-torch2-py3.12}"
python="$venv/bin/python"

have_pins() {
  [[ -x "$python" ]] && "$python" - "${pins[@]}" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
sys.exit(0 if all(version(n) == v for n, v in (p.split("==") for p in sys.argv[1:])) else 1)
PY
}

if [[ -e "$venv/.manypy-complete" ]] && have_pins; then
  echo "setup-torch2: $venv has ${pins[*]}" >&2
  echo "$venv"
  exit 0
fi

# The base interpreter: pyenv's newest 3.12, or MANYPY_TORCH2_BASE_PYTHON.
base="${MANYPY_TORCH2_BASE_PYTHON:-}"
if [[ -z "$base" ]]; then
  pyenv_root="${PYENV_ROOT:-$HOME/.pyenv}"
  for dir in $(ls -d "$pyenv_root/versions/$python_version".* 2>/dev/null | sort -V -r); do
    if [[ -x "$dir/bin/python$python_version" ]]; then base="$dir/bin/python$python_version"; break; fi
  done
fi
if [[ -z "$base" || ! -x "$base" ]]; then
  echo "setup-torch2: no CPython $python_version found (looked in \$PYENV_ROOT/versions/$python_version.*," \
       "or set MANYPY_TORCH2_BASE_PYTHON): the torch 2.x leg needs one built with" \
       "--enable-shared, e.g. env PYTHON_CONFIGURE_OPTS=--enable-shared pyenv install $python_version" >&2
  exit 1
fi
libdir="$("$base" -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR"))')"
ldlib="$("$base" -c 'import sysconfig; print(sysconfig.get_config_var("LDLIBRARY"))')"
if [[ "$ldlib" != *.so* || ! -e "$libdir/$ldlib" ]]; then
  echo "setup-torch2: $base was not built as a shared library (no $libdir/libpython$python_version.so):" \
       "manypy embeds it; rebuild it with PYTHON_CONFIGURE_OPTS=--enable-shared" >&2
  exit 1
fi

mkdir -p "$(dirname "$venv")"
if [[ ! -x "$python" ]]; then
  echo "setup-torch2: creating $venv from $base" >&2
  "$base" -m venv "$venv"
fi
# pip changes only what differs from the pins (a first install is about
# 5.4 GB with torch's CUDA libraries). The marker is written last, so an
# interrupted install is redone, not used.
echo "setup-torch2: installing ${pins[*]} into $venv" >&2
rm -f "$venv/.manypy-complete"
"$python" -m pip install -q --disable-pip-version-check "${pins[@]}" >&2
touch "$venv/.manypy-complete"
have_pins || { echo "setup-torch2: $venv lacks one of ${pins[*]} after install" >&2; exit 1; }
echo "$venv"
