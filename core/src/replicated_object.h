// An object unpickled from a package and replicated lazily into whichever
// interpreter of the pool serves a call.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "call_options.h"
#include "dispatch/job.h"
#include "once_per_interpreter.h"
#include "package.h"

namespace manypy {

class ReplicatedObject : public std::enable_shared_from_this<ReplicatedObject> {
 public:
  // Unpickles module/name in one interpreter now, so errors surface here.
  // Shared: asynchronous calls and batchers hold the object too. The last
  // to let go destroys it; if that is one of manypy's threads (a completion
  // callback's), the completion thread does, since destroying waits for
  // calls (dispatch/threads.h).
  static std::shared_ptr<ReplicatedObject> load(std::shared_ptr<Package> package,
                                                std::string module, std::string name);
  // Waits for synchronous calls in flight, then drops every replica.
  ~ReplicatedObject();
  ReplicatedObject(const ReplicatedObject&) = delete;
  ReplicatedObject& operator=(const ReplicatedObject&) = delete;

  // method nullptr: call the object itself.
  Value call(const CallOptions& options, const std::string* method, const Value* args,
             const Value* kwargs);
  // The same, asynchronously: `done` gets the outcome exactly once, on a
  // thread of manypy's (dispatch/job.h). Arguments are copied (tensors are
  // shared). Throws Error if the call is refused; `done` then never runs.
  void call_async(const CallOptions& options, const std::string* method, const Value* args,
                  const Value* kwargs, dispatch::Done done);
  Value getattr(const CallOptions& options, const std::string& name);
  bool hasattr(const std::string& name);

  Pool& pool() const { return package_->pool(); }

 private:
  class AsyncCall;
  ReplicatedObject(std::shared_ptr<Package> package, std::string module, std::string name);

  // Runs fn(interp, stop) on an interpreter picked per `interpreter`,
  // within `limits`, with the replica there loaded first. A template (in
  // the .cpp file), so that a call's arguments reach the dispatcher's Work
  // without a heap-allocated closure.
  template <typename Fn>
  // `model`: the call is a request of that model (Dispatcher::call).
  Value on_replica(int interpreter, const CallLimits& limits, const std::string* model, Fn&& fn);
  void ensure_loaded(Interpreter& interp, CallStop* stop);

  const uint64_t id_;
  std::shared_ptr<Package> package_;
  const std::string module_;
  const std::string name_;

  OncePerInterpreter replicas_;

  std::mutex calls_mu_;
  std::condition_variable calls_cv_;
  int calls_ = 0;
};

}  // namespace manypy
