#include "operator_callbacks.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "error.h"
#include "interpreter.h"
#include "op_callbacks.h"

namespace manypy::operator_callbacks {

namespace {

struct Registration {
  uint64_t id;
  Handler handler;
  Options options;
  std::atomic<int> in_flight{0};
};

struct Registry {
  std::mutex mu;  // add/remove/join, one at a time
  std::shared_mutex lookup_mu;  // events read `live`; remove takes entries out
  std::map<uint64_t, std::shared_ptr<Registration>> live;
  std::vector<Interpreter*> members;
  uint64_t next_id = 1;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed, as interpreters
  return *r;
}

// mph_emit_fn for every libtorch: finds the registration and calls it.
void emit(uint64_t id, int phase, const mph_op_event* event) {
  Registry& r = registry();
  std::shared_ptr<Registration> reg;
  {
    std::shared_lock<std::shared_mutex> lock(r.lookup_mu);
    auto it = r.live.find(id);
    if (it == r.live.end()) return;
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

void emit_untyped(uint64_t id, int phase, const void* event) {
  emit(id, phase, static_cast<const mph_op_event*>(event));
}

void install(Interpreter& interp, const Registration& reg) {
  interp.add_op_callbacks(reg.id, reg.options.sampling_probability, reg.options.needs_inputs,
                          &emit_untyped);
}

}  // namespace

uint64_t add(Handler handler, const Options& options) {
  if (!(options.sampling_probability > 0.0 && options.sampling_probability <= 1.0)) {
    throw Error(Code::kOutOfRange, "sampling probability must be in (0, 1], not " +
                                       std::to_string(options.sampling_probability));
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto reg = std::make_shared<Registration>();
  reg->id = r.next_id++;
  reg->handler = std::move(handler);
  reg->options = options;
  {
    std::unique_lock<std::shared_mutex> lookup(r.lookup_mu);
    r.live[reg->id] = reg;
  }
  std::vector<Interpreter*> done;
  try {
    if (!hooks::add_op_callbacks(reg->id, options.sampling_probability, options.needs_inputs,
                                 -1, &emit)) {
      throw Error(Code::kResourceExhausted,
                  "at most " + std::to_string(MPH_MAX_OP_CALLBACKS) +
                      " operator callback registrations can be live at once");
    }
    for (Interpreter* interp : r.members) {
      if (!interp->serving()) continue;  // retired: runs no operator again
      install(*interp, *reg);
      done.push_back(interp);
    }
  } catch (...) {
    for (Interpreter* interp : done) interp->remove_op_callbacks(reg->id);
    hooks::remove_op_callbacks(reg->id);
    std::unique_lock<std::shared_mutex> lookup(r.lookup_mu);
    r.live.erase(reg->id);
    throw;
  }
  return reg->id;
}

void remove(uint64_t id) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::shared_ptr<Registration> reg;
  {
    std::unique_lock<std::shared_mutex> lookup(r.lookup_mu);
    auto it = r.live.find(id);
    if (it == r.live.end()) {
      throw Error(Code::kNoSuchName, "no operator callback registration " + std::to_string(id));
    }
    reg = it->second;
    r.live.erase(it);  // no event starts a call after this
  }
  hooks::remove_op_callbacks(id);
  for (Interpreter* interp : r.members) interp->remove_op_callbacks(id);
  // Calls that found the registration before it was taken out finish now.
  while (reg->in_flight.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  reg->handler = nullptr;  // frees the caller's user data, exactly once
}

void join(Interpreter& interp) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.members.push_back(&interp);
  std::shared_lock<std::shared_mutex> lookup(r.lookup_mu);
  for (const auto& [id, reg] : r.live) install(interp, *reg);
}

}  // namespace manypy::operator_callbacks
