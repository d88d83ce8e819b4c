# Test tiers (CONTRIBUTING.md, "Testing, by tier"). Every ctest entry carries labels,
# set by manypy_test_labels:
# - its kind, exactly one of MANYPY_TEST_KINDS:
#     unit     the core's GoogleTest suites (tests/core)
#     capi     the C API's cmocka suites (tests/capi)
#     binding  a binding's own suite (JUnit, cargo test, go test)
#     sample   a sample or the demo, run briefly, outputs checked
#     stress   many threads, calls or pools for a while, to shake out races
#     soak     memory over a long run
#     install  manypy packaged, installed and used as a dependency
#     lint     static checks: formats, vet, clippy, exports, these labels
#     bench    a benchmark's smoke run: outputs checked, timings never
#     fuzz     generated inputs (libFuzzer, go test -fuzz, generated results)
# - what it needs beyond a build, any of MANYPY_TEST_NEEDS:
#     torch    it starts interpreters (each imports torch) or runs libtorch
#              models on the host
#     jvm, go, cargo   that toolchain
#     root     it must run as root (mounts, chroot)
# - and, where they apply, any of MANYPY_TEST_FLAGS:
#     memory   it exercises memory (values, tensors, archives, hostile
#              inputs, asynchronous calls): the sanitizer tree runs these
#              and the fuzz entries
#     quick    the short form of a binding's suite (without its long tests
#              and its race detector): scripts/test.sh --quick and the
#              second leg run it; the first leg's full run runs the full
#              form instead (ctest -LE quick)
#     leg1     it checks nothing that differs on the second leg (torch 2.x),
#              which leaves it out (scripts/test.sh says why)
# The lint entry ctest_labels checks that every entry is labelled so.
set(MANYPY_TEST_KINDS unit capi binding sample stress soak install lint bench fuzz)
set(MANYPY_TEST_NEEDS torch jvm go cargo root)
set(MANYPY_TEST_FLAGS memory quick leg1)

# Which entries this tree runs; the others are defined but disabled, so that
# a plain `ctest` here runs what scripts/test.sh runs (in build/, less the
# quick forms):
#   full    every entry (build/)
#   leg2    all but the leg1 entries (build-torch2/)
#   memory  the memory and fuzz entries (build-sanitize/)
# scripts/build.sh builds target manypy_suites_<selection>: exactly what the
# selected entries run.
set(MANYPY_TEST_SELECTION full CACHE STRING "The ctest entries this tree runs: full, leg2 or memory")
set_property(CACHE MANYPY_TEST_SELECTION PROPERTY STRINGS full leg2 memory)
if(NOT MANYPY_TEST_SELECTION MATCHES "^(full|leg2|memory)$")
  message(FATAL_ERROR "MANYPY_TEST_SELECTION must be full, leg2 or memory, not '${MANYPY_TEST_SELECTION}'")
endif()
add_custom_target(manypy_suites_${MANYPY_TEST_SELECTION})

# Scheduling (ctest -j). Entries whose checks include a wall-clock bound (a
# deadline stops a call within its timeout plus 100 ms) need a core free
# when the bound comes due, so they never run beside one another nor beside
# the entries that keep both cores busy (many threads, compiles); those may
# run beside each other. ctest's resource allocation says so with one
# resource of 2 slots, tests/resources.json, which every ctest run of the
# tree uses (CTEST_RESOURCE_SPEC_FILE): a bounded entry takes both slots
# (manypy_test_bounded), a busy one one slot (manypy_test_busy).
set(CTEST_RESOURCE_SPEC_FILE ${PROJECT_SOURCE_DIR}/tests/resources.json)
function(manypy_test_bounded)
  set_tests_properties(${ARGN} PROPERTIES RESOURCE_GROUPS "quiet:2")
endfunction()
function(manypy_test_busy)
  set_tests_properties(${ARGN} PROPERTIES RESOURCE_GROUPS "quiet:1")
endfunction()
# Without timings from an earlier run (a new clone), ctest starts entries by
# COST, highest first: the long kinds first, so that the short ones fill in
# around them and no long one is left alone at the end.
set(MANYPY_TEST_KIND_COSTS binding=300 install=150 bench=60 stress=40 fuzz=30 soak=20 sample=15)

# manypy_test_labels(<test> <kind> [<need or flag>...] [BUILDS <target>...])
# Labels <test>, which must be defined in the calling directory. BUILDS
# names the targets it runs or reads (its program, the archives...), which
# manypy_suites_<selection> builds when the entry is selected.
function(manypy_test_labels test kind)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "" "BUILDS")
  if(NOT kind IN_LIST MANYPY_TEST_KINDS)
    message(FATAL_ERROR "ctest entry ${test}: kind '${kind}' is not one of ${MANYPY_TEST_KINDS}")
  endif()
  set(labels ${arg_UNPARSED_ARGUMENTS})
  foreach(label IN LISTS labels)
    if(NOT label IN_LIST MANYPY_TEST_NEEDS AND NOT label IN_LIST MANYPY_TEST_FLAGS)
      message(FATAL_ERROR "ctest entry ${test}: label '${label}' is not one of "
                          "${MANYPY_TEST_NEEDS} ${MANYPY_TEST_FLAGS}")
    endif()
  endforeach()
  set_property(TEST ${test} APPEND PROPERTY LABELS ${kind} ${labels})
  foreach(cost IN LISTS MANYPY_TEST_KIND_COSTS)
    if(cost MATCHES "^${kind}=(.*)$")
      set_property(TEST ${test} PROPERTY COST ${CMAKE_MATCH_1})
    endif()
  endforeach()

  if(MANYPY_TEST_SELECTION STREQUAL "full")
    set(selected TRUE)
  elseif(MANYPY_TEST_SELECTION STREQUAL "leg2")
    set(selected TRUE)
    if("leg1" IN_LIST labels)
      set(selected FALSE)
    endif()
  else()
    set(selected FALSE)
    if("memory" IN_LIST labels OR kind STREQUAL "fuzz")
      set(selected TRUE)
    endif()
  endif()
  if(NOT selected)
    set_property(TEST ${test} PROPERTY DISABLED TRUE)
    return()
  endif()
  foreach(target IN LISTS arg_BUILDS)
    add_dependencies(manypy_suites_${MANYPY_TEST_SELECTION} ${target})
  endforeach()
  if(NOT kind STREQUAL "fuzz")
    manypy_sanitizer_test_environment(${test})  # cmake/hardening.cmake
  endif()
endfunction()
