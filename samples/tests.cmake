# ctest entries that run the samples (included by samples/CMakeLists.txt
# when MANYPY_BUILD_TESTS is on). Each is its own process; the interpreters
# they start (4, 1 and 2) cost about a second and 115 MB each.

# The tutorial program on the tutorial's model: the slice it prints must
# equal eager Python's (seed_example.expected.out.bin). The program checks
# nothing itself, as the tutorial's does not; the script reads its output.
# PATH_TO_EXTERN_PYTHON_PACKAGES points at the packages directory of the
# embedded Python's torch (Debian's dist-packages, or the venv's; numpy),
# so the sys.path option is exercised as the tutorial uses it.
add_test(NAME sample_deploy_example
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/c/check_deploy_output.py
                 $<TARGET_FILE:manypy_deploy_example> ${MANYPY_ARCHIVES}/seed_example.pt
                 ${MANYPY_ARCHIVES}/seed_example.expected.out.bin)
set_tests_properties(sample_deploy_example PROPERTIES
  TIMEOUT 180
  ENVIRONMENT "PATH_TO_EXTERN_PYTHON_PACKAGES=${MANYPY_PYTHON_PACKAGES}")
manypy_test_labels(sample_deploy_example sample torch BUILDS manypy_deploy_example manypy_archives)

# Loads libmanypy.so with dlopen and exits non-zero on any failure.
add_test(NAME sample_dlopen_example COMMAND manypy_dlopen_example)
set_tests_properties(sample_dlopen_example PROPERTIES TIMEOUT 120)
manypy_test_labels(sample_dlopen_example sample torch BUILDS manypy_dlopen_example)

# The demo, briefly: exit 0 means every output matched eager Python on every
# interpreter and every call succeeded. Timings are not checked.
add_test(NAME demo_quick COMMAND manypy_demo --quick --seconds 0.3)
set_tests_properties(demo_quick PROPERTIES TIMEOUT 300)
manypy_test_labels(demo_quick sample torch BUILDS manypy_demo)
