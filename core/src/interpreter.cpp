#include "interpreter.h"

#include "runtime_paths.h"
#include "spin.h"
#include "stack_headroom.h"

namespace manypy {

Interpreter::Interpreter(unsigned slot, const isolation::KeyBands& keys, unsigned band,
                         const HostServices& host)
    : slot_(slot), keys_(keys), band_(band), host_(host) {}

void Interpreter::begin_start() {
  home_ = std::thread([this] { home_main(); });
  home_.detach();  // lives as long as the process, like the interpreter
}

void Interpreter::home_main() {
  std::optional<Error> error;
  try {
    ns_ = std::make_unique<isolation::Namespace>(interp_library_path(), keys_, band_);
    ns_->prepare_thread();
    std::string home = python_home();
    std::string hooks = hooks_library_path();
    mpi_start_options options{home.c_str(), /*import_torch=*/1, host_.lock_process_state,
                              host_.api, hooks.c_str()};
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

  // Serve handed-over calls for the rest of the process. After each, poll
  // briefly for the next before sleeping: a caller that finds the home
  // thread awake needs no wake-up (docs/threads.md, "The two modes").
  for (;;) {
    spin_until([this] { return queued_.load(std::memory_order_acquire) > 0; });
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      home_sleeping_ = true;
      tasks_cv_.wait(lock, [this] { return !tasks_.empty(); });
      home_sleeping_ = false;
      task = std::move(tasks_.front());
      tasks_.pop_front();
      queued_.fetch_sub(1, std::memory_order_relaxed);
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

void Interpreter::run_here(const Call& call, Outcome& outcome) {
  ns_->prepare_thread();
  mpi_sink sink = outcome.sink();
  if (call(ns_->api(), sink) != MPI_OK && !outcome.error) {
    outcome.error.emplace(Code::kInternal, "interpreter call failed without a message");
  }
}

namespace {

// One handed-over call, shared by its caller and the task queued for the home
// thread: a caller that gives up while the task waits in the queue leaves,
// and the home thread then skips the task.
struct Handoff {
  std::mutex mu;
  std::condition_variable cv;  // the caller waits on it, so a busy home
                               // thread does not wake every waiter
  bool started = false;
  std::atomic<bool> done{false};  // set under mu; also polled without it
  bool abandoned = false;
  bool caller_sleeping = false;   // the home thread notifies only then

  static void wake(void* self) {
    auto* h = static_cast<Handoff*>(self);
    { std::lock_guard<std::mutex> lock(h->mu); }
    h->cv.notify_all();
  }
};

}  // namespace

void Interpreter::run_on_home(const Call& call, Outcome& outcome, CallStop* stop) {
  auto handoff = std::make_shared<Handoff>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    // `call`, `outcome` and `stop` outlive the task unless it is abandoned,
    // and an abandoned task touches nothing but `handoff`.
    tasks_.emplace_back([this, handoff, &call, &outcome, stop] {
      {
        std::lock_guard<std::mutex> lock(handoff->mu);
        if (handoff->abandoned) return;
        handoff->started = true;
      }
      if (stop) stop->in_interpreter.store(true, std::memory_order_seq_cst);
      try {
        run_here(call, outcome);
      } catch (const std::exception& e) {
        if (!outcome.error) outcome.error.emplace(Code::kInternal, e.what());
      }
      bool wake;
      {
        std::lock_guard<std::mutex> lock(handoff->mu);
        handoff->done.store(true, std::memory_order_release);
        wake = handoff->caller_sleeping;
      }
      if (wake) handoff->cv.notify_all();
    });
    queued_.fetch_add(1, std::memory_order_release);
    if (home_sleeping_) tasks_cv_.notify_one();  // only the home thread waits on it
  }
  if (stop) watchdog_.set_waiter(*stop, &Handoff::wake, handoff.get());
  // A short call is done before a sleep would even begin.
  spin_until([&] { return handoff->done.load(std::memory_order_acquire); });
  std::unique_lock<std::mutex> lock(handoff->mu);
  handoff->caller_sleeping = true;
  while (!handoff->done) {
    if (stop == nullptr || handoff->started) {
      handoff->cv.wait(lock);  // a started call is the watchdog's to stop
    } else if (stop->check(monotonic_ns()) != 0) {
      handoff->abandoned = true;
      lock.unlock();
      watchdog_.set_waiter(*stop, nullptr, nullptr);
      throw stop->error("while waiting for the interpreter (busy with earlier calls)");
    } else if (stop->deadline_ns() == CallStop::kNoDeadline) {
      handoff->cv.wait(lock);
    } else {
      handoff->cv.wait_until(lock, std::chrono::steady_clock::time_point(
                                       std::chrono::nanoseconds(stop->deadline_ns())));
    }
  }
  lock.unlock();
  if (stop) watchdog_.set_waiter(*stop, nullptr, nullptr);
}

Value Interpreter::run(ThreadMode mode, const Call& call, CallStop* stop) {
  if (!healthy_.load(std::memory_order_acquire)) {
    throw Error(Code::kInterpreterBroken, "cannot run code: " + why_not_serving());
  }
  Outcome outcome(ns_.get());
  if (stop) watchdog_.watch(*stop);
  struct Unwatch {
    Watchdog& watchdog;
    CallStop* stop;
    ~Unwatch() {
      if (stop) watchdog.unwatch(*stop);
    }
  } unwatch{watchdog_, stop};
  if (mode == ThreadMode::kHandoff) {
    run_on_home(call, outcome, stop);
  } else {
    require_stack_headroom();
    if (stop) stop->in_interpreter.store(true, std::memory_order_seq_cst);
    run_here(call, outcome);
  }
  if (stop != nullptr) {
    const std::string retire_reason = stop->retire_reason();
    if (!retire_reason.empty()) {
      retire(retire_reason);
      Error e = outcome.error ? *outcome.error : stop->error("(the call finished)");
      throw Error(e.code(), e.message() + "; the interpreter was retired: " + retire_reason +
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

void Interpreter::ran_archive(const std::optional<Sha256>& digest, const std::string& origin) {
  std::lock_guard<std::mutex> lock(mu_);
  history_.ran(digest, origin);
}

bool Interpreter::trusted_by(const ArchiveTrust& trust) const {
  std::lock_guard<std::mutex> lock(mu_);
  return history_.trusted_by(trust);
}

void Interpreter::lease_begin(const LeaseSettings& settings) {
  std::vector<const char*> paths;
  for (const std::string& p : settings.extra_sys_path) paths.push_back(p.c_str());
  mpi_lease_options options{paths.data(), paths.size(), settings.intra_op_threads,
                            settings.allow_process_exit ? 1 : 0};
  run(ThreadMode::kHandoff, [&](const manypy_interp_api& api, const mpi_sink& sink) {
    return api.lease_begin(&options, &sink);
  });
}

void Interpreter::lease_end() {
  run(ThreadMode::kHandoff,
      [](const manypy_interp_api& api, const mpi_sink& sink) { return api.lease_end(&sink); });
}

void Interpreter::exec(ThreadMode mode, const std::string& source, const std::string& model_id,
                       const std::string& request_id, CallStop* stop) {
  const bool context = !model_id.empty() || !request_id.empty();
  run(mode, [&](const manypy_interp_api& api, const mpi_sink& sink) {
    return api.exec(source.c_str(), context ? model_id.c_str() : nullptr,
                    context ? request_id.c_str() : nullptr, stop ? stop->control() : nullptr,
                    &sink);
  }, stop);
}

Value Interpreter::eval(ThreadMode mode, const std::string& expression,
                        const std::string& model_id, const std::string& request_id,
                        CallStop* stop) {
  const bool context = !model_id.empty() || !request_id.empty();
  return run(mode, [&](const manypy_interp_api& api, const mpi_sink& sink) {
    return api.eval(expression.c_str(), context ? model_id.c_str() : nullptr,
                    context ? request_id.c_str() : nullptr, stop ? stop->control() : nullptr,
                    &sink);
  }, stop);
}

void Interpreter::package_open(ThreadMode mode, uint64_t package_id, const void* data,
                               size_t size, CallStop* stop) {
  run(mode, [&](const manypy_interp_api& api, const mpi_sink& sink) {
    return api.package_open(package_id, data, size, stop ? stop->control() : nullptr, &sink);
  }, stop);
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
                              const std::string& module, const std::string& name,
                              CallStop* stop) {
  run(mode, [&](const manypy_interp_api& api, const mpi_sink& sink) {
    return api.object_load(object_id, package_id, module.c_str(), name.c_str(),
                           stop ? stop->control() : nullptr, &sink);
  }, stop);
}

void Interpreter::object_drop(uint64_t object_id) noexcept {
  run_clean_up(ThreadMode::kHandoff,
               [&](const manypy_interp_api& api) { api.object_drop(object_id); });
}

Value Interpreter::object_call(ThreadMode mode, uint64_t object_id, const std::string* method,
                               const Value* args, const Value* kwargs,
                               const std::string& model_id, const std::string& request_id,
                               CallStop* stop) {
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
                           context ? request_id.c_str() : nullptr,
                           stop ? stop->control() : nullptr, &sink);
  }, stop);
}

Value Interpreter::object_getattr(ThreadMode mode, uint64_t object_id, const std::string& name,
                                  CallStop* stop) {
  return run(mode, [&](const manypy_interp_api& api, const mpi_sink& sink) {
    return api.object_getattr(object_id, name.c_str(), stop ? stop->control() : nullptr, &sink);
  }, stop);
}

void Interpreter::add_op_callbacks(uint64_t id, double sampling_probability, bool needs_inputs,
                                   void (*emit)(uint64_t, int, const void*)) {
  run(ThreadMode::kDirect, [&](const manypy_interp_api& api, const mpi_sink& sink) {
    int rc = api.add_op_callbacks(id, sampling_probability, needs_inputs ? 1 : 0,
                                  static_cast<int32_t>(slot_), emit);
    if (rc == MPI_ERR_RESOURCE_EXHAUSTED) {
      sink.error(sink.ctx, rc, "", "no operator callback slot left in this interpreter", "");
    } else if (rc != MPI_OK) {
      sink.error(sink.ctx, rc, "",
                 "operator callbacks are unavailable: the hooks library is not loaded in this "
                 "interpreter", "");
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
