#include "pool.h"

#include <algorithm>

#include "runtime.h"

namespace manypy {

namespace {

// The most members the pool may have: the process's limit. Checks the
// options first.
size_t capacity_for(const PoolOptions& options) {
  if (options.lease.intra_op_threads < 1) {
    throw Error(Code::kInvalidArgument, "intra-op threads must be >= 1, not " +
                                            std::to_string(options.lease.intra_op_threads));
  }
  const size_t limit = Runtime::get().interpreters().capacity();
  if (options.interpreters == 0 || options.interpreters > limit) {
    throw Error(Code::kOutOfRange, "a pool needs 1 to " + std::to_string(limit) +
                                       " interpreters on this platform, not " +
                                       std::to_string(options.interpreters));
  }
  if (options.max_interpreters != 0 &&
      (options.max_interpreters < options.interpreters || options.max_interpreters > limit)) {
    throw Error(Code::kOutOfRange,
                "the most interpreters must be between the pool's starting number (" +
                    std::to_string(options.interpreters) + ") and this platform's limit (" +
                    std::to_string(limit) + "), not " + std::to_string(options.max_interpreters));
  }
  if (options.grow_after_ns < 1) {
    throw Error(Code::kOutOfRange, "the wait that grows a pool must be >= 1 ns, not " +
                                       std::to_string(options.grow_after_ns));
  }
  Runtime::get().api_usage().log("manypy.pool.create");
  return limit;
}

PoolMembers::Settings members_settings(const PoolOptions& options) {
  PoolMembers::Settings settings;
  settings.lease = options.lease;
  settings.trust = options.trust;
  settings.max = options.max_interpreters ? options.max_interpreters : options.interpreters;
  settings.grow_after_ns = options.grow_after_ns;
  settings.on_failed = options.on_interpreter_failed;
  return settings;
}

}  // namespace

Pool::Pool(const PoolOptions& options)
    : trust_(options.trust),
      name_(options.name),
      dispatcher_(capacity_for(options), options.thread_mode, options.queue_limit,
                  options.stop_grace_ns),
      members_(dispatcher_.chooser(), members_settings(options)) {
  // A member whose interpreter is retired is replaced (pool_members.h).
  dispatcher_.chooser().set_retire_observer([this](size_t index) { members_.on_retired(index); });
  if (options.max_interpreters > options.interpreters) {
    dispatcher_.chooser().set_wait_observer(
        [this](int64_t waited_ns) { members_.on_wait(waited_ns); });
  }
  members_.grow(options.interpreters,
                options.serve_early ? PoolMembers::Wait::kFirst : PoolMembers::Wait::kAll);
}

Pool::~Pool() {
  dispatcher_.chooser().wait_idle();
  members_.close();
}

void Pool::resize(size_t interpreters) {
  if (dispatcher_.chooser().draining()) {
    throw Error(Code::kDraining, "the pool is draining (manypy_pool_drain): it is not resized");
  }
  members_.resize(interpreters);
}

PoolStats Pool::stats() const {
  const dispatch::Chooser& chooser = dispatcher_.chooser();
  PoolStats stats;
  stats.interpreters = chooser.size();
  for (size_t i = 0; i < stats.interpreters; ++i) {
    switch (chooser.state(i)) {
      case dispatch::SlotState::kStarting:
        ++stats.starting;
        break;
      case dispatch::SlotState::kUp:
        // Lost (a stopped call still runs in it) is a state of its own.
        if (chooser.lane(i).lost()) {
          ++stats.lost;
        } else if (!chooser.lane(i).serving()) {
          ++stats.broken;
        } else if (chooser.load(i) > 0) {
          ++stats.busy;
        } else {
          ++stats.ready;
        }
        break;
      default:  // kDown; kLeaving and kAbsent are no members
        ++stats.broken;
        break;
    }
  }
  stats.in_flight = chooser.in_flight();
  stats.queued = chooser.queued();
  stats.draining = chooser.draining();
  stats.completed = dispatcher_.metrics().completed();
  stats.replaced = members_.replaced();
  stats.no_room = members_.no_room();
  return stats;
}

DrainResult Pool::drain(int64_t deadline_ns) {
  dispatch::Chooser& chooser = dispatcher_.chooser();
  // The count first: a call of ours cancelled by an overlapping drain, and
  // ended between the two reads, would otherwise count as finished.
  const uint64_t cancelled_before = chooser.drain_cancelled();
  const size_t at_start = chooser.drain();
  if (!chooser.wait_idle(deadline_ns)) {
    // What is left at the deadline is cancelled, as by a cancel token: the
    // watchdogs stop the running calls and complete the queued ones.
    for (dispatch::Lane* lane : members_.lanes()) {
      lane->cancel_calls(
          "the pool was drained (manypy_pool_drain) and the drain's deadline passed");
    }
    const int64_t grace = std::max<int64_t>(dispatcher_.stop_grace_ns(), 10 * 1000 * 1000);
    chooser.wait_idle(monotonic_ns() + 2 * grace);
  }
  // No call is admitted once the pool drains, so every call in flight now,
  // and every one a drain cancelled since we began, was in flight at our
  // start: those cancelled, and those the cancel has not ended yet, are
  // the cancelled ones; the rest finished by themselves.
  DrainResult result;
  result.cancelled = std::min<size_t>(
      at_start, (chooser.drain_cancelled() - cancelled_before) + chooser.in_flight());
  result.finished = at_start - result.cancelled;
  return result;
}

std::string Pool::prometheus_text() const {
  return pool_prometheus_text(dispatcher_.metrics().snapshot(), stats(), name_);
}

void Pool::check_interpreter(int index) const {
  const dispatch::Chooser& chooser = dispatcher_.chooser();
  chooser.check_index(index);
  // A member still starting can serve once it has: calls pinned to it wait.
  if (chooser.state(index) == dispatch::SlotState::kStarting) return;
  const dispatch::Lane& lane = chooser.lane(index);
  if (chooser.state(index) != dispatch::SlotState::kUp || !lane.serving() || lane.lost()) {
    throw Error(Code::kInterpreterBroken, "interpreter " + std::to_string(index) +
                                              " cannot serve: " + lane.why_not_serving());
  }
}

void Pool::clean_up(Interpreter& interp, const std::function<void(Interpreter&)>& step) noexcept {
  // Not a member any more: its lease ended, and that dropped what the
  // step would.
  dispatch::Lane* lane = members_.lane_of(interp);
  if (lane == nullptr) return;
  try {
    lane->run_on_home([&](Interpreter* in, CallStop*) {
      step(*in);
      return Value();
    });
  } catch (...) {
    // A broken interpreter holds nothing to clean, and lease_end drops
    // whatever is left.
  }
}

namespace {

CallOptions on(int interpreter) {
  CallOptions options;
  options.interpreter = interpreter;
  return options;
}

}  // namespace

void Pool::exec(int interpreter, const std::string& source) { exec(on(interpreter), source); }

void Pool::exec_all(const std::string& source) {
  for (size_t i = 0; i < size(); ++i) exec(static_cast<int>(i), source);
}

Value Pool::eval(int interpreter, const std::string& expression) {
  return eval(on(interpreter), expression);
}

void Pool::exec(const CallOptions& options, const std::string& source) {
  dispatcher_.call(options.interpreter, options.limits, &options.model_id,
                   [&](Interpreter* interp, CallStop* stop) {
                     interp->ran_host_code(trust_);  // before any of it runs
                     interp->exec(source, options.model_id, options.request_id, stop);
                     return Value();
                   });
}

Value Pool::eval(const CallOptions& options, const std::string& expression) {
  return dispatcher_.call(options.interpreter, options.limits, &options.model_id,
                          [&](Interpreter* interp, CallStop* stop) {
                            interp->ran_host_code(trust_);
                            return interp->eval(expression, options.model_id, options.request_id,
                                                stop);
                          });
}

}  // namespace manypy
