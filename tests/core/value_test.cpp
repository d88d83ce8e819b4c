// Values as the core holds them: freeing never recurses, dict keys are
// indexed, borrowed items never move, clones share only tensors.
#include "value.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

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

// A clone copies containers, keys and strings, keeps kinds, depth and the
// key index, and shares tensors: the same Tensor, not a copy.
TEST(Value, CloneCopiesAllButTensors) {
  static float data[2] = {1, 2};
  int64_t shape[1] = {2};
  std::shared_ptr<Tensor> tensor = Tensor::from_buffer(
      data, sizeof data, DLDataType{kDLFloat, 32, 1}, 1, shape, nullptr, false, nullptr, nullptr);
  Value dict = Value::container(ValueKind::kDict);
  dict.put(std::string("a\0b", 3), Value::of_tensor(tensor));
  for (int k = 0; k < 40; ++k) dict.put("k" + std::to_string(k), Value::of_string("s"));
  Value tuple = Value::container(ValueKind::kTuple);
  tuple.append(Value::of_bytes(std::string("\0x", 2)));
  tuple.append(std::move(dict));
  Value copy = tuple.clone();
  EXPECT_EQ(copy.kind, ValueKind::kTuple);
  EXPECT_EQ(copy.depth, 2u);
  ASSERT_EQ(copy.items.size(), 2u);
  EXPECT_EQ(copy.items[0].s, std::string("\0x", 2));
  const Value& d = copy.items[1];
  EXPECT_EQ(d.kind, ValueKind::kDict);
  EXPECT_EQ(d.find_key(std::string_view("a\0b", 3)), 0);
  EXPECT_EQ(d.find_key("k39"), 40);
  EXPECT_EQ(d.items[0].tensor, tensor);  // shared
  EXPECT_NE(&d.keys[0], &tuple.items[1].keys[0]);
  EXPECT_EQ(tensor.use_count(), 3);  // here, the original, the clone
  copy.append(Value::none());
  EXPECT_EQ(tuple.items.size(), 2u);
}

}  // namespace
}  // namespace manypy
