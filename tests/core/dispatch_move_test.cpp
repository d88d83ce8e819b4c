// Calls that move off an interpreter that stopped serving while they waited
// for it (Job::move_elsewhere, Chooser::readmit, Lane's home thread): a call
// admitted for any interpreter goes to another member, a pinned one stays
// to fail with its interpreter's status, and when no member can serve the
// call fails with the pool's error. Needs no interpreter: members' health is
// FakeHealth (the chooser's MemberHealth seam), and each member's lane is a
// WorkQueue served the way Lane::home_main serves its queue.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "call_stop.h"
#include "dispatch/chooser.h"
#include "dispatch/completer.h"
#include "dispatch/job.h"
#include "dispatch/work_queue.h"
#include "error.h"
#include "watchdog.h"

namespace manypy::dispatch {
namespace {

using std::chrono::seconds;

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
  bool serving() const override { return serves.load(); }
  std::string why_not_serving() const override { return serves.load() ? "" : why; }
  std::atomic<bool> serves{true};
  std::string why;
};

// Watchdogs' threads live as long as the process, so watchdogs must too.
Watchdog& watchdog(size_t member) {
  static std::vector<Watchdog*>* all = [] {
    auto* v = new std::vector<Watchdog*>();
    for (int k = 0; k < 4; ++k)
      v->push_back(new Watchdog([](CallStop&) {}, [](CallStop&) { return false; }));
    return v;
  }();
  return *all->at(member);
}

// A job that counts its runs and outcomes, and says on which member it ran.
class CountingJob final : public Job {
 public:
  CountingJob(const CallLimits& limits, const Chooser& chooser,
              const std::vector<FakeHealth>* health = nullptr)
      : Job(limits, 0), chooser_(chooser), health_(health) {}

  std::atomic<int> runs{0}, successes{0}, failures{0};
  std::atomic<long> ran_on{-1};
  std::optional<Error> error;
  std::atomic<long> in_flight_at_report{-1};
  Event reported;

 protected:
  Value run(Interpreter*) override {
    // As Interpreter::run in an interpreter that cannot serve.
    if (health_ != nullptr && !(*health_)[index()].serving()) {
      throw Error(Code::kInterpreterBroken, "cannot run code: it was retired");
    }
    runs.fetch_add(1);
    ran_on = static_cast<long>(index());
    return Value::none();
  }
  void succeeded(Value) noexcept override {
    in_flight_at_report = static_cast<long>(chooser_.in_flight());
    successes.fetch_add(1);
    reported.set();
  }
  void failed(Error e) noexcept override {
    in_flight_at_report = static_cast<long>(chooser_.in_flight());
    error.emplace(std::move(e));
    failures.fetch_add(1);
    reported.set();
  }

 private:
  const Chooser& chooser_;
  const std::vector<FakeHealth>* health_;
};

// A pool's members without interpreters: the chooser, each member's health,
// and each member's queue, served as a lane serves its own.
struct Members {
  Members(size_t n, size_t queue_limit = 0) : chooser(4, queue_limit), health(4), queues(4) {
    for (size_t i = 0; i < 4; ++i) queues[i] = std::make_unique<WorkQueue>(/*spin=*/false);
    for (size_t i = 0; i < n; ++i) {
      chooser.add(i, /*lane=*/nullptr, &health[i]);
      chooser.set_state(i, SlotState::kUp);
    }
    chooser.set_size(n);
  }

  // Admits a job as the dispatcher does (movable when it may go anywhere)
  // and queues it for its member, as Lane::post does.
  std::shared_ptr<CountingJob> submit(int interpreter, const CallLimits& limits = {}) {
    auto job = std::make_shared<CountingJob>(limits, chooser, &health);
    job->hold(chooser.admit(interpreter), interpreter == Chooser::kAnyInterpreter);
    post(job);
    return job;
  }
  void post(std::shared_ptr<Job> job) {
    const size_t index = job->index();
    job->watch(watchdog(index), /*queued=*/true, "the interpreter");
    queues[index]->push(std::move(job));
  }

  // One turn of member `i`'s home thread (Lane::home_main): a job taken
  // while the member cannot serve moves if it can; else it runs here,
  // failing as a broken interpreter fails.
  void serve_one(size_t i) {
    std::shared_ptr<Job> job = queues[i]->pop();
    if (!health[i].serving()) {
      switch (job->move_elsewhere()) {
        case Job::Move::kMoved:
          post(std::move(job));
          return;
        case Job::Move::kDone:
          return;
        case Job::Move::kStay:
          break;
      }
    }
    if (job->claim_to_run()) job->execute(nullptr);
  }

  void retire(size_t i, const std::string& why) {
    health[i].why = why;
    health[i].serves = false;
  }

  Chooser chooser;
  std::vector<FakeHealth> health;
  std::vector<std::unique_ptr<WorkQueue>> queues;
};

// Waits until the completion thread has run what was posted to it so far.
void drain_completer() {
  Event done;
  complete_later([&done] { done.set(); });
  ASSERT_TRUE(done.wait());
}

// The probe's case (issue 36): a pool of 2, both busy, 8 calls that may go
// anywhere queued (4 on each); interpreter 0 is retired. The 4 queued on it
// move to interpreter 1 and every call succeeds there.
TEST(Move, CallsQueuedOnARetiredMemberMoveToTheOther) {
  Members m(2);
  // The calls running on each member: their tickets hold the load.
  Ticket running0 = m.chooser.admit(0), running1 = m.chooser.admit(1);
  std::vector<std::shared_ptr<CountingJob>> jobs;
  for (int k = 0; k < 8; ++k) jobs.push_back(m.submit(Chooser::kAnyInterpreter));
  EXPECT_EQ(m.chooser.load(0), 5);
  EXPECT_EQ(m.chooser.load(1), 5);
  EXPECT_EQ(m.chooser.in_flight(), 10u);

  m.retire(0, "it was retired: its clean-up was cut short");
  running0.release();  // the call that retired it ends
  for (int k = 0; k < 4; ++k) m.serve_one(0);
  // Moved, and counted once each, on member 1 now.
  EXPECT_EQ(m.chooser.load(0), 0);
  EXPECT_EQ(m.chooser.load(1), 9);
  EXPECT_EQ(m.chooser.in_flight(), 9u);
  EXPECT_EQ(m.chooser.queued(), 8u);

  running1.release();
  for (int k = 0; k < 8; ++k) m.serve_one(1);
  for (const auto& job : jobs) {
    EXPECT_EQ(job->successes, 1);
    EXPECT_EQ(job->failures, 0);
    EXPECT_EQ(job->ran_on, 1);
  }
  EXPECT_EQ(m.chooser.in_flight(), 0u);
  EXPECT_EQ(m.chooser.queued(), 0u);
}

// A call pinned to the retired member is not moved: it fails with that
// interpreter's precise status, as before.
TEST(Move, APinnedCallStaysAndFailsWithItsInterpretersStatus) {
  Members m(2);
  auto job = m.submit(0);
  m.retire(0, "it was retired");
  m.serve_one(0);
  ASSERT_TRUE(job->reported.wait());
  EXPECT_EQ(job->runs, 0);
  ASSERT_EQ(job->failures, 1);
  EXPECT_EQ(job->error->code(), Code::kInterpreterBroken);
  EXPECT_EQ(job->error->message(), "interpreter 0: cannot run code: it was retired");
  EXPECT_EQ(m.chooser.in_flight(), 0u);
}

// Work that holds no load (a lease's, a clean-up's) never moves either.
TEST(Move, WorkWithoutLoadStays) {
  Members m(2);
  CountingJob job(CallLimits{}, m.chooser);
  EXPECT_EQ(job.move_elsewhere(), Job::Move::kStay);
}

// When no member can serve, the call fails with the pool's error (what
// MANYPY_ERR_INTERPRETER_BROKEN means for an unpinned call: every
// interpreter unusable), saying why for each member, without an
// "interpreter N:" of its own; it holds no load when it reports.
TEST(Move, WithNoMemberServingTheCallFailsWithThePoolsError) {
  Members m(2);
  auto job = m.submit(Chooser::kAnyInterpreter);
  m.retire(0, "it was retired: zero");
  m.retire(1, "it was retired: one");
  m.serve_one(job->index());
  ASSERT_TRUE(job->reported.wait());
  EXPECT_EQ(job->runs, 0);
  ASSERT_EQ(job->failures, 1);
  EXPECT_EQ(job->error->code(), Code::kInterpreterBroken);
  EXPECT_EQ(job->error->message(),
            "no interpreter of this pool can serve (interpreter 0: it was retired: zero; "
            "interpreter 1: it was retired: one)");
  EXPECT_EQ(job->in_flight_at_report, 0);
  EXPECT_EQ(m.chooser.in_flight(), 0u);
}

// A member still starting takes the call when none is up (a replacement
// coming up), as admission would send it there.
TEST(Move, WithNoMemberUpTheCallGoesToOneStarting) {
  Members m(2);
  Ticket pinned = m.chooser.admit(0);
  auto moving = std::make_shared<CountingJob>(CallLimits{}, m.chooser);
  moving->hold(m.chooser.admit(0), /*movable=*/true);
  m.retire(0, "it was retired");
  m.chooser.set_state(1, SlotState::kStarting);
  EXPECT_EQ(moving->move_elsewhere(), Job::Move::kMoved);
  EXPECT_EQ(moving->index(), 1u);
  EXPECT_EQ(m.chooser.load(1), 1);
  EXPECT_EQ(m.chooser.load(0), 1);  // the pinned one's
}

// A member leaving the pool (a shrink) is passed over.
TEST(Move, AMemberLeavingThePoolIsPassedOver) {
  Members m(3);
  auto job = std::make_shared<CountingJob>(CallLimits{}, m.chooser);
  job->hold(m.chooser.admit(0), /*movable=*/true);
  m.retire(0, "it was retired");
  m.chooser.set_state(1, SlotState::kLeaving);
  EXPECT_EQ(job->move_elsewhere(), Job::Move::kMoved);
  EXPECT_EQ(job->index(), 2u);
}

// A moved call was admitted already: neither the queue limit nor a drain
// that began since refuses it (a drain finishes the calls it has).
TEST(Move, NeitherTheQueueLimitNorADrainRefusesAMove) {
  Members m(2, /*queue_limit=*/1);
  Ticket running1 = m.chooser.admit(1);
  Ticket waiting1 = m.chooser.admit(1);  // the one call that may wait
  auto job = std::make_shared<CountingJob>(CallLimits{}, m.chooser);
  job->hold(m.chooser.admit(0), /*movable=*/true);
  EXPECT_TRUE(m.chooser.at_queue_limit());
  m.chooser.drain();
  m.retire(0, "it was retired");
  EXPECT_EQ(job->move_elsewhere(), Job::Move::kMoved);
  EXPECT_EQ(job->index(), 1u);
  EXPECT_EQ(m.chooser.load(1), 3);
  EXPECT_EQ(m.chooser.in_flight(), 3u);
}

// A call whose deadline passed while it waited ends as it would have in
// the queue: with its stop's error, unrun, not moved.
TEST(Move, ACallWhoseStopCameWhileItWaitedEndsInsteadOfMoving) {
  Members m(2);
  auto token = std::make_shared<CancelToken>();
  CallLimits limits;
  limits.token = token;
  auto job = std::make_shared<CountingJob>(limits, m.chooser);
  job->hold(m.chooser.admit(0), /*movable=*/true);  // not watched: nobody saw the cancel
  token->cancel();
  m.retire(0, "it was retired");
  EXPECT_EQ(job->move_elsewhere(), Job::Move::kDone);
  ASSERT_TRUE(job->reported.wait());
  EXPECT_EQ(job->runs, 0);
  ASSERT_EQ(job->failures, 1);
  EXPECT_EQ(job->error->code(), Code::kCancelled);
  EXPECT_EQ(m.chooser.in_flight(), 0u);
}

// A stop that the watchdog completed first: the move leaves the job to the
// completion thread, and it completes exactly once.
TEST(Move, ACallTheWatchdogCompletedIsNotMoved) {
  Members m(2);
  auto token = std::make_shared<CancelToken>();
  CallLimits limits;
  limits.token = token;
  auto job = m.submit(Chooser::kAnyInterpreter, limits);
  const size_t index = job->index();
  token->cancel();
  ASSERT_TRUE(job->reported.wait());
  m.retire(index, "it was retired");
  std::shared_ptr<Job> popped = m.queues[index]->pop();
  EXPECT_EQ(popped->move_elsewhere(), Job::Move::kDone);
  drain_completer();
  EXPECT_EQ(job->runs, 0);
  EXPECT_EQ(job->failures, 1);
  EXPECT_EQ(job->successes, 0);
  EXPECT_EQ(m.chooser.in_flight(), 0u);
}

// Moves race stops: each round a call that may go anywhere is queued on a
// retired member, watched, and cancelled from another thread as its turn
// comes. Whichever wins, it completes exactly once and gives its load back.
TEST(Move, AStopRacingAMoveCompletesTheCallExactlyOnce) {
  for (int round = 0; round < 300; ++round) {
    Members m(2);
    Ticket busy1 = m.chooser.admit(1);  // so that member 0 gets the call
    auto token = std::make_shared<CancelToken>();
    CallLimits limits;
    limits.token = token;
    auto job = std::make_shared<CountingJob>(limits, m.chooser);
    job->hold(m.chooser.admit(0), /*movable=*/true);
    m.post(job);
    m.retire(0, "it was retired");
    std::thread canceller([&] {
      for (int spin = 0; spin < round % 50; ++spin) std::this_thread::yield();
      token->cancel();
    });
    m.serve_one(0);
    canceller.join();
    busy1.release();
    // Moved: member 1 runs it or finds it stopped; else it ended already.
    if (m.chooser.load(1) == 1) m.serve_one(1);
    ASSERT_TRUE(job->reported.wait()) << "round " << round;
    drain_completer();
    EXPECT_EQ(job->successes + job->failures, 1) << "round " << round;
    EXPECT_EQ(m.chooser.in_flight(), 0u) << "round " << round;
  }
}

// The pool learns of a retirement from the calls that end on the member
// (the one that retired it first), before they let go of their load: it
// replaces the member then (PoolMembers::on_retired).
TEST(Replace, ACallEndingOnARetiredMemberTellsThePool) {
  Members m(2);
  std::vector<size_t> told;
  std::vector<size_t> load_when_told;
  m.chooser.set_retire_observer([&](size_t index) {
    told.push_back(index);
    load_when_told.push_back(static_cast<size_t>(m.chooser.load(index)));
  });
  auto serving = m.submit(1);
  m.serve_one(1);
  EXPECT_TRUE(told.empty());  // member 1 serves
  auto retiring = m.submit(0);
  m.retire(0, "it was retired");
  m.serve_one(0);  // pinned: it stays, fails, and tells
  ASSERT_EQ(told, std::vector<size_t>{0});
  EXPECT_EQ(load_when_told, std::vector<size_t>{1});
  // A member that is down (failed to start) is not replaced.
  told.clear();
  m.chooser.set_state(1, SlotState::kDown);
  m.health[1].serves = false;
  m.chooser.completed_on(1);
  EXPECT_TRUE(told.empty());
}

// Without room for a replacement, the calls no member can serve say so.
TEST(Replace, TheErrorOfACallNoMemberCanServeSaysWhyNoneWasReplaced) {
  Members m(1);
  m.retire(0, "it was retired: zero");
  m.chooser.set_not_replaced("interpreter 0 was retired and could not be replaced: no room");
  try {
    m.chooser.admit(Chooser::kAnyInterpreter);
    FAIL() << "admitted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kInterpreterBroken);
    EXPECT_EQ(e.message(),
              "no interpreter of this pool can serve (interpreter 0: it was retired: zero); "
              "interpreter 0 was retired and could not be replaced: no room");
  }
  m.chooser.set_not_replaced("");
  try {
    m.chooser.admit(Chooser::kAnyInterpreter);
    FAIL() << "admitted";
  } catch (const Error& e) {
    EXPECT_EQ(e.message(),
              "no interpreter of this pool can serve (interpreter 0: it was retired: zero)");
  }
}

// A member replaced in place: its slot is live, so it is marked starting
// before its new health shows, and a call that may go anywhere does not
// take it for up (it serves only behind its bring-up).
TEST(Replace, AMemberReplacedInPlaceIsStartingNotUp) {
  Members m(1);
  m.retire(0, "it was retired");
  FakeHealth fresh;
  m.chooser.add(0, /*lane=*/nullptr, &fresh);
  EXPECT_EQ(m.chooser.state(0), SlotState::kStarting);
  EXPECT_EQ(m.chooser.starting(), 1);
  // None up: it goes to the member starting, as to any member starting.
  Ticket t = m.chooser.admit(Chooser::kAnyInterpreter);
  EXPECT_EQ(t.index(), 0u);
  m.chooser.set_state(0, SlotState::kUp);
  EXPECT_EQ(m.chooser.starting(), 0);
}

}  // namespace
}  // namespace manypy::dispatch
