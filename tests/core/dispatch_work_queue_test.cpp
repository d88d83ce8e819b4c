// The work queue in front of a lane's home thread and the host workers
// (core/src/dispatch/work_queue.h): first in, first out with one producer
// and with several, and pop() waits for a push, whether its consumer spins
// before it sleeps or not. Needs no interpreter: the jobs are never run.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "dispatch/work_queue.h"

namespace manypy::dispatch {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A job that only says who pushed it and in what order.
class TaggedJob final : public Job {
 public:
  TaggedJob(int producer, int seq) : Job(CallLimits{}, 0), producer(producer), seq(seq) {}
  const int producer, seq;

 protected:
  Value run(Interpreter*) override { return Value::none(); }
  void succeeded(Value) noexcept override {}
  void failed(Error) noexcept override {}
};

int producer_of(const std::shared_ptr<Job>& job) { return static_cast<TaggedJob&>(*job).producer; }
int seq_of(const std::shared_ptr<Job>& job) { return static_cast<TaggedJob&>(*job).seq; }

// Each test runs with the consumer spinning before it sleeps, and without.
class WorkQueueTest : public ::testing::TestWithParam<bool> {};

TEST_P(WorkQueueTest, IsFirstInFirstOut) {
  WorkQueue queue(GetParam());
  for (int k = 0; k < 1000; ++k) queue.push(std::make_shared<TaggedJob>(0, k));
  for (int k = 0; k < 1000; ++k) ASSERT_EQ(seq_of(queue.pop()), k);
  // Interleaved pushes and pops keep the order too.
  int next_in = 0, next_out = 0;
  for (int round = 0; round < 100; ++round) {
    for (int k = 0; k < round % 7 + 1; ++k) queue.push(std::make_shared<TaggedJob>(0, next_in++));
    for (int k = 0; k < round % 5 + 1 && next_out < next_in; ++k) {
      ASSERT_EQ(seq_of(queue.pop()), next_out++);
    }
  }
  while (next_out < next_in) ASSERT_EQ(seq_of(queue.pop()), next_out++);
}

// One consumer, several producers: every job arrives once, and each
// producer's jobs arrive in the order it pushed them.
TEST_P(WorkQueueTest, KeepsEachProducersOrder) {
  WorkQueue queue(GetParam());
  constexpr int kProducers = 4;
  constexpr int kEach = 5000;
  std::atomic<int> ready{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      ready.fetch_add(1);
      while (ready.load() < kProducers) std::this_thread::yield();
      for (int k = 0; k < kEach; ++k) queue.push(std::make_shared<TaggedJob>(p, k));
    });
  }
  std::vector<int> next(kProducers, 0);
  for (int k = 0; k < kProducers * kEach; ++k) {
    std::shared_ptr<Job> job = queue.pop();
    const int p = producer_of(job);
    ASSERT_GE(p, 0);
    ASSERT_LT(p, kProducers);
    ASSERT_EQ(seq_of(job), next[p]) << "producer " << p;
    ++next[p];
  }
  for (std::thread& t : producers) t.join();
  for (int p = 0; p < kProducers; ++p) EXPECT_EQ(next[p], kEach);
}

// pop() on an empty queue returns only after a push, with that job, however
// long the consumer has waited (past its spin: asleep).
TEST_P(WorkQueueTest, PopWaitsForAPush) {
  WorkQueue queue(GetParam());
  auto popped = std::async(std::launch::async, [&] { return seq_of(queue.pop()); });
  // Nothing to pop: it cannot have returned, whatever the machine's load.
  EXPECT_EQ(popped.wait_for(milliseconds(20)), std::future_status::timeout);
  queue.push(std::make_shared<TaggedJob>(0, 42));
  ASSERT_EQ(popped.wait_for(seconds(10)), std::future_status::ready);
  EXPECT_EQ(popped.get(), 42);
}

// Several consumers asleep: each push wakes one, and none is left asleep
// with a job in the queue.
TEST_P(WorkQueueTest, EachPushWakesAWaitingConsumer) {
  WorkQueue queue(GetParam());
  constexpr int kConsumers = 3;
  std::vector<std::future<int>> popped;
  for (int k = 0; k < kConsumers; ++k) {
    popped.push_back(std::async(std::launch::async, [&] { return seq_of(queue.pop()); }));
  }
  EXPECT_EQ(popped[0].wait_for(milliseconds(20)), std::future_status::timeout);
  for (int k = 0; k < kConsumers; ++k) queue.push(std::make_shared<TaggedJob>(0, k));
  bool all_woke = true;
  for (auto& f : popped)
    all_woke = all_woke && f.wait_for(seconds(10)) == std::future_status::ready;
  if (!all_woke) {
    // Let the consumer that missed its wake-up go, so that the test fails
    // instead of hanging in the futures' destructors.
    for (int k = 0; k < kConsumers; ++k) queue.push(std::make_shared<TaggedJob>(0, 100));
  }
  ASSERT_TRUE(all_woke);
  int sum = 0;
  for (auto& f : popped) sum += f.get();
  EXPECT_EQ(sum, 0 + 1 + 2);  // each job popped once
}

INSTANTIATE_TEST_SUITE_P(Spin, WorkQueueTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Spinning" : "NotSpinning";
                         });

}  // namespace
}  // namespace manypy::dispatch
