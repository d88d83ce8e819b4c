// A value copied out of an interpreter: the host-side twin of mpi_value.
#pragma once

#include <cstdint>
#include <string>

namespace manypy {

enum class ValueKind : int { kNone = 0, kBool = 1, kInt64 = 2, kDouble = 3, kString = 4 };

struct Value {
  ValueKind kind = ValueKind::kNone;
  bool b = false;
  int64_t i = 0;
  double d = 0.0;
  std::string s;
};

}  // namespace manypy
