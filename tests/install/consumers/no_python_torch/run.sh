#!/bin/sh
# Run last in the clean root (tests/install/clean_root.sh), because it breaks
# the install: python3-torch removed as `dpkg --force-depends` (or a
# careless admin) would, libtorch left in place. A program using manypy must
# then get a clear error that names the fix, not a crash.
set -eu
# shellcheck disable=SC2046
cc sample/consumer.c -o consumer $(pkg-config --cflags --libs manypy) -lm
dpkg --remove --force-depends python3-torch >dpkg.log 2>&1 || { cat dpkg.log; exit 1; }
if ./consumer /model/seed_example.pt /model/seed_example.expected.out.bin >out.log 2>&1; then
  cat out.log
  echo "the consumer served a model with python3-torch removed"
  exit 1
fi
cat out.log
grep -q "cannot import torch" out.log && grep -q "apt-get install python3-torch" out.log || {
  echo "the error does not say that torch is missing and how to install it"
  exit 1
}
echo "without python3-torch: a clear error, as expected"
