#include "script_module.h"

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <torch/script.h>

#include <cctype>
#include <optional>

#include "archive.h"
#include "archive_trust.h"
#include "dispatch/host_workers.h"
#include "error.h"
#include "ivalue_convert.h"
#include "op_callbacks.h"
#include "runtime.h"
#include "script_stop.h"

namespace manypy {

struct ScriptModule::Impl {
  torch::jit::Module module;
};

namespace {

Error load_error(const std::string& origin, const std::string& text) {
  std::string why = text.substr(0, text.find('\n'));
  if (why.find("supported version") != std::string::npos) {
    return Error(Code::kUnsupportedVersion,
                 origin + " has an archive format this libtorch cannot read: " + why);
  }
  if (why.find("constants.pkl") != std::string::npos || why.find("data.pkl") != std::string::npos) {
    return Error(Code::kBadArchive,
                 origin + " is not a TorchScript archive (" + why +
                     "); torch.package archives load with manypy_package_load_file");
  }
  return Error(Code::kBadArchive, origin + " cannot be loaded as TorchScript: " + why);
}

// An error raised while a method ran: the message is the last line of
// TorchScript's text (usually "RuntimeError: ..."), the whole text is the
// traceback, and the exception's name, when the line has one, is the type.
Error script_error(const std::string& method, const std::string& text) {
  std::string line;
  size_t end = text.find_last_not_of(" \n");
  if (end != std::string::npos) {
    size_t start = text.rfind('\n', end);
    line = text.substr(start == std::string::npos ? 0 : start + 1,
                       end + 1 - (start == std::string::npos ? 0 : start + 1));
  }
  size_t first = line.find_first_not_of(' ');
  line = first == std::string::npos ? std::string() : line.substr(first);
  std::string type;
  size_t colon = line.find(':');
  if (colon != std::string::npos && colon > 0 && line.find_first_of(" .") > colon &&
      std::isupper(static_cast<unsigned char>(line[0]))) {
    type = line.substr(0, colon);
  }
  return Error(Code::kPython, "TorchScript " + method + ": " + line, type, text);
}

}  // namespace

ScriptModule::ScriptModule(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ScriptModule::~ScriptModule() = default;

// Both loads go through the archive reader every path shares: libzip checks
// the structure first, and libtorch reads through a bounded adapter.
std::unique_ptr<ScriptModule> ScriptModule::load(const Archive& archive,
                                                 const ArchiveTrust* trust) {
  check_host_load(archive, trust);
  // libtorch's unpickler trusts its input: check every pickle it will read
  // (some only when an error message needs source ranges) first.
  archive.check_torch_pickles("");
  auto impl = std::make_unique<Impl>();
  try {
    impl->module = torch::jit::load(archive.read_adapter());
  } catch (const c10::Error& e) {
    throw load_error(archive.origin(), e.what_without_backtrace());
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    // TorchScript's parser and deserializer also throw plain standard
    // exceptions (std::out_of_range from vector::at) on corrupt code.
    throw load_error(archive.origin(), e.what());
  }
  impl->module.eval();
  Runtime::get().api_usage().log("manypy.script.load");
  return std::unique_ptr<ScriptModule>(new ScriptModule(std::move(impl)));
}

std::unique_ptr<ScriptModule> ScriptModule::load_file(const std::string& path,
                                                      const ArchiveTrust* trust) {
  return load(*Archive::open_file(path), trust);
}

std::unique_ptr<ScriptModule> ScriptModule::load_bytes(const void* data, size_t size,
                                                       const ArchiveTrust* trust) {
  return load(*Archive::from_bytes(data, size), trust);
}

void ScriptModule::check_call(const std::string* method, const Value* args,
                              const Value* kwargs) const {
  const std::string name = method ? *method : "forward";
  if (!impl_->module.find_method(name)) {
    throw Error(Code::kNoSuchName, "the TorchScript module has no method '" + name + "'");
  }
  check_call_arguments(args, kwargs);
}

Value ScriptModule::call(const std::string* method, const Value* args, const Value* kwargs,
                         const CallOptions& options) {
  check_call(method, args, kwargs);
  std::optional<CallStop> stop;
  if (options.limits.bounded()) stop.emplace(options.limits);
  return run(method, args, kwargs, options, stop ? &*stop : nullptr);
}

// An asynchronous call: owns copies of its arguments, and holds the module
// until it completes.
class ScriptModule::AsyncCall final : public dispatch::Job {
 public:
  AsyncCall(std::shared_ptr<ScriptModule> module, const std::string* method, const Value* args,
            const Value* kwargs, const CallOptions& options, dispatch::Done done)
      : Job(options.limits, CallStop::kDefaultGraceNs),
        module_(std::move(module)),
        method_(method ? std::optional<std::string>(*method) : std::nullopt),
        options_(options),
        done_(std::move(done)) {
    if (args) args_.emplace(args->clone());
    if (kwargs) kwargs_.emplace(kwargs->clone());
  }

 protected:
  Value run(Interpreter*) override {
    return module_->run(method_ ? &*method_ : nullptr, args_ ? &*args_ : nullptr,
                        kwargs_ ? &*kwargs_ : nullptr, options_, stop());
  }
  void succeeded(Value value) noexcept override { done_(&value, nullptr); }
  void failed(Error error) noexcept override { done_(nullptr, &error); }

 private:
  const std::shared_ptr<ScriptModule> module_;
  const std::optional<std::string> method_;
  std::optional<Value> args_, kwargs_;
  const CallOptions options_;
  const dispatch::Done done_;
};

void ScriptModule::call_async(std::shared_ptr<ScriptModule> module, const std::string* method,
                              const Value* args, const Value* kwargs, const CallOptions& options,
                              dispatch::Done done) {
  module->check_call(method, args, kwargs);
  dispatch::run_on_host_worker(std::make_shared<AsyncCall>(std::move(module), method, args, kwargs,
                                                           options, std::move(done)));
}

Value ScriptModule::run(const std::string* method, const Value* args, const Value* kwargs,
                        const CallOptions& options, CallStop* stop) {
  const std::string name = method ? *method : "forward";
  auto found = impl_->module.find_method(name);
  if (!found) {
    throw Error(Code::kNoSuchName, "the TorchScript module has no method '" + name + "'");
  }
  c10::InferenceMode inference;
  std::vector<c10::IValue> stack;
  if (args) {
    for (const Value& v : args->items) stack.push_back(to_ivalue(v));
  }
  torch::jit::Kwargs named;
  if (kwargs) {
    for (size_t k = 0; k < kwargs->items.size(); ++k) {
      named[kwargs->keys[k]] = to_ivalue(kwargs->items[k]);
    }
  }
  hooks::ContextScope context(options.model_id, options.request_id);
  c10::IValue result;
  try {
    ScriptStopScope stop_scope(stop);
    result = (*found)(std::move(stack), named);
  } catch (const c10::Error& e) {
    std::string text = e.what_without_backtrace();
    if (stop && stop->stop() != 0) throw stop->error("while it ran").with_traceback(text);
    throw script_error(name, text);
  } catch (const std::exception& e) {
    if (stop && stop->stop() != 0) throw stop->error("while it ran").with_traceback(e.what());
    // The TorchScript interpreter rethrows an operator's failure as a plain
    // std::runtime_error carrying its own traceback.
    throw script_error(name, e.what());
  }
  if (stop && stop->check(monotonic_ns()) != 0) {
    throw stop->error("when the call finished (its result was dropped)");
  }
  return from_ivalue(result);
}

void ScriptModule::save(const std::string& path, const Value* extra_files) const {
  torch::jit::ExtraFilesMap files;
  for (auto& [name, data] : extra_files_from(extra_files)) files[name] = std::move(data);
  try {
    impl_->module.save(path, files);
  } catch (const c10::Error& e) {
    std::string why = e.what_without_backtrace();
    throw Error(Code::kNotFound, "cannot save to " + path + ": " + why.substr(0, why.find('\n')));
  }
}

void set_host_intra_op_threads(int threads) { at::set_num_threads(threads); }

}  // namespace manypy
