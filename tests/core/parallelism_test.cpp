// No shared GIL, shown without timing thresholds: a thread that holds
// interpreter 0's GIL and will not give it up (switch interval of an hour)
// must not stop another thread from running Python to completion in
// interpreter 1. With one GIL for both, the second call could only finish
// after the first gave up, and the first gives up only when the second has
// finished: the spinner would hit its own deadline instead.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "test_support.h"

namespace manypy {
namespace {

using test::eval_int;
using test::eval_str;
using test::options;

TEST(Parallelism, NoSharedGil) {
  Pool pool(options(2));
  // Flags the spinner reads and writes through ctypes.from_address: a plain
  // memory access that, unlike a foreign call or a syscall, never releases
  // the GIL.
  alignas(8) static std::atomic<int32_t> started{0};
  alignas(8) static std::atomic<int32_t> finished{0};
  const std::string spin =
      "import ctypes, sys, time\n"
      "def spin(started_at, finished_at, deadline_s):\n"
      "    started = ctypes.c_int32.from_address(started_at)\n"
      "    finished = ctypes.c_int32.from_address(finished_at)\n"
      "    old = sys.getswitchinterval()\n"
      // Unclamped (model code gets at most 10 ms, runtime.py): with a
      // shared GIL, interpreter 1 would then wait an hour.
      "    sys.modules['_manypy_runtime']._unclamped_setswitchinterval(3600.0)\n"
      "    try:\n"
      "        started.value = 1\n"
      "        end = time.monotonic() + deadline_s\n"
      "        while finished.value == 0:\n"
      "            if time.monotonic() > end:\n"
      "                return 'deadline'\n"
      "        return 'saw the other interpreter finish'\n"
      "    finally:\n"
      "        sys.setswitchinterval(old)\n";
  pool.exec(0, spin);

  std::string spinner_result;
  std::thread spinner([&] {
    spinner_result =
        eval_str(pool, 0,
                 "spin(" + std::to_string(reinterpret_cast<uintptr_t>(&started)) + ", " +
                     std::to_string(reinterpret_cast<uintptr_t>(&finished)) + ", 60.0)");
  });
  while (started.load() == 0) std::this_thread::yield();

  // Pure Python in interpreter 1 while interpreter 0's GIL is held.
  EXPECT_EQ(eval_int(pool, 1, "sum(i * i for i in range(200000))"), 2666646666700000LL);
  finished.store(1);
  spinner.join();
  EXPECT_EQ(spinner_result, "saw the other interpreter finish");
}

// Two host threads inside one interpreter at once: torch ops release the GIL,
// so both threads run in the namespace's libc and libtorch concurrently
// (malloc, shared_ptr counts: hazard 7).
TEST(Parallelism, ManyThreadsShareOneInterpreterSafely) {
  Pool pool(options(1));
  pool.exec(0,
            "import torch\n"
            "def work(seed):\n"
            "    g = torch.Generator().manual_seed(seed)\n"
            "    a = torch.rand(64, 64, generator=g)\n"
            "    for _ in range(20):\n"
            "        a = torch.tanh(a @ a.T / 64)\n"
            "    return round(float(a.sum()), 3)\n");
  std::vector<std::string> expected;
  for (int seed = 0; seed < 4; ++seed) {
    expected.push_back(std::to_string(pool.eval(0, "work(" + std::to_string(seed) + ")").d));
  }
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < 50; ++k) {
        Value v = pool.eval(0, "work(" + std::to_string(t) + ")");
        if (std::to_string(v.d) != expected[t]) mismatches++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(Parallelism, AnyInterpreterPrefersAFreeOne) {
  Pool pool(options(2));
  pool.exec_all("import threading\ngate = threading.Event()\n");
  alignas(8) static std::atomic<int32_t> release{0};
  pool.exec_all(
      "import ctypes, time\n"
      "def hold(flag_at):\n"
      "    flag = ctypes.c_int32.from_address(flag_at)\n"
      "    while flag.value == 0:\n"
      "        time.sleep(0.001)\n"
      "    return 1\n");
  std::thread holder([&] {
    pool.eval(Pool::kAnyInterpreter,
              "hold(" + std::to_string(reinterpret_cast<uintptr_t>(&release)) + ")");
  });
  while (pool.load(0) + pool.load(1) == 0) std::this_thread::yield();
  int busy = pool.load(0) == 1 ? 0 : 1;
  // While one interpreter is held, every unpinned call lands on the other.
  pool.exec(1 - busy, "where = 'free one'");
  for (int k = 0; k < 20; ++k) {
    EXPECT_EQ(eval_str(pool, Pool::kAnyInterpreter, "globals().get('where', 'busy one')"),
              "free one");
  }
  release.store(1);
  holder.join();
}

}  // namespace
}  // namespace manypy
