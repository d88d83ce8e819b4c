# The ABI version (docs/c-api.md, "ABI and versions"): while the major is 0,
# major.minor (0.3); from 1.0 on, the major. It names the SONAME
# (libmanypy.so.0.3) and the newest version node of the exports
# (MANYPY_0.3, capi/manypy.map).
#
# project(VERSION) and manypy.h's MANYPY_VERSION_* must agree: the header is
# what programs compile against, CMake names the files. Checked here so a
# bump of one without the other fails at configure time.
file(STRINGS ${CMAKE_SOURCE_DIR}/capi/include/manypy.h version_lines
     REGEX "^#define MANYPY_VERSION_(MAJOR|MINOR|PATCH) ")
set(header_version "")
foreach(part MAJOR MINOR PATCH)
  string(REGEX MATCH "MANYPY_VERSION_${part} ([0-9]+)" _ "${version_lines}")
  list(APPEND header_version ${CMAKE_MATCH_1})
endforeach()
list(JOIN header_version . header_version)
if(NOT header_version VERSION_EQUAL PROJECT_VERSION)
  message(FATAL_ERROR "manypy.h says version ${header_version}, CMakeLists.txt says "
                      "${PROJECT_VERSION}: bump both")
endif()

if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(MANYPY_ABI_VERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
  set(MANYPY_VERSION_COMPATIBILITY SameMinorVersion)
else()
  set(MANYPY_ABI_VERSION ${PROJECT_VERSION_MAJOR})
  set(MANYPY_VERSION_COMPATIBILITY SameMajorVersion)
endif()
