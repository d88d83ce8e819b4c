// Which kind of thread is running: the host's own, or one of the threads
// manypy keeps for the life of the process. A synchronous call made on one
// of manypy's threads (an asynchronous call's completion callback making a
// call) runs right there instead of waiting for another of manypy's
// threads: manypy's threads then never wait for each other, so they cannot
// deadlock, whatever the callbacks do.
#pragma once

#include <cstddef>
#include <functional>

namespace manypy::dispatch {

enum class ThreadKind {
  kHost,       // any thread manypy did not start
  kHome,       // an interpreter's home thread (lane.h)
  kWorker,     // a host worker (host_workers.h)
  kCompleter,  // the completion thread (completer.h)
  kBatcher,    // a dynamic batcher's thread (batcher.h)
};

ThreadKind this_thread_kind();
// Marks the calling thread, once, as it starts.
void set_this_thread_kind(ThreadKind kind);

inline bool on_manypy_thread() { return this_thread_kind() != ThreadKind::kHost; }

// The stack of every thread manypy starts to run Python or torch on (home
// threads, the completion thread, host workers): stated, not left to the
// host's `ulimit -s` or a JVM's defaults, because how deep model code may
// recurse through C before RecursionError depends on it (core/interp/
// stack_guard.c; docs/threads.md, "Deep recursion").
inline constexpr size_t kThreadStackBytes = 8 * 1024 * 1024;

// Starts a detached thread with a kThreadStackBytes stack, running `body`
// for the rest of the process. Throws std::system_error when the thread
// cannot be made, as std::thread does.
void start_detached(std::function<void()> body);

}  // namespace manypy::dispatch
