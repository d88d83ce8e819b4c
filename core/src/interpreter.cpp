#include "interpreter.h"

#include "runtime_paths.h"

namespace manypy {

// What the interpreter side handed to the sink during one call.
struct Interpreter::Outcome {
  std::optional<Error> error;
  Value value;
  bool done = false;  // handoff: set by the home thread under mu_

  static void on_error(void* ctx, int code, const char* py_type, const char* message,
                       const char* traceback) {
    auto* self = static_cast<Outcome*>(ctx);
    if (self->error) return;  // keep the first, most specific error
    std::string text = message ? message : "";
    if (code == static_cast<int>(Code::kStaticTls)) {
      text = std::string(kStaticTlsHint) + " (" + text + ")";
    }
    self->error.emplace(static_cast<Code>(code), std::move(text), py_type ? py_type : "",
                        traceback ? traceback : "");
  }

  static void on_value(void* ctx, const mpi_value* v) {
    auto* self = static_cast<Outcome*>(ctx);
    Value& out = self->value;
    out.kind = static_cast<ValueKind>(v->kind);
    out.b = v->i != 0;
    out.i = v->i;
    out.d = v->d;
    if (v->kind == MPI_VALUE_STRING) out.s.assign(v->s, v->len);
  }

  mpi_sink sink() { return mpi_sink{this, &Outcome::on_error, &Outcome::on_value}; }
};

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
    mpi_start_options options{home.c_str(), /*import_torch=*/1, &process_lock};
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
      Outcome local;
      try {
        run_here(call, local);
      } catch (const std::exception& e) {
        local.error.emplace(Code::kInternal, e.what());
      }
      std::lock_guard<std::mutex> done_lock(done_mu);
      outcome.error = std::move(local.error);
      outcome.value = std::move(local.value);
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
    run_here(call, outcome);
  }
  if (outcome.error) throw *outcome.error;
  return std::move(outcome.value);
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

}  // namespace manypy
