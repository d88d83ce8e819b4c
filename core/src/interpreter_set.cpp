#include "interpreter_set.h"

#include <fstream>
#include <iterator>

namespace manypy {

namespace {

// Whether the process started with glibc's optional static TLS raised. glibc
// reads GLIBC_TUNABLES only at start, so read the environment the process
// started with, not today's.
bool static_tls_raised() {
  std::ifstream in("/proc/self/environ", std::ios::binary);
  std::string env((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return env.find("glibc.rtld.optional_static_tls=") != std::string::npos;
}

}  // namespace

InterpreterSet::InterpreterSet(const HostServices& host, OperatorLibraries& libraries,
                               OperatorCallbacks& callbacks)
    : host_(host), libraries_(libraries), callbacks_(callbacks) {}

size_t InterpreterSet::capacity() const { return isolation::Namespace::kMaxNamespaces; }

void InterpreterSet::join(Interpreter& interp) {
  try {
    // Libraries first: a callback may be about their operators.
    libraries_.join(interp);
    callbacks_.join(interp);
  } catch (const Error& e) {
    interp.retire("it could not take part in the process's operator libraries or callbacks: " +
                  e.message());
    throw;
  }
}

std::vector<InterpreterSet::Leased> InterpreterSet::lease(size_t count, const ArchiveTrust& trust) {
  const size_t limit = capacity();
  if (count == 0 || count > limit) {
    throw Error(Code::kOutOfRange, "a pool needs 1 to " + std::to_string(limit) +
                                       " interpreters on this platform, not " +
                                       std::to_string(count));
  }
  std::vector<Leased> chosen;
  std::lock_guard<std::mutex> lock(mu_);
  // An idle interpreter that ran code this pool does not trust keeps it:
  // whatever that code patched in the installed modules (torch, the
  // standard library) would run in this pool's calls. It waits for a
  // pool that trusts it, or one that checks nothing.
  size_t distrusted = 0;
  for (size_t i = 0; i < all_.size() && chosen.size() < count; ++i) {
    if (!idle_[i] || all_[i]->interpreter().broken()) continue;
    if (!all_[i]->interpreter().trusted_by(trust)) {
      ++distrusted;
      continue;
    }
    chosen.push_back({all_[i].get(), false});
  }
  const size_t missing = count - chosen.size();
  // Out of static TLS, no start is tried: that is the reason to give, even
  // when the interpreters that failed also took the process's last places.
  if (missing > 0 && static_tls_failure_) throw *static_tls_failure_;
  if (all_.size() + missing > limit) {
    size_t broken = 0;
    for (const auto& lane : all_) broken += lane->interpreter().broken() ? 1 : 0;
    size_t idle = 0;
    for (size_t i = 0; i < all_.size(); ++i) idle += idle_[i] ? 1 : 0;
    const size_t leased = all_.size() - broken - idle;
    throw Error(Code::kResourceExhausted,
                "cannot start " + std::to_string(missing) +
                    " more interpreter(s): of this "
                    "process's " +
                    std::to_string(limit) + ", " + std::to_string(leased) + " are leased to pools" +
                    (distrusted ? ", " + std::to_string(distrusted) +
                                      " ran code from archives this pool does not trust "
                                      "(docs/security.md, \"Pools with different trust\")"
                                : std::string()) +
                    (broken ? ", " + std::to_string(broken) + " failed to start or were retired"
                            : std::string()));
  }
  for (const Leased& leased : chosen) idle_[leased.lane->interpreter().slot()] = false;
  for (size_t k = 0; k < missing; ++k) {
    const unsigned slot = static_cast<unsigned>(all_.size());
    all_.push_back(std::make_unique<dispatch::Lane>(slot, host_));
    idle_.push_back(false);
    chosen.push_back({all_.back().get(), true});
  }
  size_.store(all_.size(), std::memory_order_release);
  return chosen;
}

bool InterpreterSet::parallel_starts() const {
  static const bool raised = static_tls_raised();
  return raised;
}

void InterpreterSet::start(dispatch::Lane& lane, bool wait) noexcept {
  // Start in parallel: the dynamic loader serializes the library loads, but
  // Python's own start and import work overlap. Not so when static TLS may
  // run out: glibc 2.36 can then fail an assertion (_dl_add_to_slotinfo:
  // idx == 0) when a load fails for want of static TLS while another
  // namespace is loading (docs/isolation.md). Without the tunable, start one
  // at a time, process-wide, and stop at the first such failure. Either way
  // the set's lock is not held while an interpreter starts (about a second),
  // so other pools come and go meanwhile.
  if (parallel_starts()) {
    lane.begin_start();
    if (wait) start_settled(lane);
    return;
  }
  std::lock_guard<std::mutex> one_at_a_time(sequential_start_mu_);
  std::optional<Error> earlier;
  {
    std::lock_guard<std::mutex> lock(mu_);
    earlier = static_tls_failure_;
  }
  if (earlier) {
    lane.begin_failed_start(*earlier);
    return;
  }
  lane.begin_start();
  try {
    lane.interpreter().wait_started();
  } catch (const Error& e) {
    if (e.code() == Code::kStaticTls) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!static_tls_failure_) static_tls_failure_ = e;
    }
  }
}

void InterpreterSet::start_settled(dispatch::Lane& lane) noexcept {
  try {
    lane.interpreter().wait_started();
  } catch (...) {
    // The interpreter keeps its failure for bring_up.
  }
}

void InterpreterSet::bring_up(Interpreter& interp, bool fresh, const LeaseSettings& settings) {
  if (fresh) {
    try {
      interp.wait_started();
    } catch (const Error& e) {
      if (e.code() == Code::kStaticTls) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!static_tls_failure_) static_tls_failure_ = e;
      }
      throw;
    }
    join(interp);
  }
  try {
    interp.lease_begin(settings);
  } catch (const Error& e) {
    // Half begun, its state cannot be trusted with another lease.
    interp.retire("its lease could not begin: " + e.message());
    throw;
  }
}

void InterpreterSet::give_back(const std::vector<dispatch::Lane*>& lanes) noexcept {
  for (dispatch::Lane* lane : lanes) {
    bool clean = true;
    try {
      lane->run_on_home([](Interpreter* interp, CallStop*) {
        interp->lease_end();
        return Value();
      });
    } catch (const Error& e) {
      // An interpreter that cannot be cleaned (a setting its model changed
      // that cannot be put back: manypy.LeaseStateError) is not handed to
      // another pool, and counts as retired.
      clean = false;
      if (!lane->interpreter().broken()) {
        lane->interpreter().retire("its lease could not end cleanly: " + e.message());
      }
    } catch (...) {
      clean = false;
      if (!lane->interpreter().broken()) {
        lane->interpreter().retire("its lease could not end cleanly");
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (clean) idle_[lane->interpreter().slot()] = true;
  }
}

}  // namespace manypy
