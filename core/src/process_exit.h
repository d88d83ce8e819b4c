// Process exit while manypy's own threads start interpreters (hazard 6 of
// docs/isolation.md). A background start (serve-early, growth, the
// replacement of a retired interpreter) runs `import torch` in a new
// namespace on its home thread. If the host exits meanwhile, exit() runs
// the static destructors of every namespace's libraries (glibc's _dl_fini)
// under that import: seen as SIGSEGV in libtorch_python, gflags' "linked
// both statically and dynamically", or a hang.
//
// So each piece of background work that runs code in a namespace is a
// section: an exit hook waits until the sections in progress have ended,
// and once the process is exiting no new one begins (its work fails with
// "the process is exiting"). Waiting is bounded by one start (seconds);
// nothing the model does runs in a section (calls are not sections: a host
// that exits while its own calls run keeps that hazard, docs/isolation.md).
#pragma once

#include "error.h"

namespace manypy {

class ProcessExit {
 public:
  // One section of background work. Begins unless the process is exiting
  // (then began() is false and the work must not run). Thread safe.
  class Section {
   public:
    Section();
    ~Section();
    Section(const Section&) = delete;
    Section& operator=(const Section&) = delete;
    bool began() const { return began_; }

   private:
    bool began_;
  };

  // Whether exit() has begun (the hook ran). Thread safe.
  static bool exiting();
};

// What background work that did not begin fails with.
inline Error exiting_error() {
  return Error(Code::kInterpreterBroken,
               "not started: the process is exiting (docs/isolation.md, hazard 6)");
}

}  // namespace manypy
