// Operator callbacks on one libtorch (an interpreter's, or the host's): a
// fixed set of RecordFunction trampolines, each bound to one registration,
// and the per-call context (model id, request id) the callbacks report.
// Compiled into libmanypy_hooks.so for interpreters and into the core for
// the host.
#pragma once

#include <cstdint>
#include <string>

#include "hooks_api.h"

namespace manypy::hooks {

// Adds RecordFunction callbacks for registration `id` that report to `emit`.
// Returns false when all kMaxOpCallbacks slots are taken.
bool add_op_callbacks(uint64_t id, double sampling_probability, int needs_inputs,
                      int32_t interpreter, mph_emit_fn emit);
void remove_op_callbacks(uint64_t id);

// The calling thread's context for the operators it runs next (and their
// async forks), until pop_context.
void push_context(const char* model_id, const char* request_id);
void pop_context();

// push_context for the life of a scope, when the call has a context: the
// host's own calls (TorchScript, AOTInductor) report their ids this way.
class ContextScope {
 public:
  ContextScope(const std::string& model_id, const std::string& request_id)
      : active_(!model_id.empty() || !request_id.empty()) {
    if (active_) push_context(model_id.c_str(), request_id.c_str());
  }
  ~ContextScope() {
    if (active_) pop_context();
  }
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  const bool active_;
};

// Whether this process is a child forked from the one that loaded this
// code: no callback to the host runs there.
bool in_forked_child();

}  // namespace manypy::hooks
