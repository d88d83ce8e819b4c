// Work done once in each interpreter (opening a package, loading a replica):
// callers for the same interpreter wait for each other, callers for
// different interpreters go ahead in parallel.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "call_stop.h"

namespace manypy {

class Interpreter;
// Interpreter::lease_number (interpreter.h), without its header.
uint64_t lease_number_of(const Interpreter& interp);

class OncePerInterpreter {
 public:
  // Runs fn(interp) unless it already succeeded for `interp`. An exception
  // from fn leaves it undone (the next caller tries again) and propagates.
  // A caller that waits for another's fn gives up when its `stop` (nullptr:
  // none) is set or its deadline passes, throwing the stop's Error.
  template <typename Fn>
  void ensure(Interpreter& interp, CallStop* stop, Fn&& fn) {
    Entry* entry;
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::unique_ptr<Entry>& slot = entries_[&interp];
      if (!slot) slot = std::make_unique<Entry>();
      entry = slot.get();
    }
    std::unique_lock<std::mutex> lock(entry->mu);
    while (entry->running) {
      if (stop == nullptr) {
        entry->cv.wait(lock);
      } else if (stop->check(monotonic_ns()) != 0) {
        throw stop->error("while another call made the object ready in its interpreter");
      } else {
        // A cancel token does not wake this wait: look again at least
        // every 10 ms.
        entry->cv.wait_for(lock, std::chrono::milliseconds(10));
      }
    }
    // Done in an earlier lease of the interpreter is not done: its
    // lease_end dropped it (an interpreter given back and leased again).
    const uint64_t lease = lease_number_of(interp);
    if (entry->done && entry->lease == lease) return;
    entry->running = true;
    lock.unlock();
    struct Finish {
      Entry* entry;
      uint64_t lease;
      bool done = false;
      ~Finish() {
        std::lock_guard<std::mutex> lock(entry->mu);
        entry->running = false;
        entry->done = done;
        entry->lease = lease;
        entry->cv.notify_all();
      }
    } finish{entry, lease};
    fn(interp);
    finish.done = true;
  }

  // Runs fn(interp) for every interpreter where the work was done in its
  // current lease. For destructors: no ensure() may run concurrently.
  template <typename Fn>
  void for_each_done(Fn&& fn) {
    for (auto& [interp, entry] : entries_) {
      if (entry->done && entry->lease == lease_number_of(*interp)) fn(*interp);
    }
  }

 private:
  struct Entry {
    std::mutex mu;
    std::condition_variable cv;  // running became false
    bool running = false;
    bool done = false;
    uint64_t lease = 0;  // the interpreter's lease_number when it was done
  };
  std::mutex mu_;  // guards the map, not the entries
  std::map<Interpreter*, std::unique_ptr<Entry>> entries_;
};

}  // namespace manypy
