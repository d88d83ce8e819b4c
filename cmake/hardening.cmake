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
