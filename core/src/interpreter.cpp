#include "interpreter.h"

#include "runtime_paths.h"

namespace manypy {

Interpreter::Interpreter(unsigned slot, const HostServices& host) : slot_(slot), host_(host) {}

void Interpreter::start() noexcept {
  std::optional<Error> error;
  try {
    ns_ = std::make_unique<isolation::Namespace>(interp_library_path(), slot_);
    ns_->prepare_thread();
    std::string home = python_home();
    std::string hooks = hooks_library_path();
    mpi_start_options options{home.c_str(), /*import_torch=*/1, host_.lock_process_state, host_.api,
                              hooks.c_str()};
    Outcome outcome;
    mpi_sink sink = outcome.sink();
    if (ns_->api().start(&options, &sink) != MPI_OK && !outcome.error) {
      outcome.error.emplace(Code::kInternal, "interpreter start failed without a message");
    }
    error = std::move(outcome.error);
  } catch (const Error& e) {
    error = e;
  } catch (const std::exception& e) {
    error.emplace(Code::kInternal, e.what());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    start_done_ = true;
    healthy_ = !error.has_value();
    start_error_ = std::move(error);
  }
  started_cv_.notify_all();
}

void Interpreter::fail_start(const Error& why) noexcept {
  {
    std::lock_guard<std::mutex> lock(mu_);
    start_done_ = true;
    healthy_ = false;
    start_error_ = why;
  }
  started_cv_.notify_all();
}

uint64_t lease_number_of(const Interpreter& interp) { return interp.lease_number(); }

void Interpreter::wait_started() {
  std::unique_lock<std::mutex> lock(mu_);
  started_cv_.wait(lock, [this] { return start_done_; });
  if (start_error_) throw *start_error_;
}

bool Interpreter::broken() const {
  std::lock_guard<std::mutex> lock(mu_);
  return (start_done_ && start_error_.has_value()) || !retired_because_.empty();
}

std::string Interpreter::why_not_serving() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!retired_because_.empty()) return "it was retired: " + retired_because_;
  if (start_done_ && start_error_) return "it failed to start: " + start_error_->message();
  if (!start_done_) return "it has not started";
  return "";
}

void Interpreter::retire(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (retired_because_.empty()) retired_because_ = why;
  healthy_.store(false, std::memory_order_release);
}

void Interpreter::enter(const Call& call, Outcome& outcome) {
  ns_->prepare_thread();
  mpi_sink sink = outcome.sink();
  if (call(ns_->api(), sink) != MPI_OK && !outcome.error) {
    outcome.error.emplace(Code::kInternal, "interpreter call failed without a message");
  }
}

Value Interpreter::run(const Call& call, CallStop* stop) {
  if (!healthy_.load(std::memory_order_acquire)) {
    throw Error(Code::kInterpreterBroken, "cannot run code: " + why_not_serving());
  }
  Outcome outcome(ns_.get());
  if (stop) stop->in_interpreter.store(true, std::memory_order_seq_cst);
  enter(call, outcome);
  if (stop != nullptr) {
    const std::string retire_reason = stop->retire_reason();
    if (!retire_reason.empty()) {
      retire(retire_reason);
      Error e = outcome.error ? *outcome.error : stop->error("(the call finished)");
      throw Error(e.code(),
                  e.message() + "; the interpreter was retired: " + retire_reason +
                      " (docs/threads.md, \"Deadlines and cancellation\")",
                  e.python_type(), e.traceback());
    }
    // What the interpreter side returned after the deadline is not the
    // call's result.
    if (!outcome.error && stop->check(monotonic_ns()) != 0) {
      throw stop->error("after the call finished: its result was dropped");
    }
  }
  if (outcome.error) throw *outcome.error;
  return outcome.take_value();
}

void Interpreter::interrupt(CallStop& stop) {
  ns_->prepare_thread();
  ns_->api().interrupt(stop.control());
}

bool Interpreter::escalate(CallStop& stop) {
  ns_->prepare_thread();
  return ns_->api().escalate(stop.control()) != 0;
}

void Interpreter::ran_archive(const std::optional<Sha256>& digest, const std::string& origin) {
  std::lock_guard<std::mutex> lock(mu_);
  history_.ran(digest, origin);
}

void Interpreter::ran_host_code(const ArchiveTrust& trust) {
  if (trust.active()) return;
  std::lock_guard<std::mutex> lock(mu_);
  history_.ran_unchecked_host_code();
}

bool Interpreter::trusted_by(const ArchiveTrust& trust) const {
  std::lock_guard<std::mutex> lock(mu_);
  return history_.trusted_by(trust);
}

void Interpreter::lease_begin(const LeaseSettings& settings) {
  leases_.fetch_add(1, std::memory_order_acq_rel);
  std::vector<const char*> paths;
  for (const std::string& p : settings.extra_sys_path) paths.push_back(p.c_str());
  mpi_lease_options options{paths.data(), paths.size(), settings.intra_op_threads,
                            settings.allow_process_exit ? 1 : 0};
  run([&](const manypy_interp_api& api, const mpi_sink& sink) {
    return api.lease_begin(&options, &sink);
  });
}

void Interpreter::lease_end() {
  run([](const manypy_interp_api& api, const mpi_sink& sink) { return api.lease_end(&sink); });
}

void Interpreter::exec(const std::string& source, const std::string& model_id,
                       const std::string& request_id, CallStop* stop) {
  const bool context = !model_id.empty() || !request_id.empty();
  run(
      [&](const manypy_interp_api& api, const mpi_sink& sink) {
        return api.exec(source.c_str(), context ? model_id.c_str() : nullptr,
                        context ? request_id.c_str() : nullptr, stop ? stop->control() : nullptr,
                        &sink);
      },
      stop);
}

Value Interpreter::eval(const std::string& expression, const std::string& model_id,
                        const std::string& request_id, CallStop* stop) {
  const bool context = !model_id.empty() || !request_id.empty();
  return run(
      [&](const manypy_interp_api& api, const mpi_sink& sink) {
        return api.eval(expression.c_str(), context ? model_id.c_str() : nullptr,
                        context ? request_id.c_str() : nullptr, stop ? stop->control() : nullptr,
                        &sink);
      },
      stop);
}

void Interpreter::package_open(uint64_t package_id, const void* data, size_t size, CallStop* stop) {
  run(
      [&](const manypy_interp_api& api, const mpi_sink& sink) {
        return api.package_open(package_id, data, size, stop ? stop->control() : nullptr, &sink);
      },
      stop);
}

void Interpreter::run_clean_up(const std::function<void(const manypy_interp_api&)>& step) noexcept {
  try {
    run([&](const manypy_interp_api& api, const mpi_sink&) {
      step(api);
      return MPI_OK;
    });
  } catch (...) {
    // Clean-up never fails in a way the caller could act on: a broken
    // interpreter holds nothing to clean, and lease_end drops what is left.
  }
}

void Interpreter::package_close(uint64_t package_id) noexcept {
  run_clean_up([&](const manypy_interp_api& api) { api.package_close(package_id); });
}

void Interpreter::object_load(uint64_t object_id, uint64_t package_id, const std::string& module,
                              const std::string& name, CallStop* stop) {
  run(
      [&](const manypy_interp_api& api, const mpi_sink& sink) {
        return api.object_load(object_id, package_id, module.c_str(), name.c_str(),
                               stop ? stop->control() : nullptr, &sink);
      },
      stop);
}

void Interpreter::object_drop(uint64_t object_id) noexcept {
  run_clean_up([&](const manypy_interp_api& api) { api.object_drop(object_id); });
}

Value Interpreter::object_call(uint64_t object_id, const std::string* method, const Value* args,
                               const Value* kwargs, const std::string& model_id,
                               const std::string& request_id, CallStop* stop) {
  const bool context = !model_id.empty() || !request_id.empty();
  return run(
      [&](const manypy_interp_api& api, const mpi_sink& sink) {
        // Fresh DLPack handles for each attempt: the interpreter takes them.
        std::optional<ArgTree> arg_tree, kwarg_tree;
        if (args) arg_tree.emplace(*args);
        if (kwargs) kwarg_tree.emplace(*kwargs);
        if (arg_tree) arg_tree->handed_over();
        if (kwarg_tree) kwarg_tree->handed_over();
        return api.object_call(
            object_id, method ? method->c_str() : nullptr, arg_tree ? arg_tree->get() : nullptr,
            kwarg_tree ? kwarg_tree->get() : nullptr, context ? model_id.c_str() : nullptr,
            context ? request_id.c_str() : nullptr, stop ? stop->control() : nullptr, &sink);
      },
      stop);
}

Value Interpreter::object_getattr(uint64_t object_id, const std::string& name, CallStop* stop) {
  return run(
      [&](const manypy_interp_api& api, const mpi_sink& sink) {
        return api.object_getattr(object_id, name.c_str(), stop ? stop->control() : nullptr, &sink);
      },
      stop);
}

void Interpreter::add_op_callbacks(uint64_t id, double sampling_probability, bool needs_inputs,
                                   void (*emit)(uint64_t, int, const void*)) {
  run([&](const manypy_interp_api& api, const mpi_sink& sink) {
    int rc = api.add_op_callbacks(id, sampling_probability, needs_inputs ? 1 : 0,
                                  static_cast<int32_t>(slot_), emit);
    if (rc == MPI_ERR_RESOURCE_EXHAUSTED) {
      sink.error(sink.ctx, rc, "", "no operator callback slot left in this interpreter", "");
    } else if (rc != MPI_OK) {
      sink.error(sink.ctx, rc, "",
                 "operator callbacks are unavailable: the hooks library is not loaded in this "
                 "interpreter",
                 "");
    }
    return rc;
  });
}

void Interpreter::remove_op_callbacks(uint64_t id) noexcept {
  run_clean_up([&](const manypy_interp_api& api) { api.remove_op_callbacks(id); });
}

void Interpreter::load_library(const std::string& path) {
  run([&](const manypy_interp_api& api, const mpi_sink& sink) {
    return api.load_library(path.c_str(), &sink);
  });
}

bool Interpreter::object_hasattr(uint64_t object_id, const std::string& name) {
  int has = 0;
  run([&](const manypy_interp_api& api, const mpi_sink& sink) {
    return api.object_hasattr(object_id, name.c_str(), &has, &sink);
  });
  return has != 0;
}

}  // namespace manypy
