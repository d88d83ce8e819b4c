#!/usr/bin/env bash
# manypy installed the way users install it, on a machine that has never
# seen its source (docs/install.md, "How the packages are tested"):
#  1. a minimal Debian root made by mmdebstrap from this machine's own apt
#     sources, with the consumers' toolchains from Debian (gcc, cmake,
#     pkg-config, OpenJDK 17, Maven); made once and cached outside the
#     clone, keyed by the package list, the suite and the apt sources;
#  2. the packages' run-time dependencies from Debian (python3-torch and
#     about 300 more), pulled by `apt-get install ./libmanypy*.deb` into a
#     copy of that root, then manypy's packages purged: a second layer,
#     made once for each set of dependencies the packages declare and
#     cached beside the root; the install time and size are printed;
#  3. a fresh copy of both (overlays: the cached layers stay as they were),
#     into which `apt-get install ./libmanypy*.deb` installs the packages;
#  4. each consumer of tests/install/consumers/ run inside that root
#     (chroot), with no network, no source or build tree, no host caches:
#     only the packages of <build>/dist at /dist, the model at /model, and
#     the Rust and Go toolchains bind-mounted read-only (Debian 12 packages
#     versions of both too old for the bindings) at /opt/rust and
#     /usr/local/go, each bin/ on PATH.
# A consumer's prepare.sh, if any, runs first on the host (with network) and
# fills its own cached directory, mounted at /prep in the root; its
# before_install.sh, if any, runs in a copy of the bare root, without the
# packages or their dependencies (the Java artifact's natives on a machine
# without libtorch).
# Needs root (mmdebstrap, mounts, chroot); without it the test fails.
# usage: clean_root.sh <build dir> <source dir> <consumer>...
#        clean_root.sh --prepare   only makes (or finds) the cached root:
#                                  scripts/test.sh runs it beside its builds
set -euo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
since() { awk -v start="$1" -v now="$(date +%s.%N)" 'BEGIN { printf "%.1f", now - start }'; }
cache=${MANYPY_CLEAN_ROOT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/manypy/clean-root}

# Makes the cached root if it is not there yet, and sets base to it.
make_base() {
  [[ "$(id -u)" -eq 0 ]] || fail "must run as root (mmdebstrap, mount, chroot); CI does"
  for tool in mmdebstrap unshare chroot; do
    command -v "$tool" >/dev/null || fail "$tool not found (scripts/setup.sh installs it)"
  done
  # The root's packages: what the consumers build with. The manypy packages
  # and their dependencies come later, into each run's copy.
  local packages=(ca-certificates gcc libc6-dev make pkg-config cmake openjdk-17-jdk-headless maven)
  local suite file key start
  # shellcheck disable=SC1091
  suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
  local apt_sources=()
  for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [[ -s "$file" ]] && apt_sources+=("$file")
  done
  ((${#apt_sources[@]})) || fail "this machine has no apt sources to make the root from"
  key=$( { echo "$suite"; printf '%s\n' "${packages[@]}"; cat "${apt_sources[@]}"; } |
         sha256sum | cut -c1-16)
  base=$cache/base-$key
  mkdir -p "$cache"
  # One maker at a time: the test command prepares the root beside its
  # builds, and the test itself may start before that ends.
  exec {lock}>"$cache/.lock"
  flock "$lock"
  if [[ ! -d "$base" ]]; then
    echo "== making the clean root (mmdebstrap $suite: ${packages[*]}), once per package list"
    rm -rf "$cache"/base-* # earlier package lists
    start=$(date +%s.%N)
    mmdebstrap --quiet --variant=apt --include="$(IFS=,; echo "${packages[*]}")" \
      "$suite" "$base.partial" "${apt_sources[@]}" || fail "mmdebstrap"
    mv "$base.partial" "$base"
    echo "made $base in $(since "$start") s"
  else
    echo "== the clean root: $base (cached)"
  fi
  exec {lock}>&-
}

if [[ "${1:-}" == --prepare ]]; then
  make_base
  exit 0
fi
if [[ "${1:-}" == --inside ]]; then
  inside=1
  shift
else
  inside=0
fi
(($# >= 3)) || fail "usage: $0 <build dir> <source dir> <consumer>... (or --prepare)"
build=$(realpath "$1")
source=$(realpath "$2")
shift 2
consumers=("$@")
dist=$build/dist

# ---- on the host -------------------------------------------------------------
if ((!inside)); then
  debs=("$dist"/deb/*.deb)
  [[ -e "${debs[0]}" ]] || fail "no packages in $dist/deb: run scripts/package.sh first"
  for lib in "$build"/lib/libmanypy.so.*.*.*; do
    [[ "$lib" -ot "${debs[0]}" ]] ||
      fail "the packages in $dist are older than $lib: run scripts/package.sh again"
  done
  make_base

  for consumer in "${consumers[@]}"; do
    dir=$source/tests/install/consumers/$consumer
    [[ -f "$dir/run.sh" ]] || fail "no consumer $dir/run.sh"
    if [[ -f "$dir/prepare.sh" ]]; then
      echo "== preparing the $consumer consumer (on the host)"
      mkdir -p "$cache/prep/$consumer"
      bash "$dir/prepare.sh" "$dist" "$cache/prep/$consumer" || fail "$dir/prepare.sh"
    fi
  done

  # Everything below runs in a mount namespace of its own: its mounts go
  # away with it, whatever happens.
  export MANYPY_CLEAN_ROOT_BASE=$base MANYPY_CLEAN_ROOT_CACHE=$cache
  exec unshare --mount --propagation private -- \
    bash "$0" --inside "$build" "$source" "${consumers[@]}"
fi

# ---- inside the mount namespace ------------------------------------------------
base=$MANYPY_CLEAN_ROOT_BASE
work=$(mktemp -d /var/tmp/manypy-clean-root.XXXXXX)
root=$work/root
# Never rm -rf the root itself: while anything is mounted in it, that would
# reach into /dev and the packages. Only what the overlays wrote goes.
unmount_root() { if mountpoint -q "$root"; then umount -R "$root"; fi; }
trap 'if unmount_root; then rm -rf "$work"; fi' EXIT

bind_ro() {  # <host path> <path in the root>
  mkdir -p "$root$2"
  mount --bind "$1" "$root$2"
  mount -o remount,bind,ro "$root$2"
}
# The toolchains Debian 12 has in versions too old for the bindings, from
# the host: MANYPY_RUST_SYSROOT (rustc --print sysroot) and MANYPY_GOROOT
# (go env GOROOT), which tests/install/CMakeLists.txt sets.
system_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
path=$system_path
[[ -z "${MANYPY_RUST_SYSROOT:-}" ]] || path=/opt/rust/bin:$path
[[ -z "${MANYPY_GOROOT:-}" ]] || path=/usr/local/go/bin:$path

# A fresh root at $root: an overlay of <lower> (overlayfs lowerdirs, the
# top one first), writing into <upper>, with what every root here gets.
mount_root() {  # <lower> <upper>
  mkdir -p "$2" "$2.work" "$root"
  mount -t overlay overlay -o "lowerdir=$1,upperdir=$2,workdir=$2.work" "$root"
  mount -t proc proc "$root/proc"
  mount --rbind /dev "$root/dev"
  mount -t tmpfs tmpfs "$root/tmp"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  # Downloaded packages are kept between runs, as on any Debian machine.
  mkdir -p "$cache/apt-archives/partial"
  mount --bind "$cache/apt-archives" "$root/var/cache/apt/archives"
  bind_ro "$dist" /dist
  mkdir -p "$root/model"
  cp "$build/archives/seed_example.pt" "$build/archives/seed_example.expected.out.bin" "$root/model/"
  [[ -z "${MANYPY_RUST_SYSROOT:-}" ]] || bind_ro "$MANYPY_RUST_SYSROOT" /opt/rust
  [[ -z "${MANYPY_GOROOT:-}" ]] || bind_ro "$MANYPY_GOROOT" /usr/local/go
}

# A command in the root, with a clean environment: nothing of the host's.
in_root() { chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 PATH="$system_path" \
              DEBIAN_FRONTEND=noninteractive "$@"; }
installed() { in_root dpkg-query -W -f '${Package} ${Installed-Size}\n' | sort; }
# apt-get install of the packages in /dist/deb, logged to <log>. No fsync
# for each file: these roots are thrown away (mmdebstrap does the same).
install_packages() {  # <log>
  in_root sh -c 'apt-get install -y -q --no-install-recommends -o Dpkg::Options::=--force-unsafe-io \
                   /dist/deb/*.deb' >"$1" 2>&1 || { cat "$1"; fail "apt-get install of the packages"; }
}

# Each consumer's run.sh (or before_install.sh) in the root, in its own copy
# of the consumer's directory, without network, with the toolchains on PATH.
run_consumer() {  # <consumer> <script>
  rm -rf "$root/consumer"
  cp -r "$source/tests/install/consumers/$1" "$root/consumer"
  cp -r "$source/samples/consumer" "$root/consumer/sample"
  if [[ -d "$cache/prep/$1" ]]; then bind_ro "$cache/prep/$1" /prep; fi
  local start result=0
  start=$(date +%s.%N)
  in_root unshare --net -- env PATH="$path" GLIBC_TUNABLES=glibc.rtld.optional_static_tls=16384 \
    sh -c "cd /consumer && exec ./$2" || result=1
  if mountpoint -q "$root/prep"; then umount "$root/prep"; fi
  if ((result == 0)); then
    echo "$1 consumer: $2 passed in $(since "$start") s"
  else
    echo "FAIL: the $1 consumer's $2 (output above)"
  fi
  return "$result"
}

status=0
# What a consumer checks on a machine that has the toolchains but not yet
# manypy's packages nor their dependencies (python3-torch): a copy of the
# bare root.
mount_root "$base" "$work/bare"
for consumer in "${consumers[@]}"; do
  if [[ -f "$source/tests/install/consumers/$consumer/before_install.sh" ]]; then
    echo "== the $consumer consumer before the packages are installed"
    run_consumer "$consumer" before_install.sh || status=1
  fi
done
unmount_root

# The packages' dependencies (about 300 Debian packages, python3-torch
# among them) as a second cached layer over the root, made once for each
# set of dependencies the packages declare: by `apt-get install
# ./libmanypy*.deb` on a copy of the bare root, which must pull
# python3-torch, then manypy's own packages purged. Each run then installs
# manypy's packages on a copy of that layer, as they would go onto a
# machine that has their dependencies.
depends=$(for deb in "$dist"/deb/*.deb; do
            dpkg-deb -f "$deb" Package Pre-Depends Depends; done)
deps=$cache/deps-$( { basename "$base"; echo "$depends"; } | sha256sum | cut -c1-16)
exec {lock}>"$cache/.lock"
flock "$lock"
if [[ ! -d "$deps" ]]; then
  echo "== apt-get install ./libmanypy*.deb in a copy of the bare root: the dependencies' layer"
  rm -rf "$cache"/deps-* # earlier sets of dependencies
  mount_root "$base" "$deps.partial/upper"
  in_root apt-get update -q >"$work/apt-update.log" 2>&1 || { cat "$work/apt-update.log"; fail "apt-get update"; }
  installed >"$work/before"
  start=$(date +%s.%N)
  install_packages "$work/apt.log"
  seconds=$(since "$start")
  installed >"$work/after"
  comm -13 "$work/before" "$work/after" >"$deps.partial/added"
  added_kib=$(awk '{s += $2} END {print s}' "$deps.partial/added")
  printf 'installed %d packages in %s s: %d MiB in all\n' \
    "$(wc -l <"$deps.partial/added")" "$seconds" "$((added_kib / 1024))" | tee "$deps.partial/summary"
  grep -q '^python3-torch ' "$deps.partial/added" || fail "installing the packages did not pull python3-torch"
  in_root sh -c 'dpkg --purge $(dpkg-query -W -f "\${Package}\n" "libmanypy*")' >"$work/purge.log" 2>&1 ||
    { cat "$work/purge.log"; fail "purging manypy's packages from the dependencies' layer"; }
  unmount_root
  rm -rf "$deps.partial/upper.work"
  mv "$deps.partial" "$deps"
else
  echo "== the dependencies' layer: $deps (cached): $(cat "$deps/summary")"
fi
exec {lock}>&-

echo "== apt-get install ./libmanypy*.deb in a fresh copy of the root and its dependencies"
mount_root "$deps/upper:$base" "$work/upper"
installed >"$work/before"
start=$(date +%s.%N)
install_packages "$work/apt.log"
seconds=$(since "$start")
installed >"$work/after"
comm -13 "$work/before" "$work/after" >"$work/added"
manypy_kib=$(awk '/^libmanypy/ {s += $2} END {print s}' "$work/added")
printf 'installed %d packages in %s s, %d KiB of manypy'"'"'s (%s)\n' \
  "$(wc -l <"$work/added")" "$seconds" "$manypy_kib" \
  "$(awk '/^libmanypy/ {printf "%s%s %s KiB", sep, $1, $2; sep=", "}' "$work/added")"
if grep -qv '^libmanypy' "$work/added"; then
  fail "the packages pulled more than the dependencies' layer holds: $(grep -v '^libmanypy' "$work/added" | tr '\n' ' ')"
fi

for consumer in "${consumers[@]}"; do
  echo "== the $consumer consumer, in the root, without network"
  run_consumer "$consumer" run.sh || status=1
done
((status == 0)) && echo PASS
exit "$status"
