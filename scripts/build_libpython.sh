#!/usr/bin/env bash
# A libpython built for embedding, for the first leg: Debian's own CPython
# source package (the version /usr/bin/python3 is, with Debian's patches),
# configured as Debian configures its shared library, but optimised the way
# Debian optimises only its static python3 executable: profile-guided
# (--enable-optimizations, which also adds -fno-semantic-interposition) and
# link-time (--with-lto). Debian's libpython3.X.so is built with LTO and
# without PGO, and runs about 5% more instructions per python_heavy call
# than its executable (docs/performance.md, "the embedding tax").
#
#   scripts/build_libpython.sh      prints the directory holding the library
#
# Opt-in: configure with -DMANYPY_LIBPYTHON_DIR=<that directory> and the
# interpreters load this library instead of Debian's (docs/performance.md
# says what it gives and what it costs). It must be the same CPython version
# as /usr/bin/python3, since the stdlib, the extension modules and torch
# stay Debian's; the directory is named after the exact Debian version and
# rebuilt when Debian's package changes.
#
# Needs the source package from Debian's archive (through a private apt
# configuration: the machine's sources are not changed), gcc, make and the
# -dev packages of the modules Debian builds in (expat, zlib, ffi). About
# 20 minutes on 2 cores, once; the result is cached below the user's cache
# directory ($MANYPY_LIBPYTHON_CACHE). Prints nothing on stdout but the
# directory.
set -euo pipefail

python=/usr/bin/python3
pver="$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
package="python$pver"
deb_version="$(dpkg-query -W -f='${Version}' "lib$package" 2>/dev/null || true)"
if [[ -z "$deb_version" ]]; then
  echo "build-libpython: lib$package is not installed (scripts/setup.sh installs it)" >&2
  exit 1
fi
cache="${MANYPY_LIBPYTHON_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/manypy/libpython}"
out="$cache/$package-$deb_version-pgo"
soname="libpython$pver.so.1.0"
if [[ -e "$out/.manypy-complete" && -e "$out/$soname" ]]; then
  echo "build-libpython: $out/$soname is built" >&2
  echo "$out"
  exit 0
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/manypy-libpython.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# The source package, through an apt configuration of our own with deb-src
# lines for the machine's Debian suites.
mkdir -p "$work/apt/lists/partial"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
grep -h -A3 '^Types: deb$' /etc/apt/sources.list.d/debian.sources 2>/dev/null |
  awk '/^URIs:/ {uri=$2} /^Suites:/ {for (i = 2; i <= NF; ++i) print uri, $i}' |
  while read -r uri suite; do
    echo "deb-src [signed-by=$keyring] $uri $suite main"
  done > "$work/apt/sources.list"
if [[ ! -s "$work/apt/sources.list" ]]; then
  echo "build-libpython: no Debian suites found in /etc/apt/sources.list.d/debian.sources" >&2
  exit 1
fi
apt_opts=(-o "Dir::Etc::SourceList=$work/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$work/apt/lists" -o APT::Sandbox::User=root)
echo "build-libpython: fetching Debian's source of $package $deb_version" >&2
apt-get "${apt_opts[@]}" -q update >&2
# The installed version if the archive still has it, else the newest
# upload of the same upstream version that downloads (same ABI and stdlib;
# the archive keeps only the latest uploads, and an index can name one its
# mirror does not hold yet).
upstream="$("$python" -c 'import platform; print(platform.python_version())')"
versions=("$deb_version")
mapfile -t -O 1 versions < <(apt-cache "${apt_opts[@]}" showsrc "$package" |
  awk '/^Version:/ {print $2}' | grep "^$upstream-" | sort -u -r -V)
dsc=
for v in "${versions[@]}"; do
  if (cd "$work" && apt-get "${apt_opts[@]}" -q source --download-only "$package=$v" >&2); then
    dsc="$work/${package}_${v#*:}.dsc"
    break
  fi
done
if [[ -z "$dsc" || ! -e "$dsc" ]]; then
  echo "build-libpython: no source of $package $upstream could be downloaded (tried ${versions[*]})" >&2
  exit 1
fi
dpkg-source -x "$dsc" "$work/src" >&2

# Debian's configuration of its shared build (debian/rules: the common
# configure arguments, and the modules built into the library rather than
# loaded from lib-dynload), plus PGO and LTO.
src="$work/src"
build="$work/build"
mkdir -p "$build"
multiarch="$(dpkg-architecture -qDEB_HOST_MULTIARCH)"
(cd "$build" && "$src/configure" --prefix=/usr --libdir="/usr/lib/$multiarch" --enable-shared \
   --enable-ipv6 --enable-loadable-sqlite-extensions --with-dbmliborder=bdb:gdbm \
   --with-computed-gotos --without-ensurepip --with-system-expat --with-system-ffi \
   --enable-optimizations --with-lto >&2)
builtin="$(awk '$2 ~ /^extension$/ {print $1}' "$src/debian/PVER-minimal.README.Debian.in" | paste -sd'|')"
grep -E "^#($builtin)\b" "$src/Modules/Setup" | sed -e 's/^#//' -e 's/-Wl,-Bdynamic//;s/-Wl,-Bstatic//' \
  >> "$build/Modules/Setup.local"
(cd "$build" && "$src/Modules/makesetup" -c "$src/Modules/config.c.in" -s Modules \
   Modules/Setup.local Modules/Setup.bootstrap Modules/Setup.stdlib "$src/Modules/Setup" >&2 &&
 mv config.c Modules/ && make Makefile Modules/config.c >&2)

# The profile: CPython's own PGO task list, without the tests that need an
# installed tree or modules Debian builds separately (they fail in a build
# directory and would stop the build).
profile_tests="$("$python" - "$src/Lib/test/libregrtest/pgo.py" <<'PY'
import re, sys
skip = {"test_embed", "test_xml_etree", "test_xml_etree_c"}
names = re.findall(r"'(test_\w+)'", open(sys.argv[1]).read())
print(" ".join(n for n in names if n not in skip))
PY
)"
echo "build-libpython: building with PGO and LTO in $build (about 20 minutes on 2 cores)" >&2
make -C "$build" -j"$(nproc)" PROFILE_TASK="-m test --timeout=1200 $profile_tests" >&2

# Only the library is kept: the stdlib, lib-dynload and every extension
# module stay Debian's.
mkdir -p "$cache"
rm -rf "$out.tmp" && mkdir -p "$out.tmp"
cp "$build/$soname" "$out.tmp/$soname"
ln -s "$soname" "$out.tmp/libpython$pver.so"
LD_LIBRARY_PATH="$out.tmp" "$build/python" -c 'import _struct, zlib, pyexpat, math' >&2
echo "$package $deb_version, $(basename "$dsc"), --enable-optimizations --with-lto" > "$out.tmp/BUILD-INFO"
touch "$out.tmp/.manypy-complete"
rm -rf "$out" && mv "$out.tmp" "$out"
echo "$out"
