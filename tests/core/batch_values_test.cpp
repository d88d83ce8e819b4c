// The tensor work of dynamic batching (core/src/batch_values.h): which
// requests may share a batch (their signatures), concatenating their
// arguments, splitting a batch's result back into each caller's rows, and
// the errors for shapes that do not fit; and the batch-size histogram
// (core/src/batch_sizes.h). Needs no interpreter: tensors are made and
// split with libtorch on the host.
#include "batch_values.h"

#include <dlpack/dlpack.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "batch_sizes.h"
#include "error.h"
#include "tensor.h"
#include "value.h"

namespace manypy {
namespace {

// A float32 tensor of `shape` holding first, first + 1, ... in C order.
Value floats(const std::vector<int64_t>& shape, float first, uint8_t bits = 32) {
  const int64_t n = std::accumulate(shape.begin(), shape.end(), int64_t{1},
                                    [](int64_t a, int64_t b) { return a * b; });
  std::vector<float> f(n);
  std::iota(f.begin(), f.end(), first);
  std::vector<double> d(f.begin(), f.end());
  void* data = bits == 32 ? static_cast<void*>(f.data()) : static_cast<void*>(d.data());
  return Value::of_tensor(Tensor::from_buffer(data, n * (bits / 8), DLDataType{kDLFloat, bits, 1},
                                              static_cast<int32_t>(shape.size()), shape.data(),
                                              nullptr, /*copy=*/true, nullptr, nullptr));
}

std::vector<int64_t> shape_of(const Value& v) {
  const DLTensor& t = v.tensor->dl();
  return std::vector<int64_t>(t.shape, t.shape + t.ndim);
}

// A float32 tensor's elements in C order, whatever its strides (a split
// along dimension 1 is a view that is not contiguous).
std::vector<float> elements(const Value& v) {
  EXPECT_EQ(v.kind, ValueKind::kTensor);
  const DLTensor& t = v.tensor->dl();
  EXPECT_EQ(t.dtype.code, kDLFloat);
  EXPECT_EQ(t.dtype.bits, 32);
  std::vector<int64_t> strides(t.ndim);
  for (int k = t.ndim - 1, s = 1; k >= 0; --k) {
    strides[k] = t.strides ? t.strides[k] : s;
    s *= static_cast<int>(t.shape[k]);
  }
  const float* base =
      reinterpret_cast<const float*>(static_cast<const char*>(t.data) + t.byte_offset);
  std::vector<float> out;
  std::vector<int64_t> at(t.ndim, 0);
  int64_t n = 1;
  for (int k = 0; k < t.ndim; ++k) n *= t.shape[k];
  for (int64_t e = 0; e < n; ++e) {
    int64_t offset = 0;
    for (int k = 0; k < t.ndim; ++k) offset += at[k] * strides[k];
    out.push_back(base[offset]);
    for (int k = t.ndim - 1; k >= 0 && ++at[k] == t.shape[k]; --k) at[k] = 0;
  }
  return out;
}

std::vector<float> range(float first, int n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

Value tuple_of(Value a, Value b) {
  Value t = Value::container(ValueKind::kTuple);
  t.append(std::move(a));
  t.append(std::move(b));
  return t;
}

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

// ---- Splitting a batch back to its callers ----

// Three callers of 1, 2 and 3 rows: their arguments concatenate in order,
// and the batch's result (here the batch itself, in a dict with a value
// that is not a tensor) splits back into each caller's own rows.
TEST(BatchValues, RowsOfABatchResultGoBackToTheirCallers) {
  const std::vector<int64_t> rows = {1, 2, 3};
  std::vector<Value> requests;
  float next = 0;
  for (int64_t r : rows) {
    requests.push_back(tuple_of(floats({r, 2}, next), Value::of_int(5)));
    next += static_cast<float>(r * 2);
  }
  std::vector<const Value*> at;
  for (const Value& v : requests) at.push_back(&v);
  for (const Value& v : requests) {
    EXPECT_EQ(batch_shape(v, nullptr, 0).signature, batch_shape(requests[0], nullptr, 0).signature);
  }
  const Value batch = concat_rows(at, 0);
  ASSERT_EQ(batch.kind, ValueKind::kTuple);
  ASSERT_EQ(batch.items.size(), 2u);
  EXPECT_EQ(shape_of(batch.items[0]), (std::vector<int64_t>{6, 2}));
  EXPECT_EQ(elements(batch.items[0]), range(0, 12));
  EXPECT_EQ(batch.items[1].kind, ValueKind::kInt64);
  EXPECT_EQ(batch.items[1].i, 5);

  Value result = Value::container(ValueKind::kDict);
  result.put("y", Value::of_tensor(batch.items[0].tensor));
  result.put("tag", Value::of_string("model-v1"));
  int64_t offset = 0;
  for (size_t k = 0; k < rows.size(); ++k) {
    const Value mine = rows_of(result, 0, offset, rows[k], 6);
    ASSERT_EQ(mine.kind, ValueKind::kDict);
    ASSERT_EQ(mine.find_key("y"), 0);
    EXPECT_EQ(shape_of(mine.items[0]), (std::vector<int64_t>{rows[k], 2}));
    EXPECT_EQ(elements(mine.items[0]), range(static_cast<float>(offset * 2), rows[k] * 2));
    EXPECT_EQ(mine.items[1].s, "model-v1");
    offset += rows[k];
  }
}

// Along dimension 1 the callers' parts interleave in memory: each caller
// still gets exactly its own columns.
TEST(BatchValues, SplitsAlongAnotherDimension) {
  Value a = floats({2, 1}, 100);  // [[100], [101]]
  Value b = floats({2, 3}, 0);    // [[0, 1, 2], [3, 4, 5]]
  Value args_a = Value::container(ValueKind::kList);
  args_a.append(std::move(a));
  Value args_b = Value::container(ValueKind::kList);
  args_b.append(std::move(b));
  EXPECT_EQ(batch_shape(args_a, nullptr, 1).rows, 1);
  EXPECT_EQ(batch_shape(args_b, nullptr, 1).rows, 3);
  EXPECT_EQ(batch_shape(args_a, nullptr, 1).signature, batch_shape(args_b, nullptr, 1).signature);
  const Value batch = concat_rows({&args_a, &args_b}, 1);
  ASSERT_EQ(batch.kind, ValueKind::kList);
  EXPECT_EQ(shape_of(batch.items[0]), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(elements(batch.items[0]), (std::vector<float>{100, 0, 1, 2, 101, 3, 4, 5}));

  const Value& result = batch.items[0];
  const Value first = rows_of(result, 1, 0, 1, 4);
  const Value second = rows_of(result, 1, 1, 3, 4);
  EXPECT_EQ(shape_of(first), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(elements(first), (std::vector<float>{100, 101}));
  EXPECT_EQ(shape_of(second), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(elements(second), (std::vector<float>{0, 1, 2, 3, 4, 5}));
}

TEST(BatchValues, KeywordArgumentsAndNestedContainersConcatenate) {
  std::vector<Value> kwargs;
  for (float first : {0.0f, 10.0f}) {
    Value inner = Value::container(ValueKind::kList);
    inner.append(floats({1, 3}, first));
    inner.append(Value::of_bool(true));
    Value kw = Value::container(ValueKind::kDict);
    kw.put("x", std::move(inner));
    kw.put("scale", Value::of_double(0.5));
    kwargs.push_back(std::move(kw));
  }
  const Value no_args = Value::container(ValueKind::kTuple);
  EXPECT_EQ(batch_shape(no_args, &kwargs[0], 0).signature,
            batch_shape(no_args, &kwargs[1], 0).signature);
  const Value batch = concat_rows({&kwargs[0], &kwargs[1]}, 0);
  ASSERT_EQ(batch.kind, ValueKind::kDict);
  ASSERT_EQ(batch.find_key("x"), 0);
  ASSERT_EQ(batch.find_key("scale"), 1);
  const Value& x = batch.items[0];
  ASSERT_EQ(x.kind, ValueKind::kList);
  EXPECT_EQ(shape_of(x.items[0]), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(elements(x.items[0]), (std::vector<float>{0, 1, 2, 10, 11, 12}));
  EXPECT_TRUE(x.items[1].b);
  EXPECT_EQ(batch.items[1].d, 0.5);
}

// The model returned more or fewer rows than its batch had: no caller can
// be given its part, and the error says why.
TEST(BatchValues, AResultWithTheWrongRowsIsRefused) {
  const Value five = floats({5, 2}, 0);
  Error e = error_of([&] { rows_of(five, 0, 0, 2, 6); });
  EXPECT_EQ(e.code(), Code::kBadTensor);
  EXPECT_TRUE(has(e.message(), "float32[5, 2]")) << e.message();
  EXPECT_TRUE(has(e.message(), "does not have the 6 rows of its batch along dimension 0"))
      << e.message();
  EXPECT_TRUE(has(e.message(), "one row per input row")) << e.message();

  // A tensor without the batch dimension, nested in a result.
  Value nested = Value::container(ValueKind::kTuple);
  nested.append(floats({6, 2}, 0));
  nested.append(floats({6}, 0));
  e = error_of([&] { rows_of(nested, 1, 0, 1, 2); });
  EXPECT_EQ(e.code(), Code::kBadTensor);
  EXPECT_TRUE(has(e.message(), "along dimension 1")) << e.message();

  // A scalar result (no rows at all).
  e = error_of([&] { rows_of(floats({}, 1), 0, 0, 1, 1); });
  EXPECT_EQ(e.code(), Code::kBadTensor);
}

TEST(BatchValues, MismatchedArgumentsAreRefused) {
  // Two tensors with different rows in one request.
  Value two = tuple_of(floats({2, 4}, 0), floats({3, 4}, 0));
  Error e = error_of([&] { batch_shape(two, nullptr, 0); });
  EXPECT_EQ(e.code(), Code::kInvalidArgument);
  EXPECT_TRUE(has(e.message(), "same size along the batch dimension 0: 2 and 3")) << e.message();

  // ... or between args and kwargs.
  Value args = Value::container(ValueKind::kTuple);
  args.append(floats({2, 4}, 0));
  Value kwargs = Value::container(ValueKind::kDict);
  kwargs.put("mask", floats({4, 4}, 0));
  EXPECT_EQ(error_of([&] { batch_shape(args, &kwargs, 0); }).code(), Code::kInvalidArgument);

  // No tensor at all.
  Value scalars = tuple_of(Value::of_int(1), Value::of_string("x"));
  e = error_of([&] { batch_shape(scalars, nullptr, 0); });
  EXPECT_EQ(e.code(), Code::kInvalidArgument);
  EXPECT_TRUE(has(e.message(), "needs at least one tensor argument with the batch dimension 0"))
      << e.message();

  // A tensor without the batch dimension.
  Value flat = Value::container(ValueKind::kTuple);
  flat.append(floats({4}, 0));
  e = error_of([&] { batch_shape(flat, nullptr, 1); });
  EXPECT_EQ(e.code(), Code::kInvalidArgument);
  EXPECT_TRUE(has(e.message(), "need the batch dimension 1, and float32[4] has 1 dimension"))
      << e.message();
}

// ---- Which requests may share a batch ----

std::string signature(const Value& args, const Value* kwargs = nullptr, int dim = 0) {
  return batch_shape(args, kwargs, dim).signature;
}

TEST(BatchValues, RequestsThatDifferOnlyInRowsShareABatch) {
  const BatchShape one = batch_shape(tuple_of(floats({1, 3}, 0), Value::of_int(2)), nullptr, 0);
  const BatchShape many = batch_shape(tuple_of(floats({7, 3}, 9), Value::of_int(2)), nullptr, 0);
  EXPECT_EQ(one.signature, many.signature);  // data does not matter either
  EXPECT_EQ(one.rows, 1);
  EXPECT_EQ(many.rows, 7);
}

TEST(BatchValues, RequestsThatDifferOtherwiseDoNot) {
  const std::string base = signature(tuple_of(floats({2, 3}, 0), Value::of_int(2)));
  const auto differs = [&](const Value& args, const Value* kwargs, const char* what) {
    EXPECT_NE(signature(args, kwargs), base) << what;
  };
  differs(tuple_of(floats({2, 4}, 0), Value::of_int(2)), nullptr, "another non-batch size");
  differs(tuple_of(floats({2, 3}, 0, 64), Value::of_int(2)), nullptr, "another dtype");
  differs(tuple_of(floats({2, 3, 1}, 0), Value::of_int(2)), nullptr, "another rank");
  differs(tuple_of(floats({2, 3}, 0), Value::of_int(3)), nullptr, "another int");
  differs(tuple_of(floats({2, 3}, 0), Value::of_double(2)), nullptr, "a double for an int");
  differs(tuple_of(floats({2, 3}, 0), Value::of_string("2")), nullptr, "a string for an int");
  differs(tuple_of(Value::of_int(2), floats({2, 3}, 0)), nullptr, "another order");
  Value list = Value::container(ValueKind::kList);
  list.append(floats({2, 3}, 0));
  list.append(Value::of_int(2));
  differs(list, nullptr, "a list for a tuple");
  Value args = Value::container(ValueKind::kTuple);
  args.append(floats({2, 3}, 0));
  Value kwargs = Value::container(ValueKind::kDict);
  kwargs.put("n", Value::of_int(2));
  differs(args, &kwargs, "a keyword for a positional argument");

  // Doubles bit for bit; strings and bytes, and dict keys, exactly.
  const double tenth = 0.1;
  EXPECT_NE(signature(tuple_of(floats({1}, 0), Value::of_double(tenth))),
            signature(tuple_of(floats({1}, 0), Value::of_double(std::nextafter(tenth, 1.0)))));
  EXPECT_NE(signature(tuple_of(floats({1}, 0), Value::of_string("ab"))),
            signature(tuple_of(floats({1}, 0), Value::of_bytes("ab"))));
  EXPECT_NE(signature(tuple_of(floats({1}, 0), Value::of_string("a:b"))),
            signature(tuple_of(floats({1}, 0), Value::of_string("a:c"))));
  Value k1 = Value::container(ValueKind::kDict);
  k1.put("x", floats({1}, 0));
  Value k2 = Value::container(ValueKind::kDict);
  k2.put("y", floats({1}, 0));
  const Value empty = Value::container(ValueKind::kTuple);
  EXPECT_NE(signature(empty, &k1), signature(empty, &k2));
  // Strings are length-prefixed: ("a", "bc") is not ("ab", "c").
  Value s1 = tuple_of(Value::of_string("a"), Value::of_string("bc"));
  s1.append(floats({1}, 0));
  Value s2 = tuple_of(Value::of_string("ab"), Value::of_string("c"));
  s2.append(floats({1}, 0));
  EXPECT_NE(signature(s1), signature(s2));
}

// ---- Batch sizes ----

// The bucket counts of one batcher's histogram, by bound ("+Inf" last).
std::vector<std::pair<std::string, uint64_t>> size_buckets(const std::string& name) {
  std::vector<std::pair<std::string, uint64_t>> out;
  std::istringstream in(BatchSizes::get().prometheus_text());
  const std::string prefix = "manypy_batch_size_bucket{batcher=\"" + name + "\",le=\"";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) != 0) continue;
    const size_t close = line.find('"', prefix.size());
    out.emplace_back(line.substr(prefix.size(), close - prefix.size()),
                     std::stoull(line.substr(line.rfind(' ') + 1)));
  }
  return out;
}

// A batcher name no other test (nor a repeat of this one: the histograms
// are process-wide) has used.
std::string fresh_batcher(const std::string& stem) {
  static int serial = 0;
  return "batch_values_test." + stem + "." + std::to_string(++serial);
}

uint64_t bucket(const std::vector<std::pair<std::string, uint64_t>>& buckets,
                const std::string& le) {
  for (const auto& [bound, count] : buckets) {
    if (bound == le) return count;
  }
  ADD_FAILURE() << "no bucket le=" << le;
  return 0;
}

TEST(BatchSizes, ABatchCountsInTheFirstBucketThatHoldsIt) {
  const std::string name = fresh_batcher("sizes");
  for (int64_t rows : {1, 2, 3, 8, 9}) BatchSizes::get().record(name, rows);
  const auto buckets = size_buckets(name);
  ASSERT_EQ(buckets.size(), 18u);  // 1 to 65536, and +Inf
  EXPECT_EQ(bucket(buckets, "1"), 1u);
  EXPECT_EQ(bucket(buckets, "2"), 2u);
  EXPECT_EQ(bucket(buckets, "4"), 3u);  // 3 rows: <= 4
  EXPECT_EQ(bucket(buckets, "8"), 4u);
  EXPECT_EQ(bucket(buckets, "16"), 5u);
  EXPECT_EQ(bucket(buckets, "65536"), 5u);
  EXPECT_EQ(bucket(buckets, "+Inf"), 5u);
  const std::string text = BatchSizes::get().prometheus_text();
  EXPECT_TRUE(has(text, "manypy_batch_size_sum{batcher=\"" + name + "\"} 23\n")) << text;
  EXPECT_TRUE(has(text, "manypy_batch_size_count{batcher=\"" + name + "\"} 5\n")) << text;
}

// A single request may bring more rows than the largest batch allowed
// (manypy_batcher_options_set_max_batch caps at 65536) and forms a batch
// alone: that batch is larger than the last bound and counts only in +Inf.
TEST(BatchSizes, ABatchPastTheLastBoundCountsOnlyInInf) {
  const std::string name = fresh_batcher("huge");
  BatchSizes::get().record(name, 65536);
  BatchSizes::get().record(name, 100000);
  const auto buckets = size_buckets(name);
  EXPECT_EQ(bucket(buckets, "32768"), 0u);
  EXPECT_EQ(bucket(buckets, "65536"), 1u);
  EXPECT_EQ(bucket(buckets, "+Inf"), 2u);
}

}  // namespace
}  // namespace manypy
