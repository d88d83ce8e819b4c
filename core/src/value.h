// Values that cross manypy's boundaries: scalars, strings, bytes, tensors,
// and lists, tuples and string-keyed dicts of them. The host-side twin of
// mpi_value (core/interp/interp_api.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "stable_vector.h"
#include "tensor.h"

namespace manypy {

// Same numbers as manypy_value_kind and the MPI_VALUE_* codes.
enum class ValueKind : int {
  kNone = 0,
  kBool = 1,
  kInt64 = 2,
  kDouble = 3,
  kString = 4,
  kTensor = 5,
  kBytes = 6,
  kList = 7,
  kTuple = 8,
  kDict = 9,
};

const char* kind_name(ValueKind kind);

struct Value {
  // The most containers a value may nest (a list holding a list is 2):
  // arguments deeper than this are refused where they are built
  // (INVALID_ARGUMENT), results where they are converted.
  static constexpr uint32_t kMaxDepth = 64;

  ValueKind kind = ValueKind::kNone;
  bool b = false;
  int64_t i = 0;
  double d = 0.0;
  std::string s;                   // kString (UTF-8), kBytes
  std::shared_ptr<Tensor> tensor;  // kTensor
  // The C API hands out pointers to items and keys, which must survive
  // later appends: elements that never move. Read them directly; change
  // them through append() and put(), which keep depth and the key index.
  StableVector<Value> items;       // kList, kTuple; kDict: the values
  StableVector<std::string> keys;  // kDict: the keys (any bytes), in insertion order
  // Containers nested in this value: 0 for a scalar, 1 + the deepest item's
  // for a container.
  uint32_t depth = 0;

  Value() = default;
  Value(Value&&) noexcept = default;
  Value& operator=(Value&&) noexcept = default;
  Value(const Value&) = delete;
  Value& operator=(const Value&) = delete;
  // Frees the whole tree with a loop, never recursion: a value nested
  // deeper than the C stack allows still frees.
  ~Value();

  static Value none() { return Value{}; }
  static Value of_bool(bool v) {
    Value x;
    x.kind = ValueKind::kBool;
    x.b = v;
    return x;
  }
  static Value of_int(int64_t v) {
    Value x;
    x.kind = ValueKind::kInt64;
    x.i = v;
    return x;
  }
  static Value of_double(double v) {
    Value x;
    x.kind = ValueKind::kDouble;
    x.d = v;
    return x;
  }
  static Value of_string(std::string v) {
    Value x;
    x.kind = ValueKind::kString;
    x.s = std::move(v);
    return x;
  }
  static Value of_bytes(std::string v) {
    Value x;
    x.kind = ValueKind::kBytes;
    x.s = std::move(v);
    return x;
  }
  static Value of_tensor(std::shared_ptr<Tensor> t) {
    Value x;
    x.kind = ValueKind::kTensor;
    x.tensor = std::move(t);
    return x;
  }
  static Value container(ValueKind kind) {
    Value x;
    x.kind = kind;
    x.depth = 1;
    return x;
  }

  bool is_sequence() const { return kind == ValueKind::kList || kind == ValueKind::kTuple; }
  // Index of `key` in a dict, or -1. O(1) on average.
  long find_key(std::string_view key) const;

  // Appends to a list or tuple. The caller checks kMaxDepth.
  Value& append(Value item);
  // Sets `key` of a dict to `item`, replacing an earlier value, in
  // amortised O(1). The caller checks kMaxDepth. Returns the entry.
  Value& put(std::string key, Value item);
  // The depth this container would have with `item` in it.
  uint32_t depth_with(const Value& item) const { return std::max(depth, item.depth + 1); }

  // A copy that shares nothing mutable with this value: containers, keys,
  // strings and bytes are copied; a tensor is shared (the same Tensor, so
  // the same memory, kept alive by either). A value and its clones may then
  // be used by different threads, and one may be freed while the others
  // are in use. Recurses once per level: at most kMaxDepth.
  Value clone() const;

 private:
  void index_key(size_t k);
  // Key -> position, for dicts past a few keys (a linear scan is faster
  // below). Views into `keys`, whose strings never move.
  std::unique_ptr<std::unordered_map<std::string_view, size_t>> index_;
};

// A call's arguments: args a list or tuple, kwargs a dict (either may be
// null). Throws Error(kInvalidArgument) otherwise.
void check_call_arguments(const Value* args, const Value* kwargs);

}  // namespace manypy
