// The chooser (core/src/dispatch/chooser.h): admission and the queue limit,
// which member serves a call (a free one, else the least loaded; pinned
// calls; members starting, down, retired or leaving), drain counting, and
// the error when no member can serve. Needs no interpreter: members' health
// comes from FakeHealth (the MemberHealth seam) and no lane is ever given.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "call_stop.h"
#include "dispatch/chooser.h"
#include "error.h"

namespace manypy::dispatch {
namespace {

using std::chrono::seconds;

// A member's health as the test says: serving or not, and why not. The
// hook runs inside serving(), which the chooser asks between its checks and
// its taking of load: a test uses it to change the member's state right
// there, as a concurrent resize would.
class FakeHealth final : public MemberHealth {
 public:
  bool serving() const override {
    if (on_serving) on_serving();
    return serves.load();
  }
  std::string why_not_serving() const override { return serves.load() ? "" : why; }

  std::atomic<bool> serves{true};
  std::string why;
  std::function<void()> on_serving;
};

// A chooser with `n` members, all up, of `capacity` slots.
struct Pool {
  Pool(size_t n, size_t queue_limit, size_t capacity = 8)
      : chooser(capacity, queue_limit), health(capacity) {
    for (size_t i = 0; i < n; ++i) {
      chooser.add(i, /*lane=*/nullptr, &health[i]);
      chooser.set_state(i, SlotState::kUp);
    }
    chooser.set_size(n);
  }
  // Marks member `i` down (failed to start) or retired, saying `why`.
  void fail(size_t i, SlotState state, const std::string& why) {
    health[i].serves = false;
    health[i].why = why;
    chooser.set_state(i, state);
  }

  Chooser chooser;
  std::vector<FakeHealth> health;
};

// Runs `fn`, which must throw Error, and returns it.
template <typename Fn>
Error error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no Error was thrown";
  return Error(Code::kInternal, "no Error was thrown");
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// ---- Admission and the queue limit ----

TEST(Chooser, QueueLimitRefusesTheCallPastIt) {
  Pool pool(1, /*queue_limit=*/2);
  Chooser& c = pool.chooser;
  Ticket running = c.admit(Chooser::kAnyInterpreter);
  EXPECT_EQ(c.queued(), 0u);  // it runs: it does not wait
  Ticket first = c.admit(Chooser::kAnyInterpreter);
  Ticket second = c.admit(0);  // pinned calls wait too, and count
  EXPECT_EQ(c.queued(), 2u);
  EXPECT_TRUE(c.at_queue_limit());

  for (int interpreter : {Chooser::kAnyInterpreter, 0}) {
    const Error e = error_of([&] { c.admit(interpreter); });
    EXPECT_EQ(e.code(), Code::kOverloaded);
    EXPECT_TRUE(has(e.message(), "2 calls already wait")) << e.message();
  }
  // The refusals gave back what they took.
  EXPECT_EQ(c.queued(), 2u);
  EXPECT_EQ(c.load(0), 3);
  EXPECT_EQ(c.in_flight(), 3u);

  first.release();
  EXPECT_EQ(c.queued(), 1u);
  EXPECT_FALSE(c.at_queue_limit());
  Ticket third = c.admit(Chooser::kAnyInterpreter);
  EXPECT_EQ(c.queued(), 2u);
  EXPECT_EQ(c.load(0), 3);
}

TEST(Chooser, NoQueueLimitAdmitsEveryCall) {
  Pool pool(1, /*queue_limit=*/0);
  std::vector<Ticket> tickets;
  for (int k = 0; k < 100; ++k) tickets.push_back(pool.chooser.admit(Chooser::kAnyInterpreter));
  EXPECT_EQ(pool.chooser.queued(), 99u);
  EXPECT_FALSE(pool.chooser.at_queue_limit());
}

TEST(Chooser, QueuedCountsExactlyTheCallsThatWait) {
  Pool pool(3, /*queue_limit=*/0);
  Chooser& c = pool.chooser;
  std::vector<Ticket> tickets;
  for (int k = 0; k < 3; ++k) tickets.push_back(c.admit(Chooser::kAnyInterpreter));
  EXPECT_EQ(c.queued(), 0u);  // one each: none waits
  tickets.push_back(c.admit(1));
  tickets.push_back(c.admit(1));
  tickets.push_back(c.admit(2));
  EXPECT_EQ(c.queued(), 3u);  // sum over members of (load - 1)
  EXPECT_EQ(c.load(0), 1);
  EXPECT_EQ(c.load(1), 3);
  EXPECT_EQ(c.load(2), 2);
  EXPECT_EQ(c.in_flight(), 6u);
  // Releasing a member's only call frees it, and changes no wait.
  for (Ticket& t : tickets) {
    if (t.index() == 0) t.release();
  }
  EXPECT_EQ(c.queued(), 3u);
  EXPECT_EQ(c.in_flight(), 5u);
  tickets.clear();
  EXPECT_EQ(c.queued(), 0u);
  EXPECT_EQ(c.in_flight(), 0u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(c.load(i), 0);
}

TEST(Chooser, ATicketGivesItsLoadBackOnce) {
  Pool pool(1, 0);
  Chooser& c = pool.chooser;
  {
    Ticket a = c.admit(0);
    EXPECT_TRUE(a.held());
    EXPECT_EQ(a.chooser(), &c);
    Ticket b = std::move(a);  // moves the unit, does not copy it
    EXPECT_FALSE(a.held());
    EXPECT_TRUE(b.held());
    EXPECT_EQ(c.load(0), 1);
    b.release();
    b.release();  // harmless
    EXPECT_FALSE(b.held());
    EXPECT_EQ(c.load(0), 0);
    EXPECT_EQ(c.in_flight(), 0u);

    Ticket d = c.admit(0);
    Ticket e = c.admit(0);
    d = std::move(e);  // d's own unit goes back as it takes e's
    EXPECT_EQ(c.load(0), 1);
    EXPECT_EQ(c.queued(), 0u);
  }  // the destructor releases the last one
  EXPECT_EQ(c.load(0), 0);
  EXPECT_EQ(c.in_flight(), 0u);
}

// Several threads admit and release in every order, some refused at the
// queue limit: afterwards every count is back at zero, and the limit
// holds as before.
TEST(Chooser, NoDriftAfterManyInterleavedTakesAndReleases) {
  constexpr size_t kLimit = 1;
  Pool pool(3, kLimit);
  Chooser& c = pool.chooser;
  constexpr int kThreads = 4;
  constexpr int kRounds = 20000;
  std::atomic<int> ready{0};
  std::atomic<long> admitted{0}, refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(1234 + t);
      std::vector<Ticket> held;
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      for (int k = 0; k < kRounds; ++k) {
        const unsigned r = rng();
        if (held.size() < 4 && (r & 1)) {
          const int where = (r >> 1) % 4 == 3 ? Chooser::kAnyInterpreter : int((r >> 1) % 4);
          try {
            held.push_back(c.admit(where));
            admitted.fetch_add(1);
          } catch (const Error& e) {
            EXPECT_EQ(e.code(), Code::kOverloaded);
            refused.fetch_add(1);
          }
        } else if (!held.empty()) {
          // Release any of them, not only the last taken.
          const size_t victim = (r >> 3) % held.size();
          held.erase(held.begin() + victim);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_GT(admitted.load(), 0);
  // One thread alone refuses a third call pinned to one member.
  EXPECT_GT(refused.load(), 0);
  EXPECT_EQ(c.in_flight(), 0u);
  EXPECT_EQ(c.queued(), 0u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(c.load(i), 0) << "member " << i;
  EXPECT_TRUE(c.wait_idle(monotonic_ns()));  // idle: true even at a passed deadline
  // And the limit still works as before.
  std::vector<Ticket> tickets;
  for (size_t k = 0; k < 3 + kLimit; ++k) tickets.push_back(c.admit(Chooser::kAnyInterpreter));
  EXPECT_EQ(error_of([&] { c.admit(Chooser::kAnyInterpreter); }).code(), Code::kOverloaded);
}

// ---- Which member serves ----

TEST(Chooser, AFreeMemberIsTakenFirst) {
  Pool pool(3, 0);
  Chooser& c = pool.chooser;
  std::vector<Ticket> tickets;
  std::set<size_t> taken;
  for (int k = 0; k < 3; ++k) {
    tickets.push_back(c.admit(Chooser::kAnyInterpreter));
    taken.insert(tickets.back().index());
  }
  EXPECT_EQ(taken, (std::set<size_t>{0, 1, 2}));
  // Whichever member frees up is the one the next calls take, wherever the
  // rotating scan starts.
  for (size_t free_one : {1, 0, 2, 1}) {
    for (Ticket& t : tickets) {
      if (t.index() == free_one) t.release();
    }
    tickets.erase(
        std::remove_if(tickets.begin(), tickets.end(), [](const Ticket& t) { return !t.held(); }),
        tickets.end());
    tickets.push_back(c.admit(Chooser::kAnyInterpreter));
    EXPECT_EQ(tickets.back().index(), free_one);
    EXPECT_EQ(c.queued(), 0u);
  }
}

TEST(Chooser, OtherwiseTheLeastLoaded) {
  Pool pool(3, 0);
  Chooser& c = pool.chooser;
  std::vector<Ticket> tickets;
  for (int k = 0; k < 3; ++k) tickets.push_back(c.admit(0));
  tickets.push_back(c.admit(1));
  for (int k = 0; k < 2; ++k) tickets.push_back(c.admit(2));
  // Loads 3, 1, 2: the call goes to 1, making it 3, 2, 2; then 1 and 2
  // share the least, and the next two go one to each.
  tickets.push_back(c.admit(Chooser::kAnyInterpreter));
  EXPECT_EQ(tickets.back().index(), 1u);
  tickets.push_back(c.admit(Chooser::kAnyInterpreter));
  tickets.push_back(c.admit(Chooser::kAnyInterpreter));
  EXPECT_EQ(c.load(0), 3);
  EXPECT_EQ(c.load(1), 3);
  EXPECT_EQ(c.load(2), 3);
  EXPECT_EQ(c.queued(), 6u);
}

TEST(Chooser, MembersNotUpAreSkipped) {
  Pool pool(5, 0);
  Chooser& c = pool.chooser;
  pool.fail(0, SlotState::kDown, "it failed to start");
  pool.fail(1, SlotState::kUp, "it was retired");  // up, but its interpreter does not serve
  c.set_state(3, SlotState::kLeaving);
  pool.fail(4, SlotState::kDown, "also failed");
  std::vector<Ticket> tickets;
  // The rotating scan starts at every member in turn; each call still
  // lands on 2, the only one that serves, free or busy.
  for (int k = 0; k < 10; ++k) {
    tickets.push_back(c.admit(Chooser::kAnyInterpreter));
    EXPECT_EQ(tickets.back().index(), 2u);
  }
  EXPECT_EQ(c.load(2), 10);
  EXPECT_EQ(c.queued(), 9u);
}

TEST(Chooser, APinnedCallGoesToItsMemberEvenWhenOthersAreFree) {
  Pool pool(3, 0);
  Chooser& c = pool.chooser;
  Ticket first = c.admit(2);
  EXPECT_EQ(first.index(), 2u);
  EXPECT_EQ(c.queued(), 0u);
  Ticket second = c.admit(2);  // waits behind the first, though 0 and 1 are free
  EXPECT_EQ(second.index(), 2u);
  EXPECT_EQ(c.queued(), 1u);
  EXPECT_EQ(c.load(0), 0);
  EXPECT_EQ(c.load(1), 0);
}

TEST(Chooser, APinnedIndexOutsideThePoolIsOutOfRange) {
  Pool pool(3, 0, /*capacity=*/8);  // slots past size() are not members
  Chooser& c = pool.chooser;
  for (int index : {3, 7, 8, 1000, -2}) {
    const Error e = error_of([&] { c.admit(index); });
    EXPECT_EQ(e.code(), Code::kOutOfRange) << index;
    EXPECT_TRUE(has(e.message(), "interpreter index " + std::to_string(index) +
                                     " is out of range: the pool has 3 (valid: 0..2"))
        << e.message();
    EXPECT_EQ(error_of([&] { c.check_index(index); }).code(), Code::kOutOfRange);
  }
  EXPECT_NO_THROW(c.check_index(2));
  EXPECT_EQ(c.in_flight(), 0u);
}

TEST(Chooser, APinnedCallToAMemberThatCannotServeIsRefused) {
  Pool pool(3, 0);
  Chooser& c = pool.chooser;
  pool.fail(1, SlotState::kDown, "failed to start: no torch");
  pool.fail(2, SlotState::kUp, "it was retired: a stop's clean-up was cut short");
  Error e = error_of([&] { c.admit(1); });
  EXPECT_EQ(e.code(), Code::kInterpreterBroken);
  EXPECT_EQ(e.message(), "interpreter 1: cannot run code: failed to start: no torch");
  e = error_of([&] { c.admit(2); });
  EXPECT_EQ(e.code(), Code::kInterpreterBroken);
  EXPECT_EQ(e.message(),
            "interpreter 2: cannot run code: it was retired: a stop's clean-up was cut short");
  EXPECT_EQ(c.in_flight(), 0u);
  EXPECT_EQ(c.admit(0).index(), 0u);
}

TEST(Chooser, AStartingMemberTakesCallsOnlyWhenNoneIsUp) {
  Pool pool(3, 0);
  Chooser& c = pool.chooser;
  // 0 and 1 start in the background (their interpreters do not serve yet).
  for (size_t i : {0, 1}) {
    pool.health[i].serves = false;
    pool.health[i].why = "it is starting";
    c.set_state(i, SlotState::kStarting);
  }
  EXPECT_EQ(c.starting(), 2);
  std::vector<Ticket> tickets;
  for (int k = 0; k < 4; ++k) {
    tickets.push_back(c.admit(Chooser::kAnyInterpreter));
    EXPECT_EQ(tickets.back().index(), 2u);  // busy or not, the one up
  }
  // A call pinned to a starting member queues behind its start.
  tickets.push_back(c.admit(0));
  EXPECT_EQ(tickets.back().index(), 0u);
  tickets.clear();

  // None up: calls go to the least loaded of those starting.
  pool.fail(2, SlotState::kDown, "failed");
  Ticket pinned = c.admit(0);
  Ticket pinned_too = c.admit(0);
  for (int k = 0; k < 2; ++k) {
    tickets.push_back(c.admit(Chooser::kAnyInterpreter));
    EXPECT_EQ(tickets.back().index(), 1u);
  }
  EXPECT_EQ(c.load(0), 2);
  EXPECT_EQ(c.load(1), 2);
  EXPECT_EQ(c.load(2), 0);

  // Counting starting members: only real transitions count.
  c.set_state(0, SlotState::kStarting);
  EXPECT_EQ(c.starting(), 2);
  c.set_state(0, SlotState::kUp);
  EXPECT_EQ(c.starting(), 1);
  c.set_state(1, SlotState::kDown);
  EXPECT_EQ(c.starting(), 0);
}

TEST(Chooser, ALeavingMemberRefusesPinnedCalls) {
  Pool pool(3, 0);
  Chooser& c = pool.chooser;
  // A shrink marks the member leaving before it lowers size(): a call
  // pinned to it in between is refused as out of range, as it is after.
  c.set_state(2, SlotState::kLeaving);
  Error e = error_of([&] { c.admit(2); });
  EXPECT_EQ(e.code(), Code::kOutOfRange);
  EXPECT_TRUE(has(e.message(), "interpreter 2 left the pool")) << e.message();
  c.set_size(2);
  e = error_of([&] { c.admit(2); });
  EXPECT_EQ(e.code(), Code::kOutOfRange);
  EXPECT_EQ(c.in_flight(), 0u);
  EXPECT_EQ(c.load(2), 0);
}

// The member leaves (or leaves and is gone, its interpreter given back)
// after the chooser found it serving and before it took the call's load:
// the call is refused, and gives the load back.
TEST(Chooser, AMemberThatLeavesAsTheCallIsAdmittedRefusesIt) {
  for (const bool gone : {false, true}) {
    for (const int where : {1, Chooser::kAnyInterpreter}) {
      SCOPED_TRACE(std::string(gone ? "gone" : "leaving") + ", " + (where == 1 ? "pinned" : "any"));
      Pool pool(2, 0);
      Chooser& c = pool.chooser;
      pool.fail(0, SlotState::kDown, "failed");  // so that `any` must pick 1
      bool left = false;
      pool.health[1].on_serving = [&] {
        if (left) return;
        left = true;
        c.set_state(1, SlotState::kLeaving);
        c.set_size(1);
        // The shrink finds no load on it, gives it back, and empties it.
        if (gone) c.set_state(1, SlotState::kAbsent);
      };
      const Error e = error_of([&] { c.admit(where); });
      EXPECT_TRUE(left);
      EXPECT_EQ(e.code(), Code::kOutOfRange);
      EXPECT_TRUE(has(e.message(), "interpreter 1 left the pool")) << e.message();
      EXPECT_EQ(c.load(1), 0);
      EXPECT_EQ(c.in_flight(), 0u);
    }
  }
}

TEST(Chooser, AShrinkWaitsForTheCallsOfALeavingMember) {
  Pool pool(2, 0);
  Chooser& c = pool.chooser;
  Ticket a = c.admit(1);
  Ticket b = c.admit(1);
  c.set_state(1, SlotState::kLeaving);
  c.set_size(1);
  auto shrink = std::async(std::launch::async, [&] { c.wait_slot_idle(1); });
  a.release();
  // One call is still on it.
  EXPECT_EQ(shrink.wait_for(std::chrono::milliseconds(20)), std::future_status::timeout);
  b.release();
  ASSERT_EQ(shrink.wait_for(seconds(10)), std::future_status::ready);
  EXPECT_EQ(c.load(1), 0);
}

// ---- Draining ----

TEST(Chooser, DrainReturnsTheCallsInFlightAndRefusesNewOnes) {
  Pool pool(2, 0);
  Chooser& c = pool.chooser;
  std::vector<Ticket> tickets;
  for (int k = 0; k < 3; ++k) tickets.push_back(c.admit(Chooser::kAnyInterpreter));
  EXPECT_FALSE(c.draining());
  EXPECT_EQ(c.drain(), 3u);
  EXPECT_TRUE(c.draining());
  for (int where : {Chooser::kAnyInterpreter, 0, 1}) {
    const Error e = error_of([&] { c.admit(where); });
    EXPECT_EQ(e.code(), Code::kDraining);
    EXPECT_TRUE(has(e.message(), "manypy_pool_drain")) << e.message();
  }
  EXPECT_EQ(c.in_flight(), 3u);  // the refusals took nothing
  EXPECT_EQ(c.queued(), 1u);
  tickets.pop_back();
  EXPECT_EQ(c.drain(), 2u);  // a second drain counts what is left
}

TEST(Chooser, WaitIdleWithoutADeadlineWaitsForTheLastCall) {
  Pool pool(2, 0);
  Chooser& c = pool.chooser;
  EXPECT_TRUE(c.wait_idle());  // nothing in flight: at once
  Ticket a = c.admit(0);
  Ticket b = c.admit(1);
  c.drain();
  auto idle = std::async(std::launch::async, [&] { return c.wait_idle(); });
  a.release();
  EXPECT_EQ(idle.wait_for(std::chrono::milliseconds(20)), std::future_status::timeout);
  b.release();
  ASSERT_EQ(idle.wait_for(seconds(10)), std::future_status::ready);
  EXPECT_TRUE(idle.get());
}

TEST(Chooser, WaitIdleWithADeadline) {
  Pool pool(1, 0);
  Chooser& c = pool.chooser;
  EXPECT_TRUE(c.wait_idle(monotonic_ns() - 1000));  // idle: true, deadline or not
  Ticket a = c.admit(0);
  EXPECT_FALSE(c.wait_idle(monotonic_ns() - 1000));  // passed: at once
  const int64_t deadline = monotonic_ns() + 20 * 1000 * 1000;
  EXPECT_FALSE(c.wait_idle(deadline));
  EXPECT_GE(monotonic_ns(), deadline);  // it waited until then, not less
  // A far deadline: true as soon as the call completes.
  auto idle = std::async(std::launch::async,
                         [&] { return c.wait_idle(monotonic_ns() + 60LL * 1000 * 1000 * 1000); });
  a.release();
  ASSERT_EQ(idle.wait_for(seconds(10)), std::future_status::ready);
  EXPECT_TRUE(idle.get());
}

TEST(Chooser, CountsDrainCancelledCalls) {
  Pool pool(1, 0);
  EXPECT_EQ(pool.chooser.drain_cancelled(), 0u);
  pool.chooser.count_drain_cancelled();
  pool.chooser.count_drain_cancelled();
  EXPECT_EQ(pool.chooser.drain_cancelled(), 2u);
}

// ---- None can serve ----

TEST(Chooser, WhenNoMemberCanServeTheErrorNamesEach) {
  Pool pool(3, 0);
  Chooser& c = pool.chooser;
  pool.fail(0, SlotState::kDown, "failed to start: out of static TLS");
  pool.fail(1, SlotState::kUp, "it was retired: cut short");
  pool.fail(2, SlotState::kDown, "failed to start: no torch");
  const Error e = error_of([&] { c.admit(Chooser::kAnyInterpreter); });
  EXPECT_EQ(e.code(), Code::kInterpreterBroken);
  EXPECT_EQ(e.message(),
            "no interpreter of this pool can serve (interpreter 0: failed to start: out of "
            "static TLS; interpreter 1: it was retired: cut short; interpreter 2: failed to "
            "start: no torch)");
  EXPECT_EQ(c.in_flight(), 0u);
  EXPECT_EQ(c.queued(), 0u);
}

TEST(Chooser, TheWaitObserverHearsLongWaits) {
  Pool pool(1, 0);
  std::vector<int64_t> heard;
  pool.chooser.waited(5);  // no observer: nothing happens
  pool.chooser.set_wait_observer([&](int64_t ns) { heard.push_back(ns); });
  pool.chooser.waited(42);
  EXPECT_EQ(heard, std::vector<int64_t>{42});
}

}  // namespace
}  // namespace manypy::dispatch
