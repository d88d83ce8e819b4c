// TorchScript has no interrupt of its own, and a RecordFunction callback
// cannot stop an operator (torch catches and logs what it throws). The
// dispatcher can: while a bounded call runs, its thread includes a dispatch
// key whose fallback kernel checks the call's stop before each operator,
// then redispatches below itself. Ops nested inside an op are not checked
// (the key is excluded while an op runs), so the cost is one boxed call per
// top-level operator, and only for calls with a deadline or token.
//
// The key is TESTING_ONLY_GenericMode, the dispatcher's key for exactly this
// kind of thread-local mode: the host's libtorch is manypy's own, and no
// library of torch's uses that key. (torch's interpreters never see it: it
// lives in the host's libtorch only.)
#include "script_stop.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

namespace manypy {

namespace {

constexpr c10::DispatchKey kStopKey = c10::DispatchKey::TESTING_ONLY_GenericMode;

thread_local CallStop* t_stop = nullptr;

void stop_or_redispatch(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (t_stop != nullptr && t_stop->check(monotonic_ns()) != 0) {
    TORCH_CHECK(false, "manypy stopped the call before ", op.schema().name());
  }
  c10::impl::ExcludeDispatchKeyGuard below(kStopKey);
  op.callBoxed(stack);
}

TORCH_LIBRARY_IMPL(_, TESTING_ONLY_GenericMode, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&stop_or_redispatch>());
}

}  // namespace

ScriptStopScope::ScriptStopScope(CallStop* stop) : previous_(t_stop), included_(false) {
  if (stop == nullptr) return;
  t_stop = stop;
  included_ = !c10::impl::tls_is_dispatch_key_included(kStopKey);
  if (included_) c10::impl::tls_set_dispatch_key_included(kStopKey, true);
}

ScriptStopScope::~ScriptStopScope() {
  if (included_) c10::impl::tls_set_dispatch_key_included(kStopKey, false);
  t_stop = previous_;
}

}  // namespace manypy
