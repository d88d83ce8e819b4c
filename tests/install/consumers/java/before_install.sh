#!/bin/sh
# In the clean root before the packages are installed (clean_root.sh): the
# Maven artifact's natives on a machine without python3-torch. Loading them
# must fail with the message that names what to install.
set -eu
jar=$(ls /dist/maven/org/manypy/manypy/*/manypy-*[0-9].jar)
work=$(mktemp -d)
cp before/Probe.java "$work/"
javac -d "$work" -cp "$jar" "$work/Probe.java"
XDG_CACHE_HOME=$work/cache java -cp "$jar:$work" Probe
echo "without python3-torch, the jar's natives give a clear error"
