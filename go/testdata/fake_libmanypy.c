/* A stand-in libmanypy.so that claims version 1.0.0, for TestVersionMismatch:
 * the Go package must refuse it with an error at its first call, before it
 * calls anything else. It has the real SONAME and symbol versions
 * (go/CMakeLists.txt), so the loader accepts it in the real one's place;
 * only the binding's check can refuse it. Only the version functions exist:
 * any other call would fail to bind and end the process. */
#include <stdint.h>

__attribute__((visibility("default"))) uint32_t manypy_version_number(void) { return 10000; }
__attribute__((visibility("default"))) const char* manypy_version_string(void) { return "1.0.0"; }
