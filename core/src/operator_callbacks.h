// Operator callbacks registered by the host: installed in every interpreter,
// present and future, and in the host's own libtorch (interpreter -1). One
// per process, the Runtime's (runtime.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "hooks_api.h"

namespace manypy {

class Interpreter;

class OperatorCallbacks {
 public:
  // Called for each sampled operator, on the thread that runs it; phase 0 is
  // entering, 1 leaving. Must not throw.
  using Handler = std::function<void(int phase, const mph_op_event& event)>;

  struct Options {
    double sampling_probability = 1.0;  // in (0, 1]
    bool needs_inputs = false;
  };

  // The hooks libraries call back through a plain function and an id, so
  // their events reach the one instance there is (the Runtime's); a second
  // is a programming error (std::logic_error).
  OperatorCallbacks();
  OperatorCallbacks(const OperatorCallbacks&) = delete;
  OperatorCallbacks& operator=(const OperatorCallbacks&) = delete;

  // Returns the registration's id. Throws Error (kOutOfRange for a bad
  // probability, kResourceExhausted when every slot is taken).
  uint64_t add(Handler handler, const Options& options);

  // Stops every further call before returning (calls in flight finish
  // first), then destroys the handler. Throws Error(kNoSuchName) for an
  // unknown id.
  void remove(uint64_t id);

  // An interpreter that has just started takes part from now on: every live
  // registration is installed in it (InterpreterSet, when it starts one).
  void join(Interpreter& interp);

 private:
  struct Registration;
  static void emit(uint64_t id, int phase, const mph_op_event* event);
  static void emit_untyped(uint64_t id, int phase, const void* event);
  static void install(Interpreter& interp, const Registration& reg);

  std::mutex mu_;                // add/remove/join, one at a time
  std::shared_mutex lookup_mu_;  // events read live_; remove takes entries out
  std::map<uint64_t, std::shared_ptr<Registration>> live_;
  std::vector<Interpreter*> members_;
  uint64_t next_id_ = 1;
};

}  // namespace manypy
