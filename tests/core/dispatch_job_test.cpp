// Jobs (core/src/dispatch/job.h): a job completes exactly once, succeeded or
// failed, including one stopped while queued as a thread claims it; what
// its work throws becomes an Error with the right code; it gives its load
// back before it reports; its errors name its interpreter; and it records
// itself in its request metrics. Needs no interpreter: jobs run as on a
// host worker (execute(nullptr)), and their load comes from a chooser whose
// members' health the test gives (dispatch_chooser_test.cpp).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "call_stop.h"
#include "dispatch/chooser.h"
#include "dispatch/completer.h"
#include "dispatch/job.h"
#include "error.h"
#include "request_metrics.h"
#include "watchdog.h"

namespace manypy::dispatch {
namespace {

using std::chrono::seconds;

// Set once; waited for with a bound that only guards against a hang.
class Event {
 public:
  void set() {
    std::lock_guard<std::mutex> lock(mu_);
    set_ = true;
    cv_.notify_all();
  }
  bool wait(seconds bound = seconds(10)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, bound, [this] { return set_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool set_ = false;
};

class FakeHealth final : public MemberHealth {
 public:
  bool serving() const override { return true; }
  std::string why_not_serving() const override { return ""; }
};

// A chooser whose `n` members are up, to take tickets from.
struct Members {
  explicit Members(size_t n) : chooser(n, 0), health(n) {
    for (size_t i = 0; i < n; ++i) {
      chooser.add(i, nullptr, &health[i]);
      chooser.set_state(i, SlotState::kUp);
    }
    chooser.set_size(n);
  }
  Chooser chooser;
  std::vector<FakeHealth> health;
};

// A job that counts how it completes and what the chooser's load was when
// it reported.
class CountingJob final : public Job {
 public:
  CountingJob(const CallLimits& limits, std::function<Value()> work,
              const Chooser* chooser = nullptr)
      : Job(limits, 0), work_(std::move(work)), chooser_(chooser) {}

  std::atomic<int> runs{0}, successes{0}, failures{0};
  std::atomic<bool> ran_without_interpreter{true};
  std::optional<Value> value;
  std::optional<Error> error;
  // The chooser's calls in flight when the outcome was reported.
  std::atomic<long> in_flight_at_report{-1};
  Event reported;

 protected:
  Value run(Interpreter* interp) override {
    runs.fetch_add(1);
    if (interp != nullptr) ran_without_interpreter = false;
    return work_();
  }
  void succeeded(Value v) noexcept override {
    note();
    value.emplace(std::move(v));
    successes.fetch_add(1);
    reported.set();
  }
  void failed(Error e) noexcept override {
    note();
    error.emplace(std::move(e));
    failures.fetch_add(1);
    reported.set();
  }

 private:
  void note() {
    if (chooser_ != nullptr) in_flight_at_report = static_cast<long>(chooser_->in_flight());
  }
  std::function<Value()> work_;
  const Chooser* chooser_;
};

// Watchdogs' threads live as long as the process, so a watchdog must too.
Watchdog& watchdog() {
  static Watchdog* w = new Watchdog([](CallStop&) {}, [](CallStop&) { return false; });
  return *w;
}

// Waits until the completion thread has run every task posted so far: a
// second completion of a job, were there one, would be among them.
void drain_completer() {
  Event done;
  complete_later([&done] { done.set(); });
  ASSERT_TRUE(done.wait());
}

// ---- Completion and the mapping of exceptions ----

TEST(Job, SucceedsExactlyOnce) {
  CountingJob job(CallLimits{}, [] { return Value::of_int(7); });
  job.execute(nullptr);
  EXPECT_EQ(job.runs, 1);
  EXPECT_EQ(job.successes, 1);
  EXPECT_EQ(job.failures, 0);
  EXPECT_TRUE(job.ran_without_interpreter);
  ASSERT_TRUE(job.value);
  EXPECT_EQ(job.value->i, 7);
}

TEST(Job, AnErrorKeepsItsCodeAndDetails) {
  CountingJob job(CallLimits{}, []() -> Value {
    throw Error(Code::kPython, "bad input", "ValueError", "Traceback: ...");
  });
  job.execute(nullptr);
  EXPECT_EQ(job.successes, 0);
  ASSERT_EQ(job.failures, 1);
  EXPECT_EQ(job.error->code(), Code::kPython);
  EXPECT_EQ(job.error->message(), "bad input");  // no ticket: no "interpreter N: "
  EXPECT_EQ(job.error->python_type(), "ValueError");
  EXPECT_EQ(job.error->traceback(), "Traceback: ...");
}

TEST(Job, OutOfMemoryIsResourceExhausted) {
  CountingJob job(CallLimits{}, []() -> Value { throw std::bad_alloc(); });
  job.execute(nullptr);
  ASSERT_EQ(job.failures, 1);
  EXPECT_EQ(job.error->code(), Code::kResourceExhausted);
  EXPECT_EQ(job.error->message(), "out of memory");
}

TEST(Job, OtherExceptionsAreInternal) {
  CountingJob job(CallLimits{}, []() -> Value { throw std::runtime_error("it broke"); });
  job.execute(nullptr);
  ASSERT_EQ(job.failures, 1);
  EXPECT_EQ(job.error->code(), Code::kInternal);
  EXPECT_EQ(job.error->message(), "internal error: it broke");

  CountingJob odd(CallLimits{}, []() -> Value { throw 42; });
  odd.execute(nullptr);
  ASSERT_EQ(odd.failures, 1);
  EXPECT_EQ(odd.error->code(), Code::kInternal);
  EXPECT_EQ(odd.error->message(), "internal error: unknown exception");
}

TEST(Job, ASyncJobHandsItsOutcomeToItsCaller) {
  Interpreter* seen_interp = reinterpret_cast<Interpreter*>(1);
  CallStop* seen_stop = nullptr;
  const Work work = [&](Interpreter* interp, CallStop* stop) {
    seen_interp = interp;
    seen_stop = stop;
    return Value::of_string("done");
  };
  SyncJob job(CallLimits{}, 0, work);
  job.execute(nullptr);
  EXPECT_EQ(job.wait().s, "done");
  EXPECT_EQ(seen_interp, nullptr);
  EXPECT_EQ(seen_stop, job.stop());  // every job has its stop, bounded or not

  const Work fails = [](Interpreter*, CallStop*) -> Value {
    throw Error(Code::kNotFound, "no such thing");
  };
  SyncJob failing(CallLimits{}, 0, fails);
  failing.execute(nullptr);
  try {
    failing.wait();
    ADD_FAILURE() << "wait() did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kNotFound);
    EXPECT_EQ(e.message(), "no such thing");
  }
}

// The caller waits first; the job completes on another thread.
TEST(Job, ASyncJobWakesACallerThatWaits) {
  Event release;
  const Work work = [&](Interpreter*, CallStop*) {
    EXPECT_TRUE(release.wait());
    return Value::of_int(3);
  };
  auto job = std::make_shared<SyncJob>(CallLimits{}, 0, work);
  std::thread runner([job] { job->execute(nullptr); });
  std::thread releaser([&] {
    // Only so that the caller is likely past its spin and asleep; the test
    // holds whichever way the threads run.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    release.set();
  });
  EXPECT_EQ(job->wait().i, 3);
  runner.join();
  releaser.join();
}

TEST(Job, AJobWhoseDeadlinePassedIsRefusedAtOnce) {
  CallLimits limits;
  limits.deadline_ns = monotonic_ns() - 1;
  try {
    CountingJob job(limits, [] { return Value::none(); });
    ADD_FAILURE() << "the job was made";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kDeadlineExceeded);
  }
}

// ---- The ticket ----

TEST(Job, TheLoadIsGivenBackBeforeTheOutcomeIsReported) {
  Members members(2);
  Chooser& c = members.chooser;
  for (const bool fail : {false, true}) {
    CountingJob job(
        CallLimits{},
        [fail]() -> Value {
          if (fail) throw Error(Code::kPython, "no");
          return Value::none();
        },
        &c);
    job.hold(c.admit(1));
    EXPECT_EQ(c.in_flight(), 1u);
    job.execute(nullptr);
    EXPECT_EQ(job.successes + job.failures, 1);
    // The receiver of the outcome may free the pool: nothing was in flight.
    EXPECT_EQ(job.in_flight_at_report, 0);
    EXPECT_EQ(c.load(1), 0);
  }
}

TEST(Job, ErrorsOfAJobWithATicketNameItsInterpreter) {
  Members members(3);
  CountingJob job(CallLimits{},
                  []() -> Value { throw Error(Code::kPython, "boom", "RuntimeError"); });
  job.hold(members.chooser.admit(2));
  job.execute(nullptr);
  ASSERT_EQ(job.failures, 1);
  EXPECT_EQ(job.error->code(), Code::kPython);
  EXPECT_EQ(job.error->message(), "interpreter 2: boom");
  EXPECT_EQ(job.error->python_type(), "RuntimeError");
}

// A drain's deadline cancels the calls it finds (Lane::cancel_calls, which
// is the watchdog's cancel_all): the call's error says so, and the chooser
// counts it; a call cancelled by its own token is not counted.
TEST(Job, ACallCancelledByADrainIsCountedAsSuch) {
  // Lives as its threads do.
  static Watchdog* drained = new Watchdog([](CallStop&) {}, [](CallStop&) { return false; });
  Members members(1);
  Chooser& c = members.chooser;
  CountingJob job(CallLimits{}, []() -> Value { throw Error(Code::kCancelled, "cancelled"); });
  job.hold(c.admit(0));
  job.watch(*drained, /*queued=*/false, "the interpreter");
  drained->cancel_all("the pool's drain deadline passed");
  job.execute(nullptr);
  ASSERT_EQ(job.failures, 1);
  EXPECT_EQ(job.error->code(), Code::kCancelled);
  EXPECT_EQ(job.error->message(), "interpreter 0: cancelled (the pool's drain deadline passed)");
  EXPECT_EQ(c.drain_cancelled(), 1u);

  auto token = std::make_shared<CancelToken>();
  CallLimits limits;
  limits.token = token;
  CountingJob own(limits, []() -> Value { throw Error(Code::kCancelled, "cancelled"); });
  own.hold(c.admit(0));
  own.watch(*drained, false, "the interpreter");
  token->cancel();
  own.execute(nullptr);
  ASSERT_EQ(own.failures, 1);
  EXPECT_EQ(own.error->message(), "interpreter 0: cancelled");
  EXPECT_EQ(c.drain_cancelled(), 1u);
}

// ---- Stopped while queued ----

// Cancelled while it waits, a queued job completes without running, on the
// completion thread, and the thread that later takes it from its queue
// must not run it.
TEST(Job, AJobStoppedWhileQueuedCompletesWithoutRunning) {
  Members members(1);
  auto token = std::make_shared<CancelToken>();
  CallLimits limits;
  limits.token = token;
  auto job = std::make_shared<CountingJob>(
      limits, [] { return Value::none(); }, &members.chooser);
  job->hold(members.chooser.admit(0));
  job->watch(watchdog(), /*queued=*/true, "the interpreter");
  token->cancel();
  ASSERT_TRUE(job->reported.wait());
  EXPECT_FALSE(job->claim_to_run());
  drain_completer();
  EXPECT_EQ(job->runs, 0);
  EXPECT_EQ(job->successes, 0);
  ASSERT_EQ(job->failures, 1);
  EXPECT_EQ(job->error->code(), Code::kCancelled);
  EXPECT_EQ(job->error->message(),
            "interpreter 0: cancelled while waiting for the interpreter (busy with earlier "
            "calls): the call's cancel token was cancelled");
  EXPECT_EQ(job->in_flight_at_report, 0);
}

TEST(Job, AJobClaimedBeforeItsStopRuns) {
  auto token = std::make_shared<CancelToken>();
  CallLimits limits;
  limits.token = token;
  auto job = std::make_shared<CountingJob>(limits, [] { return Value::of_int(1); });
  job->watch(watchdog(), /*queued=*/true, "the interpreter");
  ASSERT_TRUE(job->claim_to_run());
  token->cancel();  // too late to take it from the thread that claimed it
  job->execute(nullptr);
  drain_completer();
  EXPECT_EQ(job->runs, 1);
  EXPECT_EQ(job->successes, 1);
  EXPECT_EQ(job->failures, 0);
}

// The stop and the claim race: the home thread claims the job just as the
// watchdog, woken by the cancel, tries to complete it unrun. Whichever wins,
// the job completes exactly once, runs only if the claim won, and gives its
// load back. The claim comes a little later each round (0 to 60 us after the
// stop is set) so that both sides win some rounds.
TEST(Job, AStopRacingAClaimCompletesTheJobExactlyOnce) {
  Members members(1);
  Chooser& c = members.chooser;
  int ran = 0, stopped = 0;
  for (int round = 0; round < 300; ++round) {
    auto token = std::make_shared<CancelToken>();
    CallLimits limits;
    limits.token = token;
    auto job = std::make_shared<CountingJob>(
        limits, [] { return Value::of_int(5); }, &c);
    job->hold(c.admit(0));
    job->watch(watchdog(), /*queued=*/true, "the interpreter");
    const int64_t delay_ns = (round % 31) * 2000;
    std::thread home([job, delay_ns] {
      const int64_t bound = monotonic_ns() + 10LL * 1000 * 1000 * 1000;
      while (job->stop()->stop() == 0 && monotonic_ns() < bound) std::this_thread::yield();
      const int64_t at = monotonic_ns() + delay_ns;
      while (monotonic_ns() < at) {
      }
      if (job->claim_to_run()) job->execute(nullptr);
    });
    token->cancel();
    home.join();
    ASSERT_TRUE(job->reported.wait()) << "round " << round;
    drain_completer();
    ASSERT_EQ(job->successes + job->failures, 1) << "round " << round;
    EXPECT_EQ(job->runs, job->successes) << "round " << round;
    if (job->failures == 1) {
      EXPECT_EQ(job->error->code(), Code::kCancelled);
      ++stopped;
    } else {
      ++ran;
    }
    EXPECT_EQ(job->in_flight_at_report, 0);
    EXPECT_EQ(c.in_flight(), 0u);
  }
  std::printf("the claim won %d rounds, the stop %d\n", ran, stopped);
}

// ---- Lost while running ----

// A running job found lost (its stop came, and it is still in its
// interpreter twice its grace period later: at once, with this job's grace
// of 0) completes then with the stop's error, while its thread still runs
// it: its caller is told in time. When the run ends, it completes no
// second time, and gives its load back only then.
TEST(Job, AJobLostWhileItRunsCompletesAtOnceAndOnlyOnce) {
  Members members(1);
  Chooser& c = members.chooser;
  auto token = std::make_shared<CancelToken>();
  CallLimits limits;
  limits.token = token;
  Event release;
  std::shared_ptr<CountingJob> job;
  job = std::make_shared<CountingJob>(
      limits,
      [&]() -> Value {
        job->stop()->in_interpreter.store(true, std::memory_order_seq_cst);
        token->cancel();
        EXPECT_TRUE(release.wait());
        return Value::of_int(7);
      },
      &c);
  job->hold(c.admit(0));
  job->watch(watchdog(), /*queued=*/true, "the interpreter");
  ASSERT_TRUE(job->claim_to_run());
  std::thread home([job] { job->execute(nullptr); });
  ASSERT_TRUE(job->reported.wait());
  ASSERT_EQ(job->failures, 1);
  EXPECT_EQ(job->error->code(), Code::kCancelled);
  EXPECT_NE(job->error->message().find("interpreter 0: cancelled and the call did not end"),
            std::string::npos)
      << job->error->message();
  EXPECT_EQ(job->in_flight_at_report, 1);  // the call still runs, and holds its load
  EXPECT_EQ(c.in_flight(), 1u);
  release.set();
  home.join();
  drain_completer();
  EXPECT_EQ(job->runs, 1);
  EXPECT_EQ(job->successes, 0);
  EXPECT_EQ(job->failures, 1);
  EXPECT_EQ(c.in_flight(), 0u);
}

// ---- Metrics ----

TEST(Job, ARefusalIsRecordedWithoutDurations) {
  RequestMetrics metrics;
  RequestMetrics::Series& series = metrics.series("model");
  CountingJob job(CallLimits{}, [] { return Value::none(); });
  job.measure(&series);
  job.refused(Error(Code::kOverloaded, "full"));
  EXPECT_EQ(series.completed[static_cast<int>(Code::kOverloaded)], 1u);
  EXPECT_EQ(series.request.snapshot().count, 0u);
  EXPECT_EQ(series.queue.snapshot().count, 0u);
  EXPECT_EQ(job.runs, 0);

  CountingJob unmeasured(CallLimits{}, [] { return Value::none(); });
  unmeasured.refused(Error(Code::kDraining, "draining"));  // records nowhere
  EXPECT_EQ(series.completed[static_cast<int>(Code::kDraining)], 0u);
}

TEST(Job, ACompletedJobRecordsItsCodeAndDurations) {
  RequestMetrics metrics;
  RequestMetrics::Series& series = metrics.series("model");
  Members members(1);
  std::vector<int64_t> waits;
  members.chooser.set_wait_observer([&](int64_t ns) { waits.push_back(ns); });

  // Never began in an interpreter: a request duration, no queue duration.
  CountingJob plain(CallLimits{}, [] { return Value::none(); });
  plain.measure(&series);
  plain.execute(nullptr);
  EXPECT_EQ(series.completed[0], 1u);
  EXPECT_EQ(series.request.snapshot().count, 1u);
  EXPECT_EQ(series.queue.snapshot().count, 0u);

  // Began (as the interpreter side marks it) a millisecond after its
  // admission: its wait is recorded, and a job holding a ticket tells the
  // chooser how long it waited.
  CountingJob* current = nullptr;
  CountingJob waited(CallLimits{}, [&]() -> Value {
    current->stop()->control()->began_ns = monotonic_ns() + 1000 * 1000;
    throw Error(Code::kPython, "failed after its wait");
  });
  current = &waited;
  waited.measure(&series);
  waited.hold(members.chooser.admit(0));
  waited.execute(nullptr);
  EXPECT_EQ(series.completed[static_cast<int>(Code::kPython)], 1u);
  EXPECT_EQ(series.request.snapshot().count, 2u);
  const RequestMetrics::Histogram::Snapshot queue = series.queue.snapshot();
  EXPECT_EQ(queue.count, 1u);
  EXPECT_GE(queue.sum_seconds, 0.001);
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_GE(waits[0], 1000 * 1000);
}

}  // namespace
}  // namespace manypy::dispatch
