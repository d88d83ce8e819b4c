// One embedded interpreter: a namespace, the Python in it, and its home
// thread. Interpreters live as long as the process (docs/isolation.md,
// hazard 8); pools lease them from the InterpreterSet.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "archive_trust.h"
#include "call_stop.h"
#include "error.h"
#include "interp_values.h"
#include "isolation/namespace.h"
#include "value.h"
#include "watchdog.h"

namespace manypy {

enum class ThreadMode { kDirect = 0, kHandoff = 1 };

struct LeaseSettings {
  std::vector<std::string> extra_sys_path;
  int intra_op_threads = 1;
  // os._exit and os.abort end the host process (instead of raising).
  bool allow_process_exit = false;
};

// What the host gives every interpreter as it starts (mpi_start_options): the
// table of its services, and the lock shared by every interpreter of the
// process around work on process-wide state. Both live as long as the
// process.
struct HostServices {
  const mpi_host_api* api;
  void (*lock_process_state)(int acquire);
};

class Interpreter {
 public:
  // `slot` is the interpreter's index in the process; its namespace's keys
  // are fenced into `band` of `keys` (which outlives it).
  Interpreter(unsigned slot, const isolation::KeyBands& keys, unsigned band,
              const HostServices& host);
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Starts the home thread, which opens the namespace and starts Python in it
  // with torch imported. Returns at once; wait_started() waits.
  void begin_start();
  // Waits for begin_start's work; throws its Error if it failed. An
  // interpreter that failed to start stays broken for good.
  void wait_started();
  // Failed to start, or retired: never serves again.
  bool broken() const;
  // Whether it can serve calls (started, and not retired). Lock-free.
  bool serving() const { return healthy_.load(std::memory_order_acquire); }
  // Why it cannot serve, e.g. "it was retired: ..." ("" while it can).
  std::string why_not_serving() const;
  unsigned slot() const { return slot_; }

  // Takes it out of service for the rest of the process: a stopped call's
  // clean-up was cut short, or left state it could not repair. Calls
  // already inside finish; later ones fail with kInterpreterBroken.
  void retire(const std::string& why);

  void lease_begin(const LeaseSettings& settings);
  void lease_end();

  // Code from an archive may run here from now on (TrustHistory): its
  // digest as the pool checked it, nullopt if the pool checked nothing.
  void ran_archive(const std::optional<Sha256>& digest, const std::string& origin);
  // Whether every archive whose code ran here is one `trust` accepts, so
  // that the interpreter may serve a pool with that trust.
  bool trusted_by(const ArchiveTrust& trust) const;

  // Calls into Python. `mode` says which thread runs the call. Each throws
  // Error on failure.
  // exec and eval: `model_id` and `request_id` (both empty: none) are what
  // operator callbacks report, and `stop` (nullptr: unbounded) stops the
  // code early, as for object_call.
  void exec(ThreadMode mode, const std::string& source, const std::string& model_id,
            const std::string& request_id, CallStop* stop);
  Value eval(ThreadMode mode, const std::string& expression, const std::string& model_id,
             const std::string& request_id, CallStop* stop);

  // `stop` (nullptr: unbounded) bounds the work: a lazy replica is part of
  // the call that needs it.
  void package_open(ThreadMode mode, uint64_t package_id, const void* data, size_t size,
                    CallStop* stop);
  void package_close(uint64_t package_id) noexcept;
  void object_load(ThreadMode mode, uint64_t object_id, uint64_t package_id,
                   const std::string& module, const std::string& name, CallStop* stop);
  void object_drop(uint64_t object_id) noexcept;
  // `method` empty: call the object itself. args: a list/tuple or none.
  // `stop` (nullptr: unbounded) stops the call early (call_stop.h).
  Value object_call(ThreadMode mode, uint64_t object_id, const std::string* method,
                    const Value* args, const Value* kwargs, const std::string& model_id,
                    const std::string& request_id, CallStop* stop);
  Value object_getattr(ThreadMode mode, uint64_t object_id, const std::string& name,
                       CallStop* stop);
  bool object_hasattr(ThreadMode mode, uint64_t object_id, const std::string& name);

  // torch.ops.load_library(path).
  void load_library(const std::string& path);

  // Operator callbacks in this interpreter's libtorch (no GIL needed).
  void add_op_callbacks(uint64_t id, double sampling_probability, bool needs_inputs,
                        void (*emit)(uint64_t, int, const void*));
  void remove_op_callbacks(uint64_t id) noexcept;

 private:
  using Call = std::function<int(const manypy_interp_api&, const mpi_sink&)>;

  // Runs `call` inside the interpreter and turns its sink output into a Value
  // or an Error. With a `stop`, the watchdog watches the call, and a call
  // still waiting for the home thread gives up when the stop is set.
  Value run(ThreadMode mode, const Call& call, CallStop* stop = nullptr);
  // Runs a step that cannot fail usefully (closing, dropping, removing),
  // swallowing any error.
  void run_clean_up(ThreadMode mode,
                    const std::function<void(const manypy_interp_api&)>& step) noexcept;
  void run_here(const Call& call, Outcome& outcome);
  void run_on_home(const Call& call, Outcome& outcome, CallStop* stop);
  void home_main();
  // The watchdog's interrupt: runs on its thread.
  void interrupt(CallStop& stop);

  const unsigned slot_;
  const isolation::KeyBands& keys_;
  const unsigned band_;
  const HostServices host_;
  std::unique_ptr<isolation::Namespace> ns_;

  mutable std::mutex mu_;
  std::condition_variable started_cv_;  // start_done_ became true
  std::condition_variable tasks_cv_;    // tasks_ became non-empty
  bool start_done_ = false;
  std::atomic<bool> healthy_{false};  // started without error
  std::optional<Error> start_error_;
  std::string retired_because_;  // under mu_; "" while not retired
  TrustHistory history_;          // under mu_
  std::deque<std::function<void()>> tasks_;
  std::atomic<int> queued_{0};  // tasks_.size(), polled by the home thread
  bool home_sleeping_ = false;  // under mu_: the home thread waits on tasks_cv_
  std::thread home_;
  Watchdog watchdog_{[this](CallStop& stop) { interrupt(stop); }};
};

}  // namespace manypy
