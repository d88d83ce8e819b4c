// Brief busy-waiting before sleeping, for hand-overs between two threads
// that usually run on different cores: waking a sleeping thread costs a
// futex call and a scheduler round trip (tens of microseconds on a VM),
// noticing a flag costs nanoseconds.
#pragma once

#include <chrono>

namespace manypy {

// How long a thread polls before it sleeps. Long enough to cover a short
// call (a hand-over of a few-microsecond call is then never slept through),
// short enough that an idle thread gives its core back at once.
inline constexpr std::chrono::microseconds kSpinBeforeSleep{50};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Polls `ready()` for up to kSpinBeforeSleep; true as soon as it holds.
template <typename Ready>
bool spin_until(Ready&& ready) {
  const auto until = std::chrono::steady_clock::now() + kSpinBeforeSleep;
  for (unsigned k = 0;; ++k) {
    if (ready()) return true;
    cpu_relax();
    // The clock is read every 64 polls: cheap, and precise enough.
    if ((k & 63) == 63 && std::chrono::steady_clock::now() >= until) return ready();
  }
}

}  // namespace manypy
