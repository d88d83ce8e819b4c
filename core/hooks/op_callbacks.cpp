#include "op_callbacks.h"

#include <ATen/record_function.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace manypy::hooks {

namespace {

// The caller's context, carried by c10's ThreadLocalDebugInfo as the seed
// describes (it follows the forward pass into async forks).
struct CallContext : c10::DebugInfoBase {
  std::string model_id, request_id;
};
// A function, not a constant: torch 1.13's kind is an enum, torch 2.x's a
// constant that libc10 defines (not usable in a constant expression).
auto context_kind() { return c10::DebugInfoKind::INFERENCE_CONTEXT; }

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// The OS thread id: unique in the process, unlike torch's own thread ids,
// which each namespace's libtorch counts from 1.
uint64_t os_thread_id() {
  thread_local uint64_t tid = static_cast<uint64_t>(syscall(SYS_gettid));
  return tid;
}

// Set in a child forked from this process: by model code in an interpreter
// (multiprocessing, a DataLoader's workers), through the libc of the
// namespace this copy lives in, which runs the handlers registered through
// it. Callbacks are the host's code, which a child must never run
// (core/interp/interp.c, "forked children").
std::atomic<bool> g_forked_child{false};
const int g_fork_handler_registered =
    pthread_atfork(nullptr, nullptr, [] { g_forked_child.store(true); });

struct Slot {
  std::atomic<uint64_t> id{0};  // 0: free
  mph_emit_fn emit = nullptr;
  int32_t interpreter = -1;
  at::CallbackHandle handle = 0;
};

std::mutex g_mu;  // guards slot assignment
std::array<Slot, MPH_MAX_OP_CALLBACKS> g_slots;

uint8_t dl_code(c10::ScalarType t) {
  if (c10::isComplexType(t)) return 5;           // kDLComplex
  if (t == c10::ScalarType::BFloat16) return 4;  // kDLBfloat
  if (c10::isFloatingType(t)) return 2;          // kDLFloat
  if (t == c10::ScalarType::Bool) return 6;      // kDLBool (DLPack >= 0.8)
  if (t == c10::ScalarType::Byte) return 1;      // kDLUInt
  return 0;                                      // kDLInt
}

// What the enter callback saw, kept until the exit callback. The inputs are
// described here, at enter, because torch only guarantees
// RecordFunction::inputs() during start callbacks: by the exit callback the
// operator's stack holds its outputs, and reading inputs() there read freed
// tensors (a crash seen under load from a JVM).
struct Started : at::ObserverContext {
  int64_t start_ns = 0;
  std::vector<mph_op_input> inputs;
  std::vector<std::vector<int64_t>> shapes;  // inputs[k].shape points into shapes[k]
};

void describe_inputs(const at::RecordFunction& fn, Started* started) {
  c10::ArrayRef<const c10::IValue> values = fn.inputs();
  started->inputs.resize(values.size());
  started->shapes.resize(values.size());
  for (size_t k = 0; k < values.size(); ++k) {
    const c10::IValue& v = values[k];
    mph_op_input& in = started->inputs[k];
    in.kind = -1;
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      in.kind = 5;
      if (t.defined()) {
        in.dtype_code = dl_code(t.scalar_type());
        in.dtype_bits = uint8_t(t.element_size() * 8);
        in.dtype_lanes = 1;
        started->shapes[k] = t.sizes().vec();
        in.ndim = int32_t(started->shapes[k].size());
        in.shape = started->shapes[k].data();
      }
    } else if (v.isInt()) {
      in.kind = 2;
    } else if (v.isDouble()) {
      in.kind = 3;
    } else if (v.isBool()) {
      in.kind = 1;
    } else if (v.isNone()) {
      in.kind = 0;
    }
  }
}

// Builds the event for `fn` and hands it to the slot's emitter. `started` is
// what the enter callback recorded (NULL if torch gave no context).
void emit(const Slot& slot, int phase, const at::RecordFunction& fn, const Started* started,
          int64_t end) {
  uint64_t id = slot.id.load(std::memory_order_acquire);
  if (id == 0 || in_forked_child()) return;
  mph_op_event ev{};
  ev.name = fn.name();
  ev.sequence_number = fn.seqNr();
  ev.thread_id = os_thread_id();
  ev.interpreter = slot.interpreter;
  ev.start_ns = started ? started->start_ns : 0;
  ev.end_ns = end;
  auto* ctx = static_cast<CallContext*>(c10::ThreadLocalDebugInfo::get(context_kind()));
  ev.model_id = ctx ? ctx->model_id.c_str() : "";
  ev.request_id = ctx ? ctx->request_id.c_str() : "";
  if (started && !started->inputs.empty()) {
    ev.num_inputs = started->inputs.size();
    ev.inputs = started->inputs.data();
  }
  slot.emit(id, phase, &ev);
}

template <size_t S>
std::unique_ptr<at::ObserverContext> on_enter(const at::RecordFunction& fn) {
  auto started = std::make_unique<Started>();
  started->start_ns = now_ns();
  if (fn.needsInputs()) describe_inputs(fn, started.get());
  emit(g_slots[S], 0, fn, started.get(), 0);
  return started;
}

template <size_t S>
void on_exit(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  emit(g_slots[S], 1, fn, static_cast<const Started*>(ctx), now_ns());
}

template <size_t... S>
constexpr std::array<at::RecordFunctionCallback::StartCallback, sizeof...(S)> enters(
    std::index_sequence<S...>) {
  return {&on_enter<S>...};
}
template <size_t... S>
constexpr std::array<at::RecordFunctionCallback::EndCallback, sizeof...(S)> exits(
    std::index_sequence<S...>) {
  return {&on_exit<S>...};
}

const auto kEnters = enters(std::make_index_sequence<MPH_MAX_OP_CALLBACKS>());
const auto kExits = exits(std::make_index_sequence<MPH_MAX_OP_CALLBACKS>());

}  // namespace

bool in_forked_child() { return g_forked_child.load(std::memory_order_relaxed); }

bool add_op_callbacks(uint64_t id, double sampling_probability, int needs_inputs,
                      int32_t interpreter, mph_emit_fn emit_fn) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (size_t s = 0; s < g_slots.size(); ++s) {
    Slot& slot = g_slots[s];
    if (slot.id.load() != 0) continue;
    slot.emit = emit_fn;
    slot.interpreter = interpreter;
    slot.id.store(id, std::memory_order_release);
    // Operators only (RecordScope::FUNCTION): not TorchScript function
    // frames, user record_function scopes or backward nodes, which the
    // callbacks are not about and which would cost every such scope a look.
    slot.handle = at::addGlobalCallback(at::RecordFunctionCallback(kEnters[s], kExits[s])
                                            .needsInputs(needs_inputs != 0)
                                            .samplingProb(sampling_probability)
                                            .scopes({at::RecordScope::FUNCTION}));
    return true;
  }
  return false;
}

void remove_op_callbacks(uint64_t id) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (Slot& slot : g_slots) {
    if (slot.id.load() != id) continue;
    at::removeCallback(slot.handle);
    slot.id.store(0, std::memory_order_release);
  }
}

void push_context(const char* model_id, const char* request_id) {
  auto ctx = std::make_shared<CallContext>();
  ctx->model_id = model_id ? model_id : "";
  ctx->request_id = request_id ? request_id : "";
  c10::ThreadLocalDebugInfo::_push(context_kind(), std::move(ctx));
}

void pop_context() { c10::ThreadLocalDebugInfo::_pop(context_kind()); }

}  // namespace manypy::hooks
