// The per-namespace pthread key space (core/interp/key_space.h), tested in a
// plain process: it is the same code that serves every library inside a
// namespace, where key_interpose.c binds pthread_key_create and friends to
// it. What runs inside real namespaces is tested by capi_key_space.
#include "key_space.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <set>
#include <thread>
#include <vector>

namespace {

unsigned create(void (*destructor)(void*) = nullptr) {
  unsigned key = 0;
  EXPECT_EQ(mpk_key_create(&key, destructor), 0);
  return key;
}

void* as_value(uintptr_t v) { return reinterpret_cast<void*>(v); }

TEST(KeySpace, ValuesArePerThreadAndPerKey) {
  unsigned a = create(), b = create();
  EXPECT_NE(a, b);
  EXPECT_EQ(mpk_getspecific(a), nullptr);
  ASSERT_EQ(mpk_setspecific(a, as_value(1)), 0);
  ASSERT_EQ(mpk_setspecific(b, as_value(2)), 0);
  EXPECT_EQ(mpk_getspecific(a), as_value(1));
  EXPECT_EQ(mpk_getspecific(b), as_value(2));
  std::thread([&] {
    EXPECT_EQ(mpk_getspecific(a), nullptr);
    ASSERT_EQ(mpk_setspecific(a, as_value(3)), 0);
    EXPECT_EQ(mpk_getspecific(a), as_value(3));
  }).join();
  EXPECT_EQ(mpk_getspecific(a), as_value(1));
  EXPECT_EQ(mpk_key_delete(a), 0);
  EXPECT_EQ(mpk_key_delete(b), 0);
}

TEST(KeySpace, BadKeysAreRefused) {
  EXPECT_EQ(mpk_key_delete(MPK_KEYS_MAX), EINVAL);
  EXPECT_EQ(mpk_setspecific(MPK_KEYS_MAX, as_value(1)), EINVAL);
  EXPECT_EQ(mpk_getspecific(MPK_KEYS_MAX), nullptr);
  unsigned k = create();
  ASSERT_EQ(mpk_key_delete(k), 0);
  EXPECT_EQ(mpk_key_delete(k), EINVAL) << "deleted twice";
  EXPECT_EQ(mpk_setspecific(k, as_value(1)), EINVAL) << "set on a deleted key";
}

TEST(KeySpace, ARecreatedKeyDoesNotSeeTheOldValue) {
  unsigned k = create();
  ASSERT_EQ(mpk_setspecific(k, as_value(7)), 0);
  ASSERT_EQ(mpk_key_delete(k), 0);
  EXPECT_EQ(mpk_getspecific(k), nullptr);
  unsigned again = create();
  ASSERT_EQ(again, k) << "the lowest free key is reused";
  EXPECT_EQ(mpk_getspecific(again), nullptr);
  ASSERT_EQ(mpk_key_delete(again), 0);
}

TEST(KeySpace, AllKeysCanBeUsedAndThenItSaysEagain) {
  std::vector<unsigned> keys;
  unsigned key = 0;
  while (mpk_key_create(&key, nullptr) == 0) keys.push_back(key);
  EXPECT_EQ(mpk_key_create(&key, nullptr), EAGAIN);
  EXPECT_EQ(mpk_keys_in_use(), MPK_KEYS_MAX);
  // The highest key works like any other.
  ASSERT_EQ(mpk_setspecific(keys.back(), as_value(9)), 0);
  EXPECT_EQ(mpk_getspecific(keys.back()), as_value(9));
  ASSERT_EQ(mpk_key_delete(keys[5]), 0);
  EXPECT_EQ(mpk_key_create(&key, nullptr), 0);
  EXPECT_EQ(key, keys[5]);
  for (unsigned k : keys) EXPECT_EQ(mpk_key_delete(k), 0);
  EXPECT_EQ(mpk_keys_in_use(), 0u);
}

std::atomic<int> g_destroyed{0};
unsigned g_key_a, g_key_b;

TEST(KeySpace, DestructorsRunAtThreadExitWithTheValue) {
  static std::atomic<uintptr_t> seen{0};
  unsigned k = create([](void* v) { seen = reinterpret_cast<uintptr_t>(v); });
  std::thread([&] { ASSERT_EQ(mpk_setspecific(k, as_value(42)), 0); }).join();
  EXPECT_EQ(seen.load(), 42u);
  seen = 0;
  // A value set back to NULL has nothing to destroy.
  std::thread([&] {
    ASSERT_EQ(mpk_setspecific(k, as_value(43)), 0);
    ASSERT_EQ(mpk_setspecific(k, nullptr), 0);
  }).join();
  EXPECT_EQ(seen.load(), 0u);
  // Nor has a value of a key deleted before the thread ends.
  std::thread([&] {
    ASSERT_EQ(mpk_setspecific(k, as_value(44)), 0);
    ASSERT_EQ(mpk_key_delete(k), 0);
  }).join();
  EXPECT_EQ(seen.load(), 0u);
}

TEST(KeySpace, DestructorsThatSetKeysAgainRunAgainBoundedly) {
  g_destroyed = 0;
  // Each run sets the key again: it runs once per round, and rounds stop.
  g_key_a = create([](void* v) {
    ++g_destroyed;
    EXPECT_EQ(mpk_setspecific(g_key_a, v), 0);
  });
  std::thread([] { ASSERT_EQ(mpk_setspecific(g_key_a, as_value(1)), 0); }).join();
  EXPECT_EQ(g_destroyed.load(), MPK_DESTRUCTOR_ITERATIONS);
  ASSERT_EQ(mpk_key_delete(g_key_a), 0);

  // A destructor that reads a key already destroyed in its round sees NULL;
  // if it sets that key again, the next round destroys the new value too.
  static std::atomic<uintptr_t> b_seen_from_a{0};
  static std::atomic<int> b_runs{0};
  g_key_b = create([](void*) { ++b_runs; });
  g_key_a = create([](void*) {
    b_seen_from_a = reinterpret_cast<uintptr_t>(mpk_getspecific(g_key_b));
    EXPECT_EQ(mpk_setspecific(g_key_b, as_value(6)), 0);
  });
  std::thread([] {
    ASSERT_EQ(mpk_setspecific(g_key_b, as_value(5)), 0);
    ASSERT_EQ(mpk_setspecific(g_key_a, as_value(1)), 0);
  }).join();
  // Key b comes first in the round: a then sees it gone and sets it again,
  // and the next round destroys that value too.
  EXPECT_EQ(b_seen_from_a.load(), 0u);
  EXPECT_EQ(b_runs.load(), 2);
  ASSERT_EQ(mpk_key_delete(g_key_a), 0);
  ASSERT_EQ(mpk_key_delete(g_key_b), 0);
}

TEST(KeySpace, ThreadsThatMakeAndDeleteKeysNeverSeeEachOthersValues) {
  constexpr int kThreads = 8, kRounds = 3000;
  std::atomic<int> wrong{0}, destroyed{0};
  static std::atomic<int>* destroyed_counter;
  destroyed_counter = &destroyed;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        unsigned k = 0;
        if (mpk_key_create(&k, [](void*) { ++*destroyed_counter; }) != 0) {
          ++wrong;
          continue;
        }
        // A fresh key reads NULL even though another thread may just have
        // deleted the same number with a value set.
        if (mpk_getspecific(k) != nullptr) ++wrong;
        const uintptr_t mine = (uintptr_t(t) << 32) | uintptr_t(r + 1);
        if (mpk_setspecific(k, as_value(mine)) != 0) ++wrong;
        if (mpk_getspecific(k) != as_value(mine)) ++wrong;
        // Every few rounds, leave the value set for a thread that exits.
        if (r % 97 == 0) {
          std::thread([k] { mpk_setspecific(k, as_value(1)); }).join();
        }
        if (mpk_key_delete(k) != 0) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  // The short-lived threads' values met their destructor unless the key had
  // been deleted first, which never happens here before the join.
  EXPECT_EQ(destroyed.load(), kThreads * ((kRounds + 96) / 97));
  EXPECT_EQ(mpk_keys_in_use(), 0u);
}

}  // namespace
