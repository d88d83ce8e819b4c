#!/bin/sh
# Runs inside the clean root, offline: builds this Maven project (which names
# only manypy's coordinates) with mvn -o against /prep's plugins and
# /dist/maven's manypy, then serves /model/seed_example.pt with it, checking
# every output (ServeSeed), in each way a Java service gets the natives:
#   (a) extracted from the jar into an empty cache,
#   (b) from the filled cache, and again after a cached file was corrupted,
#   (c) from disk, installed by the Debian package (-Dmanypy.native.path),
#   (d) the Debian package's plain jar, with no flags (java.library.path).
# It prints the time from a cold JVM to the first served request of (a) to
# (c), and the jar's size (figures, not checked), and checks that an
# unwritable cache directory is a clear error, not a crash.
#
# The paths are those of the clean root; the variables below let the same
# script run on a host against an install prefix.
set -eu
dist=${MANYPY_DIST:-/dist}
prep=${MANYPY_PREP:-/prep}
model=${MANYPY_MODEL_DIR:-/model}
jni_dir=${MANYPY_DEB_JNI_DIR:-/usr/lib/jni}
plain_jar=${MANYPY_DEB_JAR:-/usr/share/java/manypy.jar}

fail() { echo "FAIL: $*"; exit 1; }
step() { echo; echo "== $*"; }
ms() { echo $(( $(date +%s%N) / 1000000 )); }

version=0.3.0
published=$dist/maven/org/manypy/manypy/$version
jar=$published/manypy-$version.jar
[ -f "$jar" ] || fail "$jar is missing (scripts/package/maven.sh makes it)"
[ -d "$prep/m2" ] || fail "$prep/m2 is missing (prepare.sh makes it)"
for f in seed_example.pt seed_example.expected.out.bin; do
  [ -f "$model/$f" ] || fail "$model/$f is missing"
done
case "${GLIBC_TUNABLES:-}" in
  *optional_static_tls*) ;;
  *) fail "GLIBC_TUNABLES must hold glibc.rtld.optional_static_tls=16384 (docs/java.md)" ;;
esac

work=$(mktemp -d /tmp/manypy-java.XXXXXX)
trap 'rm -rf "$work"' EXIT

step "build the consumer offline (mvn -o), manypy from $dist/maven"
cp -r "$prep/m2" "$work/m2"
mkdir -p "$work/m2/org/manypy"
cp -r "$dist/maven/org/manypy/manypy" "$work/m2/org/manypy/"
mvn -o -B -q -Dmaven.repo.local="$work/m2" package || fail "mvn -o package"
classpath=target/seed-consumer.jar:target/lib/manypy-$version.jar
cmp -s target/lib/manypy-$version.jar "$jar" || fail "the consumer did not get $jar"
echo "built target/seed-consumer.jar against org.manypy:manypy:$version"
echo "figure: the jar is $(stat -c %s "$jar") bytes (manypy-$version.jar with natives)"

# serve <name> <log> <java options...>: runs ServeSeed in a new JVM and
# prints the time to the first request; fails unless every output matched.
serve() {
  name=$1 log=$2
  shift 2
  start=$(ms)
  if ! java "$@" org.manypy.consumer.ServeSeed "$model/seed_example.pt" \
         "$model/seed_example.expected.out.bin" 4 8 >"$log" 2>&1; then
    cat "$log"
    fail "$name: serving failed"
  fi
  end=$(ms)
  sed 's/^/  /' "$log"
  first=$(sed -n 's/^first request served \([0-9]*\) ms.*/\1/p' "$log")
  load=$(sed -n 's/^natives loaded in \([0-9]*\) ms.*/\1/p' "$log")
  echo "figure: $name: first request $first ms after the JVM started (loading the natives: $load ms);" \
       "the whole run $((end - start)) ms"
}
# mapped_from <log> <dir> <file>: the process mapped <file> from <dir>.
mapped_from() {
  grep -qx "mapped $2/$3" "$1" ||
    fail "$3 was not loaded from $2; the process mapped: $(grep '^mapped' "$1" | tr '\n' ' ')"
}

step "(a) natives extracted from the jar into an empty cache"
export XDG_CACHE_HOME="$work/xdg"
serve "(a) empty cache" "$work/a.log" -cp "$classpath"
cache=$(ls -d "$XDG_CACHE_HOME"/manypy/native/$version-* 2>/dev/null | head -n 1)
[ -n "$cache" ] || fail "nothing was extracted under $XDG_CACHE_HOME/manypy/native"
for f in libmanypy_jni.so libmanypy.so.0.3 manypy/libmanypy_interp.so manypy/libmanypy_hooks.so; do
  [ -f "$cache/$f" ] || fail "$cache/$f was not extracted"
  mapped_from "$work/a.log" "$cache" "$f"
done
echo "extracted into $cache and loaded from there"

step "(b) natives from the filled cache"
before=$(stat -c %i "$cache/libmanypy_jni.so")
serve "(b) filled cache" "$work/b.log" -cp "$classpath"
[ "$(stat -c %i "$cache/libmanypy_jni.so")" = "$before" ] || fail "(b) rewrote a cache that was whole"
mapped_from "$work/b.log" "$cache" libmanypy.so.0.3

step "a corrupt cache entry is replaced, not loaded"
good=$(sha256sum "$cache/libmanypy.so.0.3" | cut -d' ' -f1)
head -c 4096 /dev/urandom >"$cache/libmanypy.so.0.3"
serve "corrupt cache" "$work/corrupt.log" -cp "$classpath"
[ "$(sha256sum "$cache/libmanypy.so.0.3" | cut -d' ' -f1)" = "$good" ] ||
  fail "the corrupt $cache/libmanypy.so.0.3 was not replaced"
echo "the corrupt libmanypy.so.0.3 was replaced by the jar's copy"

step "(c) natives on disk from the Debian package: -Dmanypy.native.path=$jni_dir"
[ -f "$jni_dir/libmanypy_jni.so" ] || fail "$jni_dir/libmanypy_jni.so is missing (libmanypy-java installs it)"
export XDG_CACHE_HOME="$work/xdg-c"
serve "(c) installed natives" "$work/c.log" -Dmanypy.native.path="$jni_dir" -cp "$classpath"
mapped_from "$work/c.log" "$jni_dir" libmanypy_jni.so
mapped_from "$work/c.log" "$(dirname "$jni_dir")" libmanypy.so.$version
[ ! -e "$XDG_CACHE_HOME" ] || fail "(c) extracted natives although -Dmanypy.native.path was given"

step "(d) the Debian package's plain jar $plain_jar, no flags"
[ -f "$plain_jar" ] || fail "$plain_jar is missing (libmanypy-java installs it)"
if jar tf "$plain_jar" | grep -q '^org/manypy/native/'; then
  fail "$plain_jar carries natives; the Debian package's jar must not"
fi
# Debian's OpenJDK has /usr/lib/jni on java.library.path;
# only a host run against another prefix needs to say where.
flags=
[ "$jni_dir" = /usr/lib/jni ] || flags=-Djava.library.path=$jni_dir
serve "(d) plain jar" "$work/d.log" $flags -cp "target/seed-consumer.jar:$plain_jar"
mapped_from "$work/d.log" "$jni_dir" libmanypy_jni.so

step "an unwritable cache directory is a clear error"
unwritable() {  # <cache dir> <what it is>
  if java -Dmanypy.native.cache="$1" -cp "$classpath" org.manypy.consumer.ServeSeed \
       "$model/seed_example.pt" "$model/seed_example.expected.out.bin" 1 1 >"$work/err.log" 2>&1; then
    cat "$work/err.log"; fail "a cache in $2 ($1) did not fail"
  fi
  grep -q "^LOAD FAILED: manypy: cannot write the native libraries bundled in this jar into the cache directory $1/$version-" \
    "$work/err.log" && grep -q -- "-Dmanypy.native.cache=<dir>" "$work/err.log" ||
    { cat "$work/err.log"; fail "a cache in $2 did not give the clear error"; }
  ! grep -q "fatal error has been detected" "$work/err.log" || { cat "$work/err.log"; fail "the JVM crashed"; }
  sed 's/^/  /' "$work/err.log"
}
# Root ignores permissions, so: a read-only file system, and a file where a
# directory is expected.
if touch "$dist/.probe" 2>/dev/null; then
  rm -f "$dist/.probe"
  fail "$dist is writable: run.sh expects it mounted read-only"
fi
unwritable "$dist/cache" "a read-only file system"
echo x >"$work/a-file"
unwritable "$work/a-file/cache" "a path below a regular file"

echo
echo "PASS: org.manypy:manypy:$version served seed_example.pt in each way (4 threads x 8 calls + 1, pool of 2, every output checked)"
