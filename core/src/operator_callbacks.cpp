#include "operator_callbacks.h"

#include <stdexcept>
#include <thread>

#include "error.h"
#include "interpreter.h"
#include "op_callbacks.h"

namespace manypy {

namespace {

// The instance the hooks' plain-function events reach (see the constructor).
std::atomic<OperatorCallbacks*> g_instance{nullptr};

}  // namespace

struct OperatorCallbacks::Registration {
  uint64_t id;
  Handler handler;
  Options options;
  std::atomic<int> in_flight{0};
};

OperatorCallbacks::OperatorCallbacks() {
  OperatorCallbacks* none = nullptr;
  if (!g_instance.compare_exchange_strong(none, this)) {
    throw std::logic_error("a process has one OperatorCallbacks, the Runtime's");
  }
}

// mph_emit_fn for every libtorch: finds the registration and calls it.
void OperatorCallbacks::emit(uint64_t id, int phase, const mph_op_event* event) {
  OperatorCallbacks& self = *g_instance.load(std::memory_order_acquire);
  std::shared_ptr<Registration> reg;
  {
    std::shared_lock<std::shared_mutex> lock(self.lookup_mu_);
    auto it = self.live_.find(id);
    if (it == self.live_.end()) return;
    reg = it->second;
    reg->in_flight.fetch_add(1, std::memory_order_acq_rel);
  }
  try {
    reg->handler(phase, *event);
  } catch (...) {
    // A failing callback never breaks inference.
  }
  reg->in_flight.fetch_sub(1, std::memory_order_acq_rel);
}

void OperatorCallbacks::emit_untyped(uint64_t id, int phase, const void* event) {
  emit(id, phase, static_cast<const mph_op_event*>(event));
}

void OperatorCallbacks::install(Interpreter& interp, const Registration& reg) {
  interp.add_op_callbacks(reg.id, reg.options.sampling_probability, reg.options.needs_inputs,
                          &emit_untyped);
}

uint64_t OperatorCallbacks::add(Handler handler, const Options& options) {
  if (!(options.sampling_probability > 0.0 && options.sampling_probability <= 1.0)) {
    throw Error(Code::kOutOfRange, "sampling probability must be in (0, 1], not " +
                                       std::to_string(options.sampling_probability));
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto reg = std::make_shared<Registration>();
  reg->id = next_id_++;
  reg->handler = std::move(handler);
  reg->options = options;
  {
    std::unique_lock<std::shared_mutex> lookup(lookup_mu_);
    live_[reg->id] = reg;
  }
  std::vector<Interpreter*> done;
  try {
    if (!hooks::add_op_callbacks(reg->id, options.sampling_probability, options.needs_inputs, -1,
                                 &emit)) {
      throw Error(Code::kResourceExhausted,
                  "at most " + std::to_string(MPH_MAX_OP_CALLBACKS) +
                      " operator callback registrations can be live at once");
    }
    for (Interpreter* interp : members_) {
      if (!interp->serving()) continue;  // retired: runs no operator again
      install(*interp, *reg);
      done.push_back(interp);
    }
  } catch (...) {
    for (Interpreter* interp : done) interp->remove_op_callbacks(reg->id);
    hooks::remove_op_callbacks(reg->id);
    std::unique_lock<std::shared_mutex> lookup(lookup_mu_);
    live_.erase(reg->id);
    throw;
  }
  return reg->id;
}

void OperatorCallbacks::remove(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<Registration> reg;
  {
    std::unique_lock<std::shared_mutex> lookup(lookup_mu_);
    auto it = live_.find(id);
    if (it == live_.end()) {
      throw Error(Code::kNoSuchName, "no operator callback registration " + std::to_string(id));
    }
    reg = it->second;
    live_.erase(it);  // no event starts a call after this
  }
  hooks::remove_op_callbacks(id);
  for (Interpreter* interp : members_) interp->remove_op_callbacks(id);
  // Calls that found the registration before it was taken out finish now.
  while (reg->in_flight.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  reg->handler = nullptr;  // frees the caller's user data, exactly once
}

void OperatorCallbacks::join(Interpreter& interp) {
  std::lock_guard<std::mutex> lock(mu_);
  members_.push_back(&interp);
  std::shared_lock<std::shared_mutex> lookup(lookup_mu_);
  for (const auto& [id, reg] : live_) install(interp, *reg);
}

}  // namespace manypy
