#include "process_exit.h"

#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <mutex>

namespace manypy {

namespace {

struct State {
  // The process whose threads run the sections. A child forked meanwhile
  // has none of them (only the forking thread), and may have been forked
  // while another thread held `mu`: its exit() must neither wait nor lock.
  const pid_t pid = getpid();
  std::mutex mu;
  std::condition_variable ended;
  bool exiting = false;
  unsigned active = 0;  // sections in progress, process-wide
};

// Never destroyed: the hook and late sections use it while (and after)
// static destructors run.
State& state() {
  static State* s = new State();
  return *s;
}

// Sections the calling thread is inside: exit() called from inside one (it
// never is today) must not wait for itself.
thread_local unsigned t_depth = 0;

// Runs in exit(), before glibc's _dl_fini: atexit handlers run first, and
// _dl_fini (registered before main) is the last of them. An ELF destructor
// (__attribute__((destructor))) would be too late: _dl_fini runs the
// namespaces' destructors, highest namespace first, before the base
// namespace's, where this library is.
void wait_for_sections() {
  State& s = state();
  if (getpid() != s.pid) return;
  std::unique_lock<std::mutex> lock(s.mu);
  s.exiting = true;
  s.ended.wait(lock, [&] { return s.active <= t_depth; });
}

void install_hook_once() {
  static std::once_flag once;
  // Registered at the first section, not as the library loads: handlers run
  // in the reverse order of registration, so this one runs before the
  // destructors of statics made before the first start (of this library,
  // libstdc++'s, the host's). If it cannot be registered (no memory), the
  // section still runs: exit keeps the old hazard, nothing else changes.
  std::call_once(once, [] { (void)std::atexit(wait_for_sections); });
}

}  // namespace

ProcessExit::Section::Section() {
  install_hook_once();
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  began_ = !s.exiting;
  if (began_) {
    ++s.active;
    ++t_depth;
  }
}

ProcessExit::Section::~Section() {
  if (!began_) return;
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    --s.active;
    --t_depth;
  }
  s.ended.notify_all();
}

bool ProcessExit::exiting() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.exiting;
}

}  // namespace manypy
