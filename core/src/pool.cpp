#include "pool.h"

#include <optional>

#include "runtime.h"

namespace manypy {

Pool::Lease::~Lease() {
  slot_.load.fetch_sub(1, std::memory_order_release);
  if (pool_.in_flight_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    std::lock_guard<std::mutex> lock(pool_.idle_mu_);
    pool_.idle_cv_.notify_all();
  }
}

Pool::Pool(const PoolOptions& options)
    : mode_(options.thread_mode), trust_(options.trust), stop_grace_ns_(options.stop_grace_ns) {
  if (options.lease.intra_op_threads < 1) {
    throw Error(Code::kInvalidArgument, "intra-op threads must be >= 1, not " +
                                            std::to_string(options.lease.intra_op_threads));
  }
  Runtime::get().api_usage().log("manypy.pool.create");
  for (Interpreter* interp :
       Runtime::get().interpreters().lease(options.interpreters, options.lease, trust_)) {
    slots_.push_back(std::make_unique<Slot>());
    slots_.back()->interp = interp;
  }
}

Pool::~Pool() {
  {
    std::unique_lock<std::mutex> lock(idle_mu_);
    idle_cv_.wait(lock, [this] { return in_flight_.load() == 0; });
  }
  Runtime::get().interpreters().give_back(interpreters());
}

void Pool::check_index(int interpreter) const {
  const size_t n = slots_.size();
  if (interpreter < 0 || static_cast<size_t>(interpreter) >= n) {
    throw Error(Code::kOutOfRange, "interpreter index " + std::to_string(interpreter) +
                                       " is out of range: the pool has " + std::to_string(n) +
                                       " (valid: 0.." + std::to_string(n - 1) +
                                       " or MANYPY_ANY_INTERPRETER)");
  }
}

void Pool::check_interpreter(int index) const {
  check_index(index);
  const Interpreter& interp = *slots_[index]->interp;
  if (!interp.serving()) {
    throw Error(Code::kInterpreterBroken,
                "interpreter " + std::to_string(index) + " cannot serve: " + interp.why_not_serving());
  }
}

Pool::Slot& Pool::pick(int interpreter) {
  in_flight_.fetch_add(1, std::memory_order_acq_rel);
  const size_t n = slots_.size();
  if (interpreter != kAnyInterpreter) {
    try {
      check_index(interpreter);
    } catch (...) {
      in_flight_.fetch_sub(1);
      throw;
    }
    Slot& slot = *slots_[interpreter];
    slot.load.fetch_add(1, std::memory_order_acq_rel);
    return slot;
  }
  // A free interpreter if there is one (claimed atomically, so two callers
  // never take the same free one), else the least loaded; never a retired
  // one. The scan starts at a rotating index to spread calls.
  const size_t start = next_.fetch_add(1, std::memory_order_relaxed) % n;
  for (size_t k = 0; k < n; ++k) {
    Slot& slot = *slots_[(start + k) % n];
    int expected = 0;
    if (!slot.interp->serving()) continue;
    if (slot.load.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) return slot;
  }
  Slot* least = nullptr;
  for (size_t k = 0; k < n; ++k) {
    Slot* slot = slots_[(start + k) % n].get();
    if (!slot->interp->serving()) continue;
    if (least == nullptr ||
        slot->load.load(std::memory_order_relaxed) < least->load.load(std::memory_order_relaxed)) {
      least = slot;
    }
  }
  if (least == nullptr) {
    in_flight_.fetch_sub(1);
    std::string why;
    for (size_t k = 0; k < n; ++k) {
      why += (k ? "; " : "") + std::string("interpreter ") + std::to_string(k) + ": " +
             slots_[k]->interp->why_not_serving();
    }
    throw Error(Code::kInterpreterBroken, "no interpreter of this pool can serve (" + why + ")");
  }
  least->load.fetch_add(1, std::memory_order_acq_rel);
  return *least;
}

size_t Pool::index_of(const Slot& slot) const {
  size_t index = 0;
  while (slots_[index].get() != &slot) ++index;
  return index;
}

std::vector<Interpreter*> Pool::interpreters() const {
  std::vector<Interpreter*> all;
  for (const auto& slot : slots_) all.push_back(slot->interp);
  return all;
}

namespace {

CallOptions on(int interpreter) {
  CallOptions options;
  options.interpreter = interpreter;
  return options;
}

}  // namespace

void Pool::exec(int interpreter, const std::string& source) { exec(on(interpreter), source); }

void Pool::exec_all(const std::string& source) {
  for (size_t i = 0; i < slots_.size(); ++i) exec(static_cast<int>(i), source);
}

Value Pool::eval(int interpreter, const std::string& expression) {
  return eval(on(interpreter), expression);
}

void Pool::exec(const CallOptions& options, const std::string& source) {
  // The stop starts before the wait for an interpreter, which it bounds too.
  std::optional<CallStop> stop;
  if (options.limits.bounded()) stop.emplace(options.limits, stop_grace_ns_);
  CallStop* bound = stop ? &*stop : nullptr;
  with_interpreter(options.interpreter, [&](Interpreter& interp) {
    interp.exec(mode_, source, options.model_id, options.request_id, bound);
  });
}

Value Pool::eval(const CallOptions& options, const std::string& expression) {
  std::optional<CallStop> stop;
  if (options.limits.bounded()) stop.emplace(options.limits, stop_grace_ns_);
  CallStop* bound = stop ? &*stop : nullptr;
  return with_interpreter(options.interpreter, [&](Interpreter& interp) {
    return interp.eval(mode_, expression, options.model_id, options.request_id, bound);
  });
}

}  // namespace manypy
