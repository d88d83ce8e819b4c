#include "interpreter.h"

#include "operator_callbacks.h"
#include "operator_libraries.h"
#include "runtime_paths.h"
#include "stack_headroom.h"

namespace manypy {

namespace {

void process_lock(int acquire) {
  static std::mutex mu;
  if (acquire) {
    mu.lock();
  } else {
    mu.unlock();
  }
}

}  // namespace

Interpreter::Interpreter(unsigned slot, unsigned band) : slot_(slot), band_(band) {}

void Interpreter::begin_start() {
  home_ = std::thread([this] { home_main(); });
  home_.detach();  // lives as long as the process, like the interpreter
}

void Interpreter::home_main() {
  std::optional<Error> error;
  try {
    ns_ = std::make_unique<isolation::Namespace>(interp_library_path(), band_);
    ns_->prepare_thread();
    std::string home = python_home();
    std::string hooks = hooks_library_path();
    mpi_start_options options{home.c_str(), /*import_torch=*/1, &process_lock,
                              interpreter_host_api(), hooks.c_str()};
    Outcome outcome;
    mpi_sink sink = outcome.sink();
    if (ns_->api().start(&options, &sink) != MPI_OK && !outcome.error) {
      outcome.error.emplace(Code::kInternal, "interpreter start failed without a message");
    }
    error = std::move(outcome.error);
    if (!error) {
      // Operator libraries loaded before this interpreter existed.
      healthy_ = true;  // load_library runs through run(), which checks it
      operator_libraries::join(*this);
      operator_callbacks::join(*this);
    }
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

  // Serve handed-over calls for the rest of the process.
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      tasks_cv_.wait(lock, [this] { return !tasks_.empty(); });
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

void Interpreter::wait_started() {
  std::unique_lock<std::mutex> lock(mu_);
  started_cv_.wait(lock, [this] { return start_done_; });
  if (start_error_) throw *start_error_;
}

bool Interpreter::broken() const {
  std::lock_guard<std::mutex> lock(mu_);
  return start_done_ && start_error_.has_value();
}

void Interpreter::run_here(const Call& call, Outcome& outcome) {
  ns_->prepare_thread();
  mpi_sink sink = outcome.sink();
  if (call(ns_->api(), sink) != MPI_OK && !outcome.error) {
    outcome.error.emplace(Code::kInternal, "interpreter call failed without a message");
  }
}

void Interpreter::run_on_home(const Call& call, Outcome& outcome) {
  // The caller waits on its own condition variable so a busy home thread does
  // not wake every waiter.
  std::mutex done_mu;
  std::condition_variable done_cv;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.emplace_back([&] {
      try {
        run_here(call, outcome);
      } catch (const std::exception& e) {
        if (!outcome.error) outcome.error.emplace(Code::kInternal, e.what());
      }
      std::lock_guard<std::mutex> done_lock(done_mu);
      outcome.done = true;
      done_cv.notify_one();
    });
  }
  tasks_cv_.notify_one();  // only the home thread waits on it
  std::unique_lock<std::mutex> lock(done_mu);
  done_cv.wait(lock, [&] { return outcome.done; });
}

Value Interpreter::run(ThreadMode mode, const Call& call) {
  if (!healthy_.load(std::memory_order_acquire)) {
    throw Error(Code::kInterpreterBroken, "interpreter " + std::to_string(slot_) +
                                              " failed to start and cannot run code");
  }
  Outcome outcome;
  if (mode == ThreadMode::kHandoff) {
    run_on_home(call, outcome);
  } else {
    require_stack_headroom();
    run_here(call, outcome);
  }
  if (outcome.error) throw *outcome.error;
  return outcome.take_value();
}

void Interpreter::lease_begin(const LeaseSettings& settings) {
  std::vector<const char*> paths;
  for (const std::string& p : settings.extra_sys_path) paths.push_back(p.c_str());
  mpi_lease_options options{paths.data(), paths.size(), settings.intra_op_threads};
  run(ThreadMode::kHandoff, [&](const manypy_interp_api& api, const mpi_sink& sink) {
    return api.lease_begin(&options, &sink);
  });
}

void Interpreter::lease_end() {
  run(ThreadMode::kHandoff,
      [](const manypy_interp_api& api, const mpi_sink& sink) { return api.lease_end(&sink); });
}

void Interpreter::exec(ThreadMode mode, const std::string& source) {
  run(mode, [&](const manypy_interp_api& api, const mpi_sink& sink) {
    return api.exec(source.c_str(), &sink);
  });
}

Value Interpreter::eval(ThreadMode mode, const std::string& expression) {
  return run(mode, [&](const manypy_interp_api& api, const mpi_sink& sink) {
    return api.eval(expression.c_str(), &sink);
  });
}

void Interpreter::package_open(ThreadMode mode, uint64_t package_id, const void* data,
                               size_t size) {
  run(mode, [&](const manypy_interp_api& api, const mpi_sink& sink) {
    return api.package_open(package_id, data, size, &sink);
  });
}

void Interpreter::run_clean_up(ThreadMode mode,
                               const std::function<void(const manypy_interp_api&)>& step) noexcept {
  try {
    run(mode, [&](const manypy_interp_api& api, const mpi_sink&) {
      step(api);
      return MPI_OK;
    });
  } catch (...) {
    // Clean-up never fails in a way the caller could act on: a broken
    // interpreter holds nothing to clean, and lease_end drops what is left.
  }
}

void Interpreter::package_close(uint64_t package_id) noexcept {
  run_clean_up(ThreadMode::kHandoff,
               [&](const manypy_interp_api& api) { api.package_close(package_id); });
}

void Interpreter::object_load(ThreadMode mode, uint64_t object_id, uint64_t package_id,
                              const std::string& module, const std::string& name) {
  run(mode, [&](const manypy_interp_api& api, const mpi_sink& sink) {
    return api.object_load(object_id, package_id, module.c_str(), name.c_str(), &sink);
  });
}

void Interpreter::object_drop(uint64_t object_id) noexcept {
  run_clean_up(ThreadMode::kHandoff,
               [&](const manypy_interp_api& api) { api.object_drop(object_id); });
}

Value Interpreter::object_call(ThreadMode mode, uint64_t object_id, const std::string* method,
                               const Value* args, const Value* kwargs,
                               const std::string& model_id, const std::string& request_id) {
  const bool context = !model_id.empty() || !request_id.empty();
  return run(mode, [&](const manypy_interp_api& api, const mpi_sink& sink) {
    // Fresh DLPack handles for each attempt: the interpreter takes them.
    std::optional<ArgTree> arg_tree, kwarg_tree;
    if (args) arg_tree.emplace(*args);
    if (kwargs) kwarg_tree.emplace(*kwargs);
    if (arg_tree) arg_tree->handed_over();
    if (kwarg_tree) kwarg_tree->handed_over();
    return api.object_call(object_id, method ? method->c_str() : nullptr,
                           arg_tree ? arg_tree->get() : nullptr,
                           kwarg_tree ? kwarg_tree->get() : nullptr,
                           context ? model_id.c_str() : nullptr,
                           context ? request_id.c_str() : nullptr, &sink);
  });
}

Value Interpreter::object_getattr(ThreadMode mode, uint64_t object_id, const std::string& name) {
  return run(mode, [&](const manypy_interp_api& api, const mpi_sink& sink) {
    return api.object_getattr(object_id, name.c_str(), &sink);
  });
}

void Interpreter::add_op_callbacks(uint64_t id, double sampling_probability, bool needs_inputs,
                                   void (*emit)(uint64_t, int, const void*)) {
  run(ThreadMode::kDirect, [&](const manypy_interp_api& api, const mpi_sink& sink) {
    int rc = api.add_op_callbacks(id, sampling_probability, needs_inputs ? 1 : 0,
                                  static_cast<int32_t>(slot_), emit);
    if (rc != MPI_OK) {
      sink.error(sink.ctx, rc, "", "no operator callback slot left in this interpreter", "");
    }
    return rc;
  });
}

void Interpreter::remove_op_callbacks(uint64_t id) noexcept {
  run_clean_up(ThreadMode::kDirect,
               [&](const manypy_interp_api& api) { api.remove_op_callbacks(id); });
}

void Interpreter::load_library(const std::string& path) {
  run(ThreadMode::kDirect, [&](const manypy_interp_api& api, const mpi_sink& sink) {
    return api.load_library(path.c_str(), &sink);
  });
}

bool Interpreter::object_hasattr(ThreadMode mode, uint64_t object_id, const std::string& name) {
  int has = 0;
  run(mode, [&](const manypy_interp_api& api, const mpi_sink& sink) {
    return api.object_hasattr(object_id, name.c_str(), &has, &sink);
  });
  return has != 0;
}

}  // namespace manypy
