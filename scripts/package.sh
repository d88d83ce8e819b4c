#!/usr/bin/env bash
# Makes manypy's packages from a build tree, into <build>/dist/
# (docs/install.md):
#   first leg (build/, the default):
#     deb/        libmanypy0.3, libmanypy-dev, libmanypy-java (CPack's DEB
#                 generator, cmake/packaging.cmake), checked by lintian
#     maven/      a Maven repository holding org.manypy:manypy with its
#                 natives, sources and javadoc (scripts/package/maven.sh)
#     crates/     the manypy-sys, manypy and manypy-prometheus .crate
#                 files, as a cargo source (scripts/package/crates.sh)
#     goproxy/    manypy.dev/manypy in the Go module proxy's layout
#                 (scripts/package/goproxy.sh)
#   second leg (build-torch2/): the install prefix as a tarball (CPack TGZ).
# Builds first (scripts/build.sh) unless --no-build says the trees are
# built already. Each run starts a fresh dist/.
# usage: scripts/package.sh [--no-build] [main|torch2]...   (default: main)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build_first=1
if [[ "${1:-}" == --no-build ]]; then
  build_first=0
  shift
fi
legs=("$@")
((${#legs[@]})) || legs=(main)

((build_first == 0)) || "$root/scripts/build.sh" "${legs[@]}"
for leg in "${legs[@]}"; do
  case "$leg" in
    main) build="${MANYPY_BUILD_DIR:-$root/build}" ;;
    torch2) build="${MANYPY_TORCH2_BUILD_DIR:-$root/build-torch2}" ;;
    *) echo "package.sh: unknown leg '$leg' (main or torch2)" >&2; exit 2 ;;
  esac
  dist="$build/dist"
  rm -rf "$dist"
  mkdir -p "$dist"
  echo "== packages of $build into $dist"
  if [[ "$leg" == torch2 ]]; then
    (cd "$build" && cpack -G TGZ -B "$dist" >"$dist/cpack.log") ||
      { cat "$dist/cpack.log"; exit 1; }
    rm -rf "$dist/_CPack_Packages"
  else
    (cd "$build" && cpack -G DEB -B "$dist/deb" >"$dist/cpack.log") ||
      { cat "$dist/cpack.log"; exit 1; }
    rm -rf "$dist/deb/_CPack_Packages"
    # Every warning lintian gives is explained in docs/install.md; errors
    # fail the packaging.
    lintian --fail-on error "$dist"/deb/*.deb
    for part in maven crates goproxy; do
      "$root/scripts/package/$part.sh" "$build" "$dist"
    done
  fi
  echo "== made (bytes):"
  (cd "$dist" && find . -type f \( -name '*.deb' -o -name '*.tar.gz' -o -name '*.crate' \
     -o -path '*/org/manypy/manypy/*.jar' -o -path '*/@v/*.zip' \) -printf '%10s  %P\n' | sort -k2)
done
