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
