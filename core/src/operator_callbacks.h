// Operator callbacks registered by the host: installed in every interpreter,
// present and future, and in the host's own libtorch (interpreter -1).
#pragma once

#include <cstdint>
#include <functional>

#include "hooks_api.h"

namespace manypy {

class Interpreter;

namespace operator_callbacks {

// Called for each sampled operator, on the thread that runs it; phase 0 is
// entering, 1 leaving. Must not throw.
using Handler = std::function<void(int phase, const mph_op_event& event)>;

struct Options {
  double sampling_probability = 1.0;  // in (0, 1]
  bool needs_inputs = false;
};

// Returns the registration's id. Throws Error (kOutOfRange for a bad
// probability, kResourceExhausted when every slot is taken).
uint64_t add(Handler handler, const Options& options);

// Stops every further call before returning (calls in flight finish first),
// then destroys the handler. Throws Error(kNoSuchName) for an unknown id.
void remove(uint64_t id);

// An interpreter that has just started takes part (see operator_libraries).
void join(Interpreter& interp);

}  // namespace operator_callbacks
}  // namespace manypy
