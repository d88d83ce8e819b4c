// Values that cross manypy's boundaries: scalars, strings, bytes, tensors,
// and lists, tuples and string-keyed dicts of them. The host-side twin of
// mpi_value (core/interp/interp_api.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

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
  ValueKind kind = ValueKind::kNone;
  bool b = false;
  int64_t i = 0;
  double d = 0.0;
  std::string s;                   // kString (UTF-8), kBytes
  std::shared_ptr<Tensor> tensor;  // kTensor
  // The C API hands out pointers to items and keys, which must survive
  // later appends: elements that never move.
  StableVector<Value> items;        // kList, kTuple; kDict: the values
  StableVector<std::string> keys;   // kDict: the keys (any bytes), in insertion order

  static Value none() { return Value{}; }
  static Value of_bool(bool v) { Value x; x.kind = ValueKind::kBool; x.b = v; return x; }
  static Value of_int(int64_t v) { Value x; x.kind = ValueKind::kInt64; x.i = v; return x; }
  static Value of_double(double v) { Value x; x.kind = ValueKind::kDouble; x.d = v; return x; }
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
  static Value container(ValueKind kind) { Value x; x.kind = kind; return x; }

  bool is_sequence() const { return kind == ValueKind::kList || kind == ValueKind::kTuple; }
  // Index of `key` in a dict, or -1.
  long find_key(const std::string& key) const;
};

}  // namespace manypy
