// One embedded interpreter: a namespace and the Python in it. Every call
// runs on the thread that makes it: which thread that is (a caller's, the
// interpreter's home thread) is the dispatch layer's choice (dispatch/).
// Interpreters live as long as the process (docs/isolation.md, hazard 8);
// pools lease them from the InterpreterSet.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "archive_trust.h"
#include "call_stop.h"
#include "error.h"
#include "interp_values.h"
#include "isolation/namespace.h"
#include "value.h"

namespace manypy {

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
  // `slot` is the interpreter's index in the process, and so its
  // namespace's (< isolation::Namespace::kMaxNamespaces).
  Interpreter(unsigned slot, const HostServices& host);
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Opens the namespace and starts Python in it with torch imported, on the
  // calling thread, which becomes the interpreter's main thread and must
  // live as long as the process (its home thread, dispatch/lane.h). Never
  // throws: a failure is kept for wait_started.
  void start() noexcept;
  // Waits for start's work; throws its Error if it failed. An interpreter
  // that failed to start stays broken for good.
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
  // Counts lease_begin: work done in the interpreter for a pool
  // (OncePerInterpreter) belongs to one lease, and lease_end undid it.
  uint64_t lease_number() const { return leases_.load(std::memory_order_acquire); }

  // Fails the start without trying it (the home thread then serves its
  // queue, failing each call): when another start has shown that this one
  // would fail (static TLS, docs/isolation.md). Instead of start().
  void fail_start(const Error& why) noexcept;

  // Code from an archive may run here from now on (TrustHistory): its
  // digest as the pool checked it, nullopt if the pool checked nothing.
  void ran_archive(const std::optional<Sha256>& digest, const std::string& origin);
  // Host code (exec, eval) runs here for a pool with `trust`: recorded as
  // TrustHistory::ran_unchecked_host_code says, when `trust` checks nothing.
  void ran_host_code(const ArchiveTrust& trust);
  // Whether every archive whose code ran here is one `trust` accepts, so
  // that the interpreter may serve a pool with that trust.
  bool trusted_by(const ArchiveTrust& trust) const;

  // Calls into Python, on the calling thread. Each throws Error on failure.
  // `stop` (nullptr: unbounded) stops the code early (call_stop.h); the
  // caller has the interpreter's watchdog watch it (dispatch/lane.h).
  // exec and eval: `model_id` and `request_id` (both empty: none) are what
  // operator callbacks report.
  void exec(const std::string& source, const std::string& model_id, const std::string& request_id,
            CallStop* stop);
  Value eval(const std::string& expression, const std::string& model_id,
             const std::string& request_id, CallStop* stop);

  // `stop` bounds the work: a lazy replica is part of the call that needs it.
  void package_open(uint64_t package_id, const void* data, size_t size, CallStop* stop);
  void package_close(uint64_t package_id) noexcept;
  void object_load(uint64_t object_id, uint64_t package_id, const std::string& module,
                   const std::string& name, CallStop* stop);
  void object_drop(uint64_t object_id) noexcept;
  // `method` empty: call the object itself. args: a list/tuple or none.
  Value object_call(uint64_t object_id, const std::string* method, const Value* args,
                    const Value* kwargs, const std::string& model_id, const std::string& request_id,
                    CallStop* stop);
  Value object_getattr(uint64_t object_id, const std::string& name, CallStop* stop);
  bool object_hasattr(uint64_t object_id, const std::string& name);

  // Stops the call `stop` belongs to, which is running in this interpreter
  // on another thread: its watchdog's interrupt (watchdog.h).
  void interrupt(CallStop& stop);
  // The same stop again, where the interrupt's trace cannot raise it
  // (interp_api.h, escalate): the watchdog's, from a grace period after
  // the interrupt on. True while the call still runs in the interpreter.
  bool escalate(CallStop& stop);

  // torch.ops.load_library(path).
  void load_library(const std::string& path);

  // Operator callbacks in this interpreter's libtorch (no GIL needed).
  void add_op_callbacks(uint64_t id, double sampling_probability, bool needs_inputs,
                        void (*emit)(uint64_t, int, const void*));
  void remove_op_callbacks(uint64_t id) noexcept;

 private:
  using Call = std::function<int(const manypy_interp_api&, const mpi_sink&)>;

  // Runs `call` inside the interpreter on this thread and turns its sink
  // output into a Value or an Error. After a bounded call, retires the
  // interpreter if the stop left it unfit, and drops a result that came
  // after the deadline.
  Value run(const Call& call, CallStop* stop = nullptr);
  // Runs a step that cannot fail usefully (closing, dropping, removing),
  // swallowing any error.
  void run_clean_up(const std::function<void(const manypy_interp_api&)>& step) noexcept;
  void enter(const Call& call, Outcome& outcome);

  const unsigned slot_;
  const HostServices host_;
  std::unique_ptr<isolation::Namespace> ns_;

  mutable std::mutex mu_;
  std::condition_variable started_cv_;  // start_done_ became true
  bool start_done_ = false;
  std::atomic<bool> healthy_{false};  // started without error
  std::atomic<uint64_t> leases_{0};
  std::optional<Error> start_error_;
  std::string retired_because_;  // under mu_; "" while not retired
  TrustHistory history_;         // under mu_
};

}  // namespace manypy
