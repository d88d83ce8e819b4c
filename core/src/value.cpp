#include "value.h"

namespace manypy {

const char* kind_name(ValueKind kind) {
  switch (kind) {
    case ValueKind::kNone: return "None";
    case ValueKind::kBool: return "bool";
    case ValueKind::kInt64: return "int64";
    case ValueKind::kDouble: return "double";
    case ValueKind::kString: return "string";
    case ValueKind::kTensor: return "tensor";
    case ValueKind::kBytes: return "bytes";
    case ValueKind::kList: return "list";
    case ValueKind::kTuple: return "tuple";
    case ValueKind::kDict: return "dict";
  }
  return "unknown";
}

long Value::find_key(const std::string& key) const {
  for (size_t k = 0; k < keys.size(); ++k) {
    if (keys[k] == key) return static_cast<long>(k);
  }
  return -1;
}

}  // namespace manypy
