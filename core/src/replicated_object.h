// An object unpickled from a package and replicated lazily into whichever
// interpreter of the pool serves a call.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "call_options.h"
#include "once_per_interpreter.h"
#include "package.h"

namespace manypy {

class ReplicatedObject {
 public:
  // Unpickles module/name in one interpreter now, so errors surface here.
  ReplicatedObject(std::shared_ptr<Package> package, std::string module, std::string name);
  // Waits for calls in flight, then drops every replica.
  ~ReplicatedObject();
  ReplicatedObject(const ReplicatedObject&) = delete;
  ReplicatedObject& operator=(const ReplicatedObject&) = delete;

  // method nullptr: call the object itself.
  Value call(const CallOptions& options, const std::string* method, const Value* args,
             const Value* kwargs);
  Value getattr(const CallOptions& options, const std::string& name);
  bool hasattr(const std::string& name);

 private:
  // Runs fn(interp) on an interpreter picked per `interpreter`, with the
  // replica there loaded first, within `stop` (nullptr: unbounded).
  template <typename Fn>
  auto on_replica(int interpreter, CallStop* stop, Fn&& fn);
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
