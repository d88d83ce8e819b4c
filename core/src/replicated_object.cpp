#include "replicated_object.h"

#include <atomic>
#include <optional>

#include "runtime.h"

namespace manypy {

namespace {
std::atomic<uint64_t> g_next_object_id{1};
}  // namespace

ReplicatedObject::ReplicatedObject(std::shared_ptr<Package> package, std::string module,
                                   std::string name)
    : id_(g_next_object_id.fetch_add(1)),
      package_(std::move(package)),
      module_(std::move(module)),
      name_(std::move(name)) {
  // torch.package's layout: module "a.b", name "x.pkl" -> record "a/b/x.pkl".
  std::string record = module_ + "/" + name_;
  for (size_t k = 0; k < module_.size(); ++k) {
    if (record[k] == '.') record[k] = '/';
  }
  if (!package_->archive().has_record(record)) {
    throw Error(Code::kNoSuchName, package_->archive().origin() + " has no pickle '" + name_ +
                                       "' in module '" + module_ + "' (no record '" + record +
                                       "')");
  }
  package_->pool().with_interpreter(Pool::kAnyInterpreter,
                                    [&](Interpreter& interp) { ensure_loaded(interp, nullptr); });
  Runtime::get().api_usage().log("manypy.object.load");
}

ReplicatedObject::~ReplicatedObject() {
  {
    std::unique_lock<std::mutex> lock(calls_mu_);
    calls_cv_.wait(lock, [this] { return calls_ == 0; });
  }
  replicas_.for_each_done([this](Interpreter& interp) { interp.object_drop(id_); });
}

void ReplicatedObject::ensure_loaded(Interpreter& interp, CallStop* stop) {
  replicas_.ensure(interp, stop, [this, stop](Interpreter& in) {
    package_->ensure_open(in, stop);
    in.object_load(package_->pool().mode(), id_, package_->id(), module_, name_, stop);
  });
}

template <typename Fn>
auto ReplicatedObject::on_replica(int interpreter, CallStop* stop, Fn&& fn) {
  {
    std::lock_guard<std::mutex> lock(calls_mu_);
    ++calls_;
  }
  struct Done {
    ReplicatedObject* self;
    ~Done() {
      std::lock_guard<std::mutex> lock(self->calls_mu_);
      if (--self->calls_ == 0) self->calls_cv_.notify_all();
    }
  } done{this};
  return package_->pool().with_interpreter(interpreter, [&](Interpreter& interp) {
    ensure_loaded(interp, stop);
    return fn(interp);
  });
}

Value ReplicatedObject::call(const CallOptions& options, const std::string* method,
                             const Value* args, const Value* kwargs) {
  if (args != nullptr && !args->is_sequence()) {
    throw Error(Code::kInvalidArgument, std::string("args must be a list or tuple, not ") +
                                            kind_name(args->kind));
  }
  if (kwargs != nullptr && kwargs->kind != ValueKind::kDict) {
    throw Error(Code::kInvalidArgument,
                std::string("kwargs must be a dict, not ") + kind_name(kwargs->kind));
  }
  Pool& pool = package_->pool();
  std::optional<CallStop> stop;
  if (options.limits.bounded()) stop.emplace(options.limits, pool.stop_grace_ns());
  CallStop* bound = stop ? &*stop : nullptr;
  return on_replica(options.interpreter, bound, [&](Interpreter& interp) {
    return interp.object_call(pool.mode(), id_, method, args, kwargs, options.model_id,
                              options.request_id, bound);
  });
}

Value ReplicatedObject::getattr(const CallOptions& options, const std::string& name) {
  Pool& pool = package_->pool();
  std::optional<CallStop> stop;
  if (options.limits.bounded()) stop.emplace(options.limits, pool.stop_grace_ns());
  CallStop* bound = stop ? &*stop : nullptr;
  return on_replica(options.interpreter, bound, [&](Interpreter& interp) {
    return interp.object_getattr(pool.mode(), id_, name, bound);
  });
}

bool ReplicatedObject::hasattr(const std::string& name) {
  ThreadMode mode = package_->pool().mode();
  return on_replica(Pool::kAnyInterpreter, nullptr,
                    [&](Interpreter& interp) { return interp.object_hasattr(mode, id_, name); });
}

}  // namespace manypy
