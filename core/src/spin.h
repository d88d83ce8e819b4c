// Brief busy-waiting before sleeping, for hand-overs between two threads
// that usually run on different cores: waking a sleeping thread costs a
// futex call and a scheduler round trip (tens of microseconds on a VM),
// noticing a flag costs nanoseconds.
#pragma once

#include <chrono>
#include <thread>

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
// Between polls it yields the core: the thread it waits for is often
// runnable on this very core (the scheduler puts a woken thread beside its
// waker), and a pure spin would keep it from running for the whole window.
template <typename Ready>
bool spin_until(Ready&& ready) {
  const auto until = std::chrono::steady_clock::now() + kSpinBeforeSleep;
  for (unsigned k = 0;; ++k) {
    if (ready()) return true;
    if (k < 64) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
    if ((k & 15) == 15 && std::chrono::steady_clock::now() >= until) return ready();
  }
}

}  // namespace manypy
