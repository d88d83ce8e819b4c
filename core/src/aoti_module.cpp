#include "aoti_module.h"

#include <ATen/record_function.h>

#include <optional>

#include "aoti_package.h"
#include "aoti_runner.h"
#include "dispatch/host_workers.h"
#include "error.h"
#include "ivalue_convert.h"
#include "op_callbacks.h"
#include "runtime.h"
#include "tree_spec.h"

namespace manypy {

struct AotiModule::Impl {
  AotiPackageInfo info;
  std::unique_ptr<AotiRunner> runner;
  TreeSpec input_spec, output_spec;
};

AotiModule::AotiModule(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
AotiModule::~AotiModule() = default;

std::unique_ptr<AotiModule> AotiModule::load(std::shared_ptr<Archive> archive,
                                             const ArchiveTrust* trust) {
  // Loading a package opens its compiled library, which runs its code.
  check_host_load(*archive, trust);
  auto impl = std::make_unique<Impl>();
  impl->info = inspect_aoti_package(*archive);
  impl->runner = open_aoti_runner(*archive, impl->info);
  impl->input_spec = TreeSpec::parse(impl->runner->input_spec(),
                                     archive->origin() + ": the compiled model's input spec");
  impl->output_spec = TreeSpec::parse(impl->runner->output_spec(),
                                      archive->origin() + ": the compiled model's output spec");
  // The archive goes now: the loaded library holds the model.
  Runtime::get().api_usage().log("manypy.aoti.load");
  return std::unique_ptr<AotiModule>(new AotiModule(std::move(impl)));
}

namespace {

// A build that cannot run packages says so before reading anything: what
// is wrong with a package matters only where it could run.
void require_aoti() {
  const std::string why = aoti_unavailable_reason();
  if (!why.empty()) throw Error(Code::kUnsupportedVersion, why);
}

}  // namespace

std::unique_ptr<AotiModule> AotiModule::load_file(const std::string& path,
                                                  const ArchiveTrust* trust) {
  require_aoti();
  return load(Archive::open_file(path), trust);
}

std::unique_ptr<AotiModule> AotiModule::load_bytes(const void* data, size_t size,
                                                   const ArchiveTrust* trust) {
  require_aoti();
  return load(Archive::from_bytes(data, size), trust);
}

std::vector<const Value*> AotiModule::inputs(const Value* args, const Value* kwargs) const {
  check_call_arguments(args, kwargs);
  return flatten_arguments(impl_->input_spec, args, kwargs);
}

Value AotiModule::call(const Value* args, const Value* kwargs, const CallOptions& options) {
  std::optional<CallStop> stop;
  if (options.limits.bounded()) stop.emplace(options.limits);
  return run(args, kwargs, options, stop ? &*stop : nullptr);
}

Value AotiModule::run(const Value* args, const Value* kwargs, const CallOptions& options,
                      CallStop* stop) {
  const std::vector<const Value*> tensors = inputs(args, kwargs);
  // A compiled model cannot be stopped once it runs: the deadline is checked
  // before it starts, and a result that comes after it is dropped.
  if (stop && stop->check(monotonic_ns()) != 0) throw stop->error("before it started");
  hooks::ContextScope context(options.model_id, options.request_id);
  std::vector<Value> outputs;
  {
    // Compiled kernels do not go through the dispatcher, so operator
    // callbacks see none of them: one record stands for the whole call.
    at::RecordFunction record(at::RecordScope::FUNCTION);
    if (record.isActive()) {
      if (record.needsInputs()) {
        std::vector<c10::IValue> ivalues;
        for (const Value* t : tensors) ivalues.push_back(to_ivalue(*t));
        record.before("manypy::aoti_run",
                      c10::ArrayRef<const c10::IValue>(ivalues.data(), ivalues.size()));
      } else {
        record.before("manypy::aoti_run");
      }
    }
    outputs = impl_->runner->run(tensors);
  }
  if (stop && stop->check(monotonic_ns()) != 0) {
    throw stop->error("when the call finished (its result was dropped)");
  }
  return unflatten_result(impl_->output_spec, std::move(outputs));
}

// An asynchronous call: owns copies of its arguments (tensors shared), and
// holds the module until it completes.
class AotiModule::AsyncCall final : public dispatch::Job {
 public:
  AsyncCall(std::shared_ptr<AotiModule> module, const Value* args, const Value* kwargs,
            const CallOptions& options, dispatch::Done done)
      : Job(options.limits, CallStop::kDefaultGraceNs),
        module_(std::move(module)),
        options_(options),
        done_(std::move(done)) {
    if (args) args_.emplace(args->clone());
    if (kwargs) kwargs_.emplace(kwargs->clone());
  }

 protected:
  Value run(Interpreter*) override {
    return module_->run(args_ ? &*args_ : nullptr, kwargs_ ? &*kwargs_ : nullptr, options_, stop());
  }
  void succeeded(Value value) noexcept override { done_(&value, nullptr); }
  void failed(Error error) noexcept override { done_(nullptr, &error); }

 private:
  const std::shared_ptr<AotiModule> module_;
  std::optional<Value> args_, kwargs_;
  const CallOptions options_;
  const dispatch::Done done_;
};

void AotiModule::call_async(std::shared_ptr<AotiModule> module, const Value* args,
                            const Value* kwargs, const CallOptions& options, dispatch::Done done) {
  module->inputs(args, kwargs);  // refused now, not in `done`
  dispatch::run_on_host_worker(
      std::make_shared<AsyncCall>(std::move(module), args, kwargs, options, std::move(done)));
}

Value AotiModule::metadata() const {
  Value dict = Value::container(ValueKind::kDict);
  for (const auto& [key, value] : impl_->info.metadata) dict.put(key, Value::of_string(value));
  return dict;
}

std::string AotiModule::signature() const {
  return impl_->input_spec.describe() + " -> " + impl_->output_spec.describe();
}

}  // namespace manypy
