# Sanitizers (MANYPY_SANITIZE) and libFuzzer coverage (MANYPY_FUZZ) for every
# target defined after this file is included: the core, libmanypy.so, the
# tests, samples and benchmarks, the fuzz targets. Not for manypy_interp and
# manypy_hooks, defined before it, nor for what manypy_uninstrumented() names
# (the sample operator library): they are loaded into link-map namespaces,
# which see no sanitizer runtime (docs/hardening.md, "Sanitizers").
#
# Sets MANYPY_NO_UNDEFINED, the link option that forbids undefined symbols
# in libmanypy.so: empty when sanitizing, because clang links a sanitizer's
# runtime into executables only, and an instrumented shared library refers
# to runtime symbols that the executable provides.
set(MANYPY_NO_UNDEFINED -Wl,-z,defs)

if(MANYPY_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang" OR NOT CMAKE_C_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "MANYPY_FUZZ=ON needs clang (libFuzzer): configure with "
                        "-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++")
  endif()
  # The fuzz targets always run with ASan and UBSan.
  if(NOT MANYPY_SANITIZE MATCHES "address" OR NOT MANYPY_SANITIZE MATCHES "undefined")
    message(FATAL_ERROR "MANYPY_FUZZ=ON needs MANYPY_SANITIZE=address,undefined")
  endif()
endif()

if(MANYPY_SANITIZE)
  if(MANYPY_BUILD_JAVA)
    # A JVM would need the runtime preloaded; the Java suite is not for this.
    message(FATAL_ERROR "MANYPY_SANITIZE needs MANYPY_BUILD_JAVA=OFF")
  endif()
  # Every finding stops the process: a sanitized test or fuzz run fails.
  add_compile_options(-fsanitize=${MANYPY_SANITIZE} -fno-sanitize-recover=all
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${MANYPY_SANITIZE})
  if(CMAKE_C_COMPILER_ID STREQUAL "Clang")
    # C programs (the C samples and tests) link libmanypy.so, whose C++ is
    # instrumented: they need the runtime's C++ part (vptr and function type
    # checks), which clang links for C++ programs only.
    # That part needs libstdc++, which a C link does not bring.
    add_link_options(-fsanitize-link-c++-runtime)
    string(APPEND CMAKE_C_STANDARD_LIBRARIES " -lstdc++")
  endif()
  set(MANYPY_NO_UNDEFINED "")
endif()

if(MANYPY_FUZZ)
  # Coverage feedback from our own code. libtorch (and the zip reader inside
  # it) is Debian's, uninstrumented: the fuzzer sees no coverage there.
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

# A library loaded into interpreter namespaces: no sanitizer, no coverage.
function(manypy_uninstrumented target)
  if(MANYPY_SANITIZE OR MANYPY_FUZZ)
    # (-fno-sanitize=all drops fuzzer-no-link coverage too.)
    target_compile_options(${target} PRIVATE -fno-sanitize=all)
    target_link_options(${target} PRIVATE -fno-sanitize=all)
  endif()
endfunction()

# The sanitizers' settings for a ctest entry of a sanitizer tree
# (manypy_test_labels calls it for every selected entry but the fuzz ones,
# whose scripts set their own, tests/fuzz/sanitizer_env.sh):
#  - allocator_may_return_null: an allocation that cannot be served returns
#    NULL (MANYPY_ERR_RESOURCE_EXHAUSTED), as glibc's would, instead of
#    ending the process: the suites test exactly that;
#  - leaks are checked, with fast stacks and lsan_fuzzing.supp (libtorch's
#    known leak on a refused archive, F7), except in the entries listed
#    below: their "leaks" are host objects an interpreter still references
#    at exit, which LeakSanitizer cannot see (each namespace's libc keeps a
#    heap of its own; interpreters are never finalized), or on purpose;
#  - UBSan stops at its first report, with a stack.
set(MANYPY_SANITIZER_NO_LEAK_CHECK
  capi_tensors                 # tensors an interpreter still shares at exit
  soak_quick                   # archive record views held by interpreters
  # These exit with live pools, packages, objects and calls, on purpose.
  capi_exit_live_pools_return capi_exit_live_pools_thread-exit capi_exit_live_pools_async
  capi_exit_live_pools_starting
  # Retires interpreters on purpose (a dozen a run), and retired ones are
  # never finalized: the archive records their objects hold stay allocated.
  capi_fuzz_behaviour
)
function(manypy_sanitizer_test_environment test)
  if(NOT MANYPY_SANITIZE)
    return()
  endif()
  set(leaks 1)
  if(test IN_LIST MANYPY_SANITIZER_NO_LEAK_CHECK)
    set(leaks 0)
  endif()
  set_property(TEST ${test} APPEND PROPERTY ENVIRONMENT
    "ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=${leaks}:fast_unwind_on_malloc=1"
    "LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/fuzz/lsan_fuzzing.supp:print_suppressions=0"
    "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
endfunction()
