#!/bin/sh
# The CMake consumer, in the clean root (tests/install/clean_root.sh): the
# consumer sample (here in sample/) built with find_package(manypy 0.3)
# against the installed libmanypy-dev, then run on its own and serving the
# model.
set -eu
cmake -S sample -B build -DCMAKE_BUILD_TYPE=Release >cmake.log 2>&1 || { cat cmake.log; exit 1; }
cmake --build build >>cmake.log 2>&1 || { cat cmake.log; exit 1; }
grep -F manypy_DIR build/CMakeCache.txt
./build/consumer
./build/consumer /model/seed_example.pt /model/seed_example.expected.out.bin
