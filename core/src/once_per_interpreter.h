// Work done once in each interpreter (opening a package, loading a replica):
// callers for the same interpreter wait for each other, callers for
// different interpreters go ahead in parallel.
#pragma once

#include <map>
#include <memory>
#include <mutex>

namespace manypy {

class Interpreter;

class OncePerInterpreter {
 public:
  // Runs fn(interp) unless it already succeeded for `interp`. An exception
  // from fn leaves it undone (the next caller tries again) and propagates.
  template <typename Fn>
  void ensure(Interpreter& interp, Fn&& fn) {
    Entry* entry;
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::unique_ptr<Entry>& slot = entries_[&interp];
      if (!slot) slot = std::make_unique<Entry>();
      entry = slot.get();
    }
    std::lock_guard<std::mutex> lock(entry->mu);
    if (entry->done) return;
    fn(interp);
    entry->done = true;
  }

  // Runs fn(interp) for every interpreter where the work was done. For
  // destructors: no ensure() may run concurrently.
  template <typename Fn>
  void for_each_done(Fn&& fn) {
    for (auto& [interp, entry] : entries_) {
      if (entry->done) fn(*interp);
    }
  }

 private:
  struct Entry {
    std::mutex mu;
    bool done = false;
  };
  std::mutex mu_;  // guards the map, not the entries
  std::map<Interpreter*, std::unique_ptr<Entry>> entries_;
};

}  // namespace manypy
