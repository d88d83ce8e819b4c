// Which kind of thread is running: the host's own, or one of the threads
// manypy keeps for the life of the process. A synchronous call made on one
// of manypy's threads (an asynchronous call's completion callback making a
// call) runs right there instead of waiting for another of manypy's
// threads: manypy's threads then never wait for each other, so they cannot
// deadlock, whatever the callbacks do.
#pragma once

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

}  // namespace manypy::dispatch
