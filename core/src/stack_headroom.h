// How much stack the calling thread has left, so that a call entering an
// interpreter from a thread with a small stack fails with a clear error
// instead of overflowing it inside Python or torch (which kills the whole
// process: seen with a JVM thread of 160 KB).
#ifndef MANYPY_STACK_HEADROOM_H
#define MANYPY_STACK_HEADROOM_H

#include <cstddef>

namespace manypy {

// Calls run on the caller's thread (DIRECT mode) only with at least this
// much stack left. Measured: one call of the sample python_heavy model
// needed between 160 and 192 KB of JVM thread stack.
inline constexpr size_t kMinStackHeadroom = 256 * 1024;

// Bytes between the caller's stack pointer and the end of its stack, or
// SIZE_MAX if the stack's bounds cannot be read. Cheap after the first call
// on a thread.
size_t stack_headroom();

// Throws Error(kResourceExhausted), naming the fixes, when the calling
// thread has less than kMinStackHeadroom left.
void require_stack_headroom();

}  // namespace manypy

#endif
