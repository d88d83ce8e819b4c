#!/bin/sh
# The C consumer, in the clean root (tests/install/clean_root.sh): the
# consumer sample (here in sample/) built with pkg-config against the
# installed libmanypy-dev, as its README says, then run on its own and
# serving the model.
set -eu
echo "pkg-config --modversion manypy: $(pkg-config --modversion manypy)"
# shellcheck disable=SC2046
cc sample/consumer.c -o consumer $(pkg-config --cflags --libs manypy) -lm
./consumer
./consumer /model/seed_example.pt /model/seed_example.expected.out.bin
