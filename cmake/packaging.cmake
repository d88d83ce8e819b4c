# Packages made from the build by CPack (scripts/package.sh; docs/install.md).
#   first leg (Debian's torch): three Debian packages, one per install
#     component (cmake/install.cmake, java/):
#       runtime -> libmanypy0.3     libmanypy.so.0.3* and the private manypy/
#       dev     -> libmanypy-dev    manypy.h, libmanypy.so, manypy.pc, CMake files
#       java    -> libmanypy-java   the jar and libmanypy_jni.so
#   second leg (a wheel's torch): a relocatable tarball of the install prefix,
#     every component in one.
# The package name carries the ABI (libmanypy0.3 for SONAME libmanypy.so.0.3,
# docs/c-api.md), so that two ABIs can be installed side by side; the -dev
# and -java packages need exactly the runtime package of their own version.
# Run-time dependencies are computed by dpkg-shlibdeps from the libraries'
# NEEDED entries, except python3-torch: the interpreters `import torch`, a
# Python module that no ELF file names.

set(MANYPY_HOMEPAGE "https://manypy.dev")
set(MANYPY_MAINTAINER "manypy maintainers <maintainers@manypy.dev>")

set(CPACK_PACKAGE_NAME manypy)
set(CPACK_PACKAGE_VENDOR "the manypy authors")
set(CPACK_PACKAGE_CONTACT "${MANYPY_MAINTAINER}")
set(CPACK_PACKAGE_HOMEPAGE_URL "${MANYPY_HOMEPAGE}")
# Each package's description is its own (below): its first line is the
# synopsis. CPack would put a CPACK_PACKAGE_DESCRIPTION_SUMMARY before each.
set(manypy_synopsis "PyTorch models in a pool of isolated embedded CPython interpreters")
set(manypy_about "manypy runs PyTorch models written in Python inside services written in
C, C++, Java, Go or Rust. It keeps a pool of isolated CPython interpreters
in the host process, each with its own GIL, behind a stable C ABI.")
set(CPACK_RESOURCE_FILE_LICENSE ${CMAKE_SOURCE_DIR}/LICENSE)
# Debug information stays in the build tree: packages carry stripped files.
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/dist)
set(CPACK_THREADS 0)

if(torch_from_wheel)
  # The second leg: its libraries carry RUNPATHs to the wheel's libtorch and
  # the Python that built them (cmake/python_torch.cmake), so the tarball
  # needs that Python environment on the machine that unpacks it.
  set(CPACK_GENERATOR TGZ)
  string(REGEX MATCH "^[0-9]+\\.[0-9]+" torch_minor "${MANYPY_TORCH_VERSION}")
  # Kept apart for tests/install: include(CPack) reuses CPACK_PACKAGE_FILE_NAME.
  set(MANYPY_TARBALL_NAME
      "manypy-${PROJECT_VERSION}-linux-${CMAKE_SYSTEM_PROCESSOR}-torch${torch_minor}-py${Python3_VERSION_MAJOR}.${Python3_VERSION_MINOR}")
  set(CPACK_PACKAGE_FILE_NAME ${MANYPY_TARBALL_NAME})
  set(CPACK_ARCHIVE_COMPONENT_INSTALL OFF)
  include(CPack)
  return()
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev java)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(MANYPY_DEB_VERSION "${PROJECT_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE}")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${MANYPY_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "${MANYPY_HOMEPAGE}")
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The package's own libraries, for dpkg-shlibdeps: libmanypy_jni.so needs
# libmanypy.so.0.3, which is in the runtime package, not yet installed.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS
    ${CMAKE_BINARY_DIR}/lib ${MANYPY_PRIVATE_OUTPUT_DIRECTORY})

# torch's minor is torch's ABI: 1.13's libraries are libtorch*.so.1.13.
string(REGEX MATCH "^([0-9]+)\\.([0-9]+)" _ "${MANYPY_TORCH_VERSION}")
math(EXPR torch_next_minor "${CMAKE_MATCH_2} + 1")
set(torch_range "python3-torch (>= ${CMAKE_MATCH_1}.${CMAKE_MATCH_2}), python3-torch (<< ${CMAKE_MATCH_1}.${torch_next_minor})")

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME "libmanypy${MANYPY_ABI_VERSION}")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "${torch_range}")
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION "${manypy_synopsis}
${manypy_about}

This package holds the shared library and its private libraries.")
# shlibs for the packages that link libmanypy.so.0.3: any 0.3.x from this
# one on (the ABI rule while the major is 0).
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
# ldconfig runs through dpkg's trigger, as debhelper's packages do (CPack
# would otherwise write postinst and postrm scripts that call it).
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA ${CMAKE_SOURCE_DIR}/cmake/debian/triggers)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libmanypy-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# manypy.h includes <dlpack/dlpack.h>: a header no ELF file names.
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "libmanypy${MANYPY_ABI_VERSION} (= ${MANYPY_DEB_VERSION}), libdlpack-dev")
# Programs that build with pkg-config (C's one-liner, cgo, the Rust crate)
# need it; CMake's find_package does not.
set(CPACK_DEBIAN_DEV_PACKAGE_RECOMMENDS "pkgconf | pkg-config")
set(CPACK_DEBIAN_DEV_DESCRIPTION "manypy: development files
${manypy_about}

This package holds the header manypy.h, the link to the library, and the
pkg-config and CMake files (find_package(manypy), manypy::manypy).")

set(CPACK_DEBIAN_JAVA_PACKAGE_NAME libmanypy-java)
set(CPACK_DEBIAN_JAVA_PACKAGE_SECTION java)
# No dependency on a JRE: Debian's Java policy leaves the choice of JRE to
# the program that uses a library.
set(CPACK_DEBIAN_JAVA_PACKAGE_DEPENDS "libmanypy${MANYPY_ABI_VERSION} (= ${MANYPY_DEB_VERSION})")
set(CPACK_DEBIAN_JAVA_DESCRIPTION "manypy: Java binding
${manypy_about}

This package holds the Java API (org.manypy) and its JNI library.")

# Every package carries /usr/share/doc/<package>/copyright (DEP-5) and a
# changelog.Debian.gz, as Debian policy asks.
file(STRINGS ${CMAKE_SOURCE_DIR}/LICENSE license_lines)
list(SUBLIST license_lines 5 -1 license_lines)  # after the title and notice
set(MANYPY_LICENSE_TEXT "")
foreach(line IN LISTS license_lines)
  if(line STREQUAL "")
    string(APPEND MANYPY_LICENSE_TEXT " .\n")
  else()
    string(APPEND MANYPY_LICENSE_TEXT " ${line}\n")
  endif()
endforeach()
string(STRIP "${MANYPY_LICENSE_TEXT}" MANYPY_LICENSE_TEXT)
string(PREPEND MANYPY_LICENSE_TEXT " ")
# Honours SOURCE_DATE_EPOCH, for reproducible packages.
string(TIMESTAMP MANYPY_CHANGELOG_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
set(debian_docs ${CMAKE_BINARY_DIR}/generated/debian)
configure_file(cmake/debian/copyright.in ${debian_docs}/copyright @ONLY)
configure_file(cmake/debian/changelog.in ${debian_docs}/changelog.Debian @ONLY)
file(ARCHIVE_CREATE OUTPUT ${debian_docs}/changelog.Debian.gz
     PATHS ${debian_docs}/changelog.Debian FORMAT raw COMPRESSION GZip
     COMPRESSION_LEVEL 9 MTIME 0)
foreach(component runtime dev java)
  string(TOUPPER ${component} upper)
  install(FILES ${debian_docs}/copyright ${debian_docs}/changelog.Debian.gz
          DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${CPACK_DEBIAN_${upper}_PACKAGE_NAME}
          COMPONENT ${component} EXCLUDE_FROM_ALL)
endforeach()

include(CPack)
