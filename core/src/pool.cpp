#include "pool.h"

#include "runtime.h"

namespace manypy {

namespace {

std::vector<dispatch::Lane*> lease(const PoolOptions& options) {
  if (options.lease.intra_op_threads < 1) {
    throw Error(Code::kInvalidArgument, "intra-op threads must be >= 1, not " +
                                            std::to_string(options.lease.intra_op_threads));
  }
  Runtime::get().api_usage().log("manypy.pool.create");
  return Runtime::get().interpreters().lease(options.interpreters, options.lease, options.trust);
}

}  // namespace

Pool::Pool(const PoolOptions& options)
    : trust_(options.trust),
      lanes_(lease(options)),
      dispatcher_(lanes_, options.thread_mode, options.queue_limit, options.stop_grace_ns) {}

Pool::~Pool() {
  dispatcher_.chooser().wait_idle();
  Runtime::get().interpreters().give_back(lanes_);
}

void Pool::check_interpreter(int index) const {
  dispatcher_.chooser().check_index(index);
  const Interpreter& interp = lanes_[index]->interpreter();
  if (!interp.serving()) {
    throw Error(Code::kInterpreterBroken,
                "interpreter " + std::to_string(index) + " cannot serve: " + interp.why_not_serving());
  }
}

void Pool::clean_up(Interpreter& interp,
                    const std::function<void(Interpreter&)>& step) noexcept {
  for (dispatch::Lane* lane : lanes_) {
    if (&lane->interpreter() != &interp) continue;
    try {
      lane->run_on_home([&](Interpreter* in, CallStop*) {
        step(*in);
        return Value();
      });
    } catch (...) {
      // A broken interpreter holds nothing to clean, and lease_end drops
      // whatever is left.
    }
    return;
  }
}

std::vector<Interpreter*> Pool::interpreters() const {
  std::vector<Interpreter*> all;
  for (dispatch::Lane* lane : lanes_) all.push_back(&lane->interpreter());
  return all;
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
  dispatcher_.call(options.interpreter, options.limits, [&](Interpreter* interp, CallStop* stop) {
    interp->exec(source, options.model_id, options.request_id, stop);
    return Value();
  });
}

Value Pool::eval(const CallOptions& options, const std::string& expression) {
  return dispatcher_.call(options.interpreter, options.limits,
                          [&](Interpreter* interp, CallStop* stop) {
                            return interp->eval(expression, options.model_id,
                                                options.request_id, stop);
                          });
}

}  // namespace manypy
