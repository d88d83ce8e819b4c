// Values as the core holds them: freeing never recurses, dict keys are
// indexed, borrowed items never move.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "value.h"

namespace manypy {
namespace {

// The C API refuses to nest more than Value::kMaxDepth containers, but the
// destructor must not depend on that: a chain a million deep frees with a
// loop, not a million stack frames.
TEST(Value, FreesAChainAMillionDeepWithoutRecursion) {
  Value root = Value::container(ValueKind::kList);
  Value* tip = &root;
  for (int k = 0; k < 1000000; ++k) tip = &tip->append(Value::container(ValueKind::kList));
  tip->append(Value::of_int(7));
}

TEST(Value, DictOfAMillionKeys) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  Value dict = Value::container(ValueKind::kDict);
  for (int k = 0; k < 1000000; ++k) dict.put("key" + std::to_string(k), Value::of_int(k));
  dict.put("key500000", Value::of_int(-1));  // replaces, in place
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("1,000,000 dict keys set in %.2f s\n", seconds);
  ASSERT_EQ(dict.keys.size(), 1000000u);
  EXPECT_EQ(dict.find_key("key0"), 0);
  EXPECT_EQ(dict.find_key("key999999"), 999999);
  EXPECT_EQ(dict.find_key("nope"), -1);
  EXPECT_EQ(dict.items[500000].i, -1);
  EXPECT_EQ(dict.keys[500000], "key500000");
}

TEST(Value, SmallDictsAndKeysWithNul) {
  Value dict = Value::container(ValueKind::kDict);
  dict.put(std::string("a\0b", 3), Value::of_int(1));
  dict.put("a", Value::of_int(2));
  EXPECT_EQ(dict.find_key(std::string_view("a\0b", 3)), 0);
  EXPECT_EQ(dict.find_key("a"), 1);
  for (int k = 0; k < 40; ++k) dict.put("k" + std::to_string(k), Value::of_int(k));  // indexed now
  EXPECT_EQ(dict.find_key(std::string_view("a\0b", 3)), 0);
  EXPECT_EQ(dict.find_key("k39"), 41);
}

TEST(Value, DepthIsKept) {
  Value inner = Value::container(ValueKind::kList);
  inner.append(Value::of_int(1));
  EXPECT_EQ(inner.depth, 1u);
  Value outer = Value::container(ValueKind::kTuple);
  outer.append(Value::of_int(0));
  outer.append(std::move(inner));
  EXPECT_EQ(outer.depth, 2u);
  Value dict = Value::container(ValueKind::kDict);
  dict.put("x", std::move(outer));
  EXPECT_EQ(dict.depth, 3u);
  EXPECT_EQ(Value::of_int(3).depth, 0u);
}

TEST(Value, BorrowedItemsNeverMove) {
  Value list = Value::container(ValueKind::kList);
  const Value* first = &list.append(Value::of_string("first"));
  const std::string* key = nullptr;
  Value dict = Value::container(ValueKind::kDict);
  dict.put("k", Value::of_int(0));
  key = &dict.keys[0];
  for (int k = 0; k < 10000; ++k) {
    list.append(Value::of_int(k));
    dict.put("k" + std::to_string(k), Value::of_int(k));
  }
  EXPECT_EQ(&list.items[0], first);
  EXPECT_EQ(first->s, "first");
  EXPECT_EQ(&dict.keys[0], key);
}

}  // namespace
}  // namespace manypy
