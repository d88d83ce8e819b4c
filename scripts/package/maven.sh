#!/bin/sh
# Makes the Maven artifact org.manypy:manypy:<version>: the API jar with the
# natives of this build inside (the loader extracts them at first use,
# docs/java.md "Installing"), its sources and javadoc jars and a flattened
# pom, deployed into <dist dir>/maven/ as a Maven repository layout
# (org/manypy/manypy/<version>/...). Consumers add that directory's content
# to their local repository, or serve it as a repository.
#
# The natives come from a stripped staged install of <build dir>
# (cmake --install --strip), not from <build>/lib, whose copies carry the
# build tree's RUNPATHs and debug information. The build must be complete
# (scripts/build.sh). Maven fetches the plugins it lacks from Maven Central
# on the first run; later runs need no network.
#
# usage: scripts/package/maven.sh <build dir> <dist dir>
set -eu
fail() { echo "maven.sh: $*" >&2; exit 1; }

[ $# -eq 2 ] || fail "usage: $0 <build dir> <dist dir>"
build=$(realpath "$1")
mkdir -p "$2"
dist=$(realpath "$2")
root=$(realpath "$(dirname "$0")/../..")
info=$build/java-natives.properties
[ -f "$info" ] || fail "$info is missing: build manypy first (scripts/build.sh)"
prop() { sed -n "s/^$1=//p" "$info"; }
version=$(prop version) abi=$(prop abi) platform=$(prop platform) torch=$(prop torch) python=$(prop python)
[ -n "$version" ] && [ -n "$abi" ] && [ -n "$torch" ] && [ -n "$python" ] || fail "$info is incomplete"
[ -f "$root/LICENSE" ] || echo "maven.sh: warning: $root/LICENSE is missing: the jar will have no META-INF/LICENSE" >&2

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# 1. The stripped install, and the natives laid out as the loader expects:
#    libmanypy_jni.so and libmanypy.so.<abi> side by side ($ORIGIN), the
#    private libraries in manypy/ beside libmanypy.so (core/src/runtime_paths.h).
cmake --install "$build" --prefix "$tmp/stage" --strip >"$tmp/install.log" ||
  { cat "$tmp/install.log" >&2; fail "cmake --install $build failed"; }
lib=$(dirname "$(find "$tmp/stage" -name "libmanypy.so.$abi" | head -n 1)")
[ -f "$lib/libmanypy.so.$abi" ] || fail "no libmanypy.so.$abi in the staged install"
natives=$tmp/natives/org/manypy/native
dir=$natives/$platform
mkdir -p "$dir/manypy"
cp -L "$lib/jni/libmanypy_jni.so" "$dir/"
cp -L "$lib/libmanypy.so.$abi" "$dir/"
cp -L "$lib/manypy/libmanypy_interp.so" "$lib/manypy/libmanypy_hooks.so" "$dir/manypy/"
files="libmanypy_jni.so libmanypy.so.$abi manypy/libmanypy_interp.so manypy/libmanypy_hooks.so"

# Nothing bundled may point into the build or source tree (a RUNPATH would
# make a consumer's process look there).
for file in $files; do
  if grep -qF -e "$build" -e "$root" "$dir/$file"; then
    fail "$dir/$file names the build or source tree ($(readelf -d "$dir/$file" | grep -E 'RUNPATH|RPATH'))"
  fi
done

# 2. The manifest: what the natives were built for, and the SHA-256 of each
#    file, which the loader checks on disk before loading.
{
  echo "# The natives of org.manypy:manypy:$version for $platform (scripts/package/maven.sh)."
  echo "version=$version"
  echo "platform=$platform"
  echo "torch=$torch"
  echo "python=$python"
  echo "jni=libmanypy_jni.so"
  echo "files=$(echo $files | tr ' ' ',')"
  for file in $files; do
    echo "sha256.$file=$(sha256sum "$dir/$file" | cut -d' ' -f1)"
  done
} >"$dir/manypy-native.properties"
echo "$platform=torch $torch, CPython $python" >"$natives/platforms.properties"
echo "natives for $platform (torch $torch, CPython $python):"
(cd "$dir" && for file in $files; do echo "  $file $(stat -c %s "$file") bytes"; done)

# 3. Maven: the jar with the natives, sources, javadoc, the flattened pom,
#    deployed to the file repository. Nothing goes to ~/.m2's org/manypy.
out=$dist/maven
rm -rf "$out/org/manypy/manypy/$version"
mvn -B -q -f "$root/java/pom.xml" \
  -Dmanypy.build.dir="$build" -Dmanypy.maven.dir="$tmp/maven" -Dmanypy.natives.dir="$tmp/natives" \
  -Dmaven.test.skip=true -Dmaven.install.skip=true \
  -DaltDeploymentRepository="manypy-dist::file://$out" \
  deploy

published=$out/org/manypy/manypy/$version
for file in manypy-$version.jar manypy-$version-sources.jar manypy-$version-javadoc.jar manypy-$version.pom; do
  [ -f "$published/$file" ] || fail "$published/$file was not produced"
done
# The published pom is for consumers: no build section, no test dependency.
if grep -qE '<build>|<scope>test</scope>|<manypy[.]build[.]dir>' "$published/manypy-$version.pom"; then
  fail "$published/manypy-$version.pom still carries the build's configuration"
fi
echo "org.manypy:manypy:$version in $out:"
(cd "$published" && ls -l | awk 'NR > 1 { print "  " $NF " " $5 " bytes" }')
