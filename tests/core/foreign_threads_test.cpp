// Calls from threads manypy did not create, and what such threads leave
// behind when they exit (docs/threads.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

#include "test_support.h"

namespace manypy {
namespace {

using test::eval_int;
using test::options;
using test::private_bytes;

constexpr const char* kSmallTorchCall = "int(torch.ones(4, 4).add(1).sum().item())";

// Runs `threads` short-lived threads, `concurrent` at a time, each making one
// call, and returns how many got the right answer.
int churn(Pool& pool, int threads, int concurrent) {
  std::atomic<int> ok{0};
  for (int done = 0; done < threads; done += concurrent) {
    std::vector<std::thread> batch;
    for (int k = 0; k < concurrent && done + k < threads; ++k) {
      batch.emplace_back([&] {
        try {
          if (eval_int(pool, Pool::kAnyInterpreter, kSmallTorchCall) == 32) ok++;
        } catch (const std::exception& e) {
          std::fprintf(stderr, "call failed: %s\n", e.what());
        }
      });
    }
    for (auto& t : batch) t.join();
  }
  return ok.load();
}

TEST(ForeignThreads, AThousandShortLivedThreadsEachMakeACall) {
  Pool pool(options(2));
  pool.exec_all("import torch");
  EXPECT_EQ(churn(pool, 1000, 4), 1000);
  // The interpreters still serve, and hold no thread state per dead thread.
  EXPECT_EQ(eval_int(pool, 0, "len(__import__('sys')._current_frames())"), 1);
}

// Memory per exited thread, after a warm-up that fills the allocators' free
// lists. Measured over two batches and the smaller kept: a leak per thread
// shows in both, a one-time growth of some heap (seen: about 1.3 MB once,
// while other processes ran) in only one. Reported, and bounded only in the
// mode that promises flat memory.
double bytes_per_thread(Pool& pool, int threads) {
  churn(pool, 200, 2);
  double least = 1e300;
  for (int batch = 0; batch < 2; ++batch) {
    size_t before = private_bytes();
    EXPECT_EQ(churn(pool, threads / 2, 2), threads / 2);
    size_t after = private_bytes();
    least = std::min(least, after > before ? double(after - before) / (threads / 2) : 0.0);
  }
  return least;
}

TEST(ForeignThreads, HandoffModeKeepsMemoryFlatUnderThreadChurn) {
  Pool pool(options(1, ThreadMode::kHandoff));
  pool.exec_all("import torch");
  double per_thread = bytes_per_thread(pool, 2000);
  std::printf("handoff mode: %.0f bytes of private memory per exited thread\n", per_thread);
  // No host thread ever enters the namespace, so nothing is left per thread;
  // the bound only absorbs allocator noise (2000 threads x 256 B = 512 KB).
  EXPECT_LT(per_thread, 256.0);
}

TEST(ForeignThreads, DirectModeCostPerExitedThreadIsMeasured) {
  Pool pool(options(1, ThreadMode::kDirect));
  pool.exec_all("import torch");
  double per_thread = bytes_per_thread(pool, 2000);
  std::printf("direct mode: %.0f bytes of private memory per exited thread\n", per_thread);
  // docs/threads.md records the measured figure; this bound catches a return
  // of the 32 KB per thread that hazard 10 measured before thread clean-up.
  EXPECT_LT(per_thread, 8192.0);
}

}  // namespace
}  // namespace manypy
