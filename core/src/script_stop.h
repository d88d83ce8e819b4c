// Stopping a TorchScript call on the host before its next tensor operator.
#pragma once

#include "call_stop.h"

namespace manypy {

// While alive, every operator the calling thread dispatches first checks
// `stop` (nullptr: no effect, no cost) and fails if it is set or its
// deadline has passed. The failure surfaces from the TorchScript call; the
// caller then reports stop->error().
class ScriptStopScope {
 public:
  explicit ScriptStopScope(CallStop* stop);
  ~ScriptStopScope();
  ScriptStopScope(const ScriptStopScope&) = delete;
  ScriptStopScope& operator=(const ScriptStopScope&) = delete;

 private:
  CallStop* previous_;
  bool included_;
};

}  // namespace manypy
