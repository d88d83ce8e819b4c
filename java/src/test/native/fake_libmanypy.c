/* A stand-in libmanypy.so that claims version 1.0.0, for the Java test that
 * a jar refuses a libmanypy.so of another major version at load
 * (ProcessTest.aMismatchedLibraryIsRefusedAtLoad). It has the real SONAME and
 * symbol versions (java/CMakeLists.txt): a real 1.0 would have neither, and
 * the loader would refuse it before the binding could. Only the version
 * functions exist: the binding must check them before calling anything else. */
#include <stdint.h>

__attribute__((visibility("default"))) uint32_t manypy_version_number(void) { return 10000; }
__attribute__((visibility("default"))) const char* manypy_version_string(void) { return "1.0.0"; }
