#include "replicated_object.h"

#include <atomic>
#include <optional>

#include "dispatch/completer.h"
#include "dispatch/threads.h"
#include "runtime.h"

namespace manypy {

namespace {
std::atomic<uint64_t> g_next_object_id{1};
}  // namespace

std::shared_ptr<ReplicatedObject> ReplicatedObject::load(std::shared_ptr<Package> package,
                                                         std::string module, std::string name) {
  return std::shared_ptr<ReplicatedObject>(
      new ReplicatedObject(std::move(package), std::move(module), std::move(name)),
      [](ReplicatedObject* object) {
        if (dispatch::on_manypy_thread()) {
          dispatch::complete_later([object] { delete object; });
        } else {
          delete object;
        }
      });
}

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
  pool().dispatcher().call(Pool::kAnyInterpreter, CallLimits{}, /*model=*/nullptr,
                           [&](Interpreter* interp, CallStop*) {
                             ensure_loaded(*interp, nullptr);
                             return Value();
                           });
  Runtime::get().api_usage().log("manypy.object.load");
}

ReplicatedObject::~ReplicatedObject() {
  {
    std::unique_lock<std::mutex> lock(calls_mu_);
    calls_cv_.wait(lock, [this] { return calls_ == 0; });
  }
  replicas_.for_each_done([this](Interpreter& interp) {
    pool().clean_up(interp, [this](Interpreter& in) { in.object_drop(id_); });
  });
}

void ReplicatedObject::ensure_loaded(Interpreter& interp, CallStop* stop) {
  replicas_.ensure(interp, stop, [this, stop](Interpreter& in) {
    package_->ensure_open(in, stop);
    in.object_load(id_, package_->id(), module_, name_, stop);
  });
}

template <typename Fn>
Value ReplicatedObject::on_replica(int interpreter, const CallLimits& limits,
                                   const std::string* model, Fn&& fn) {
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
  return pool().dispatcher().call(interpreter, limits, model,
                                  [&](Interpreter* interp, CallStop* stop) {
                                    ensure_loaded(*interp, stop);
                                    return fn(*interp, stop);
                                  });
}

Value ReplicatedObject::call(const CallOptions& options, const std::string* method,
                             const Value* args, const Value* kwargs) {
  check_call_arguments(args, kwargs);
  return on_replica(options.interpreter, options.limits, &options.model_id,
                    [&](Interpreter& interp, CallStop* stop) {
                      return interp.object_call(id_, method, args, kwargs, options.model_id,
                                                options.request_id, stop);
                    });
}

// An asynchronous call: owns copies of its arguments, and holds the object
// until it completes.
class ReplicatedObject::AsyncCall final : public dispatch::Job {
 public:
  AsyncCall(std::shared_ptr<ReplicatedObject> object, const CallOptions& options,
            const std::string* method, const Value* args, const Value* kwargs, dispatch::Done done)
      : Job(options.limits, object->pool().dispatcher().stop_grace_ns()),
        object_(std::move(object)),
        method_(method ? std::optional<std::string>(*method) : std::nullopt),
        model_id_(options.model_id),
        request_id_(options.request_id),
        done_(std::move(done)) {
    if (args) args_.emplace(args->clone());
    if (kwargs) kwargs_.emplace(kwargs->clone());
  }

 protected:
  Value run(Interpreter* interp) override {
    object_->ensure_loaded(*interp, stop());
    return interp->object_call(object_->id_, method_ ? &*method_ : nullptr,
                               args_ ? &*args_ : nullptr, kwargs_ ? &*kwargs_ : nullptr, model_id_,
                               request_id_, stop());
  }
  void succeeded(Value value) noexcept override { done_(&value, nullptr); }
  void failed(Error error) noexcept override { done_(nullptr, &error); }

 private:
  const std::shared_ptr<ReplicatedObject> object_;
  const std::optional<std::string> method_;
  std::optional<Value> args_, kwargs_;
  const std::string model_id_, request_id_;
  const dispatch::Done done_;
};

void ReplicatedObject::call_async(const CallOptions& options, const std::string* method,
                                  const Value* args, const Value* kwargs, dispatch::Done done) {
  check_call_arguments(args, kwargs);
  auto job = std::make_shared<AsyncCall>(shared_from_this(), options, method, args, kwargs,
                                         std::move(done));
  pool().dispatcher().submit(options.interpreter, &options.model_id, std::move(job));
}

Value ReplicatedObject::getattr(const CallOptions& options, const std::string& name) {
  return on_replica(
      options.interpreter, options.limits, &options.model_id,
      [&](Interpreter& interp, CallStop* stop) { return interp.object_getattr(id_, name, stop); });
}

bool ReplicatedObject::hasattr(const std::string& name) {
  Value has =
      on_replica(Pool::kAnyInterpreter, CallLimits{}, nullptr, [&](Interpreter& interp, CallStop*) {
        return Value::of_bool(interp.object_hasattr(id_, name));
      });
  return has.b;
}

}  // namespace manypy
