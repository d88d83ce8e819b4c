#include "stack_headroom.h"

#include <pthread.h>

#include <cstdint>
#include <string>

#include "error.h"

namespace manypy {

namespace {

// The lowest address of the calling thread's stack (stacks grow down), or
// nullptr if unknown. Read once per thread: for the main thread glibc reads
// /proc/self/maps to answer.
const char* stack_low_end() {
  thread_local const char* low = [] {
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) return static_cast<const char*>(nullptr);
    void* addr = nullptr;
    size_t size = 0;
    int rc = pthread_attr_getstack(&attr, &addr, &size);
    pthread_attr_destroy(&attr);
    return rc == 0 ? static_cast<const char*>(addr) : nullptr;
  }();
  return low;
}

}  // namespace

size_t stack_headroom() {
  const char* low = stack_low_end();
  char here;
  if (!low || &here < low) return SIZE_MAX;
  return static_cast<size_t>(&here - low);
}

void require_stack_headroom() {
  size_t left = stack_headroom();
  if (left >= kMinStackHeadroom) return;
  throw Error(Code::kResourceExhausted,
              "the calling thread has only " + std::to_string(left / 1024) +
                  " KiB of stack left, and running Python and torch on it could overflow it "
                  "and crash the process; call from a thread with a larger stack (at least " +
                  std::to_string(kMinStackHeadroom / 1024) +
                  " KiB free: in a JVM, -Xss or the Thread's stackSize) or use the HANDOFF "
                  "thread mode, whose calls run on the library's own threads");
}

}  // namespace manypy
