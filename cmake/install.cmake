# What `cmake --install <build> --prefix P` puts in P (GNUInstallDirs):
#   include/manypy.h
#   lib/libmanypy.so.0.3.0, and the links libmanypy.so.0.3 (SONAME), libmanypy.so
#   lib/manypy/libmanypy_interp.so, lib/manypy/libmanypy_hooks.so: private,
#     found relative to libmanypy.so (core/src/runtime_paths.h)
#   lib/pkgconfig/manypy.pc
#   lib/cmake/manypy/: find_package(manypy 0.3), imported target manypy::manypy
# and from the Java binding share/java/manypy-0.3.0.jar, share/java/manypy.jar
# and lib/jni/libmanypy_jni.so.
# Nothing installed refers to the build tree: the .pc and CMake files find
# the prefix from their own location, and the only RUNPATH of the first leg
# is libmanypy_jni.so's $ORIGIN:$ORIGIN/.. (the second leg's also name the
# wheel's libtorch and the Python, cmake/python_torch.cmake).
# No test, benchmark or sample is installed.
include(CMakePackageConfigHelpers)

set(MANYPY_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/manypy)

# Each file belongs to a component, and each component is one Debian package
# (cmake/packaging.cmake): runtime (libmanypy0.3), dev (libmanypy-dev), and
# java (libmanypy-java, from java/).
install(FILES capi/include/manypy.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
install(TARGETS manypy EXPORT manypy-targets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev)
# The private directory: "manypy" beside libmanypy.so, as in the build tree.
install(TARGETS manypy_interp manypy_hooks
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/manypy COMPONENT runtime)

# pkg-config. manypy.pc finds the prefix relative to its own directory
# (${pcfiledir}), so it is right wherever --prefix puts it.
file(RELATIVE_PATH MANYPY_PC_PREFIX /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
string(REGEX REPLACE "/$" "" MANYPY_PC_PREFIX "${MANYPY_PC_PREFIX}")
configure_file(cmake/manypy.pc.in ${CMAKE_BINARY_DIR}/generated/manypy.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/generated/manypy.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)
# The build tree's own, never installed: PKG_CONFIG_PATH=<build>/pkgconfig
# makes pkg-config pick it for "manypy", so the Go and Rust bindings build
# against a build tree.
configure_file(cmake/manypy-uninstalled.pc.in
               ${CMAKE_BINARY_DIR}/pkgconfig/manypy-uninstalled.pc @ONLY)

# CMake: find_package(manypy 0.3) accepts 0.3.x only while the major is 0
# (cmake/version.cmake).
install(EXPORT manypy-targets NAMESPACE manypy:: DESTINATION ${MANYPY_CMAKE_INSTALL_DIR}
        COMPONENT dev)
configure_package_config_file(cmake/manypy-config.cmake.in
  ${CMAKE_BINARY_DIR}/generated/manypy-config.cmake
  INSTALL_DESTINATION ${MANYPY_CMAKE_INSTALL_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/generated/manypy-config-version.cmake
  COMPATIBILITY ${MANYPY_VERSION_COMPATIBILITY})
install(FILES ${CMAKE_BINARY_DIR}/generated/manypy-config.cmake
              ${CMAKE_BINARY_DIR}/generated/manypy-config-version.cmake
        DESTINATION ${MANYPY_CMAKE_INSTALL_DIR} COMPONENT dev)
