#include "batcher.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

#include "batch_sizes.h"
#include "batch_values.h"
#include "dispatch/threads.h"

namespace manypy {

namespace {

struct Request {
  Value args;
  std::optional<Value> kwargs;
  int64_t rows = 0;
  std::unique_ptr<CallStop> stop;  // null: unbounded
  std::string model_id, request_id;
  dispatch::Done done;

  void fail(const Error& error) {
    Error copy = error;
    done(nullptr, &copy);
  }
};

using Requests = std::vector<std::unique_ptr<Request>>;

struct Group {
  Requests requests;
  int64_t rows = 0;
  int64_t due_ns = 0;  // when it runs unless it fills first
};

}  // namespace

// Also the StopObserver of its requests' stops: a token cancelled while a
// request waits for its batch pokes the batcher's thread, which drops the
// request at once, as it does one whose deadline passes.
struct Batcher::State final : std::enable_shared_from_this<Batcher::State>, StopObserver {
  std::shared_ptr<ReplicatedObject> object;
  std::optional<std::string> method;
  BatcherOptions options;

  std::mutex mu;
  std::condition_variable cv;            // the thread waits on it
  std::map<std::string, Group> filling;  // by signature (batch_values.h)
  std::deque<Group> due;                 // full or waited long enough
  bool closing = false;
  // Batches submitted and not complete. While there are as many as the pool
  // has interpreters (now), a batch that has waited its time keeps filling until
  // one completes (as Triton's dynamic batcher waits for a free model
  // instance): under load, batches grow instead of queuing in the pool.
  size_t running = 0;

  void add(std::unique_ptr<Request> request, const std::string& signature);
  // A batch completed (or never ran): a waiting one may go.
  void batch_done() noexcept {
    {
      std::lock_guard<std::mutex> lock(mu);
      --running;
    }
    cv.notify_one();
  }
  void poke() noexcept override {
    { std::lock_guard<std::mutex> lock(mu); }
    cv.notify_one();
  }
  // Takes the requests stopped while they wait out of their groups, and
  // returns when the next waiting one's deadline comes. Under mu.
  int64_t drop_stopped(int64_t now, Requests& stopped);
  void run();
  void run_batch(Group group);
  static void complete(const Requests& requests, int dim, Value* result, Error* error);
};

void Batcher::State::add(std::unique_ptr<Request> request, const std::string& signature) {
  {
    std::lock_guard<std::mutex> lock(mu);
    Group& group = filling[signature];
    if (group.rows > 0 && group.rows + request->rows > static_cast<int64_t>(options.max_batch)) {
      due.push_back(std::move(group));
      group = Group{};
    }
    if (group.rows == 0) group.due_ns = monotonic_ns() + options.max_wait_ns;
    group.rows += request->rows;
    group.requests.push_back(std::move(request));
    if (group.rows >= static_cast<int64_t>(options.max_batch)) {
      due.push_back(std::move(group));
      filling.erase(signature);
    }
  }
  cv.notify_one();
}

int64_t Batcher::State::drop_stopped(int64_t now, Requests& stopped) {
  int64_t next = CallStop::kNoDeadline;
  for (auto it = filling.begin(); it != filling.end();) {
    Group& group = it->second;
    Requests kept;
    for (std::unique_ptr<Request>& r : group.requests) {
      if (r->stop && r->stop->check(now) != 0) {
        group.rows -= r->rows;
        stopped.push_back(std::move(r));
      } else {
        if (r->stop) next = std::min(next, r->stop->deadline_ns());
        kept.push_back(std::move(r));
      }
    }
    group.requests = std::move(kept);
    it = group.requests.empty() ? filling.erase(it) : std::next(it);
  }
  return next;
}

void Batcher::State::run() {
  dispatch::set_this_thread_kind(dispatch::ThreadKind::kBatcher);
  std::unique_lock<std::mutex> lock(mu);
  for (;;) {
    const int64_t now = monotonic_ns();
    Requests stopped;
    int64_t next = drop_stopped(now, stopped);
    if (!stopped.empty()) {
      lock.unlock();
      for (const auto& r : stopped) r->fail(r->stop->error("while it waited for its batch"));
      // Unlocked: a request's stop leaves its token, whose lock a cancel
      // holds while it pokes this thread (poke takes mu).
      stopped.clear();
      lock.lock();
      continue;
    }
    // The pool's size now: it may grow or be resized.
    const bool interpreter_free = running < object->pool().size();
    for (auto it = filling.begin(); it != filling.end();) {
      if (closing || (it->second.due_ns <= now && interpreter_free)) {
        due.push_back(std::move(it->second));
        it = filling.erase(it);
      } else {
        // A due batch waiting for an interpreter is woken by a completion.
        if (it->second.due_ns > now) next = std::min(next, it->second.due_ns);
        ++it;
      }
    }
    if (!due.empty()) {
      Group group = std::move(due.front());
      due.pop_front();
      ++running;
      lock.unlock();
      run_batch(std::move(group));
      lock.lock();
      continue;
    }
    if (closing) return;
    if (next == CallStop::kNoDeadline) {
      cv.wait(lock);
    } else {
      cv.wait_for(lock, std::chrono::nanoseconds(next - now));
    }
  }
}

void Batcher::State::run_batch(Group group) {
  // A request stopped while it waited for its batch is dropped from it.
  const int64_t now = monotonic_ns();
  auto requests = std::make_shared<Requests>();
  int64_t rows = 0;
  int64_t deadline = 0;  // the latest among the requests; 0 if any has none
  bool all_bounded = true;
  for (std::unique_ptr<Request>& r : group.requests) {
    if (r->stop && r->stop->check(now) != 0) {
      r->fail(r->stop->error("before its batch ran"));
      continue;
    }
    rows += r->rows;
    if (r->stop && r->stop->deadline_ns() != CallStop::kNoDeadline) {
      deadline = std::max(deadline, r->stop->deadline_ns());
    } else {
      all_bounded = false;
    }
    requests->push_back(std::move(r));
  }
  if (requests->empty()) {
    batch_done();
    return;
  }
  BatchSizes::get().record(options.name, rows);
  try {
    std::vector<const Value*> args, kwargs;
    for (const auto& r : *requests) {
      args.push_back(&r->args);
      if (r->kwargs) kwargs.push_back(&*r->kwargs);
    }
    Value batch_args = concat_rows(args, options.batch_dim);
    std::optional<Value> batch_kwargs;
    if (!kwargs.empty()) batch_kwargs.emplace(concat_rows(kwargs, options.batch_dim));
    // The batch runs for as long as one of its requests may still want it;
    // the request ids are joined for operator callbacks.
    CallOptions call;
    call.model_id = requests->front()->model_id;
    for (const auto& r : *requests) {
      if (r->request_id.empty()) continue;
      if (!call.request_id.empty()) call.request_id += ',';
      call.request_id += r->request_id;
    }
    if (all_bounded) call.limits.deadline_ns = deadline;
    const int dim = options.batch_dim;
    object->call_async(call, method ? &*method : nullptr, &batch_args,
                       batch_kwargs ? &*batch_kwargs : nullptr,
                       // The state outlives the requests' stops, which
                       // may poke it (State::poke).
                       [state = shared_from_this(), requests, dim](Value* result, Error* error) {
                         state->batch_done();
                         complete(*requests, dim, result, error);
                       });
  } catch (const Error& e) {
    batch_done();
    for (const auto& r : *requests) r->fail(e);
  } catch (const std::exception& e) {
    batch_done();
    for (const auto& r : *requests) r->fail(Error(Code::kInternal, e.what()));
  }
}

void Batcher::State::complete(const Requests& requests, int dim, Value* result, Error* error) {
  std::vector<Value> parts;
  if (result != nullptr) {
    // All or nothing: a result that cannot be split fails the whole batch.
    int64_t total = 0;
    for (const auto& r : requests) total += r->rows;
    try {
      int64_t offset = 0;
      for (const auto& r : requests) {
        parts.push_back(rows_of(*result, dim, offset, r->rows, total));
        offset += r->rows;
      }
    } catch (const Error& e) {
      for (const auto& r : requests) r->fail(e);
      return;
    } catch (const std::exception& e) {
      for (const auto& r : requests) r->fail(Error(Code::kInternal, e.what()));
      return;
    }
  }
  const int64_t now = monotonic_ns();
  for (size_t k = 0; k < requests.size(); ++k) {
    Request& r = *requests[k];
    if (r.stop && r.stop->check(now) != 0) {
      r.fail(r.stop->error("while its batch ran"));
    } else if (error != nullptr) {
      r.fail(*error);
    } else {
      r.done(&parts[k], nullptr);
    }
  }
}

Batcher::Batcher(std::shared_ptr<ReplicatedObject> object, const std::string* method,
                 BatcherOptions options)
    : state_(std::make_shared<State>()) {
  if (options.max_batch < 1) {
    throw Error(Code::kOutOfRange, "a batcher's largest batch must be at least 1 row");
  }
  if (options.name.empty()) options.name = method ? *method : "__call__";
  state_->object = std::move(object);
  if (method) state_->method = *method;
  state_->options = std::move(options);
  thread_ = std::thread([state = state_] { state->run(); });
}

Batcher::~Batcher() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->closing = true;
  }
  state_->cv.notify_one();
  thread_.join();
}

void Batcher::call_async(const CallOptions& options, const Value* args, const Value* kwargs,
                         dispatch::Done done) {
  check_call_arguments(args, kwargs);
  const Value no_args = Value::container(ValueKind::kTuple);
  const Value& positional = args ? *args : no_args;
  const BatchShape shape = batch_shape(positional, kwargs, state_->options.batch_dim);
  const dispatch::Chooser& chooser = state_->object->pool().dispatcher().chooser();
  if (chooser.at_queue_limit()) {
    throw Error(Code::kOverloaded,
                "the pool is overloaded: " + std::to_string(chooser.queue_limit()) +
                    " calls already wait for an interpreter (its queue "
                    "limit); the request was refused without running");
  }
  auto request = std::make_unique<Request>();
  if (options.limits.bounded()) {
    request->stop = std::make_unique<CallStop>(options.limits, CallStop::kDefaultGraceNs);
    request->stop->watch.watchdog.store(state_.get(), std::memory_order_release);
  }
  request->args = positional.clone();
  if (kwargs) request->kwargs.emplace(kwargs->clone());
  request->rows = shape.rows;
  request->model_id = options.model_id;
  request->request_id = options.request_id;
  request->done = std::move(done);
  state_->add(std::move(request), shape.signature);
}

Value Batcher::call(const CallOptions& options, const Value* args, const Value* kwargs) {
  struct Wait {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::optional<Value> value;
    std::optional<Error> error;
  };
  auto wait = std::make_shared<Wait>();
  call_async(options, args, kwargs, [wait](Value* value, Error* error) {
    std::lock_guard<std::mutex> lock(wait->mu);
    if (value) wait->value.emplace(std::move(*value));
    if (error) wait->error.emplace(*error);
    wait->done = true;
    wait->cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(wait->mu);
  wait->cv.wait(lock, [&] { return wait->done; });
  if (wait->error) throw *wait->error;
  return std::move(*wait->value);
}

}  // namespace manypy
