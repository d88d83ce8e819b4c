#include "value.h"

#include "error.h"

namespace manypy {

const char* kind_name(ValueKind kind) {
  switch (kind) {
    case ValueKind::kNone:
      return "None";
    case ValueKind::kBool:
      return "bool";
    case ValueKind::kInt64:
      return "int64";
    case ValueKind::kDouble:
      return "double";
    case ValueKind::kString:
      return "string";
    case ValueKind::kTensor:
      return "tensor";
    case ValueKind::kBytes:
      return "bytes";
    case ValueKind::kList:
      return "list";
    case ValueKind::kTuple:
      return "tuple";
    case ValueKind::kDict:
      return "dict";
  }
  return "unknown";
}

namespace {

// Below this many keys a dict is searched linearly; from it on, indexed.
constexpr size_t kIndexFrom = 16;

}  // namespace

Value::~Value() {
  if (items.empty()) return;
  std::vector<std::unique_ptr<Value>> pending;
  items.move_into(pending);
  while (!pending.empty()) {
    std::unique_ptr<Value> v = std::move(pending.back());
    pending.pop_back();
    v->items.move_into(pending);  // v now dies without children
  }
}

long Value::find_key(std::string_view key) const {
  if (index_ != nullptr) {
    auto it = index_->find(key);
    return it == index_->end() ? -1 : static_cast<long>(it->second);
  }
  for (size_t k = 0; k < keys.size(); ++k) {
    if (keys[k] == key) return static_cast<long>(k);
  }
  return -1;
}

void Value::index_key(size_t k) {
  if (index_ == nullptr) {
    if (keys.size() < kIndexFrom) return;
    index_ = std::make_unique<std::unordered_map<std::string_view, size_t>>();
    for (size_t j = 0; j < keys.size(); ++j) index_->emplace(keys[j], j);
    return;
  }
  index_->emplace(keys[k], k);
}

Value& Value::append(Value item) {
  depth = depth_with(item);
  return items.push_back(std::move(item));
}

Value Value::clone() const {
  Value copy;
  copy.kind = kind;
  copy.b = b;
  copy.i = i;
  copy.d = d;
  copy.s = s;
  copy.tensor = tensor;
  copy.depth = depth;
  for (size_t k = 0; k < items.size(); ++k) {
    if (kind == ValueKind::kDict) {
      copy.put(keys[k], items[k].clone());
    } else {
      copy.append(items[k].clone());
    }
  }
  return copy;
}

Value& Value::put(std::string key, Value item) {
  depth = depth_with(item);
  long at = find_key(key);
  if (at >= 0) return items[static_cast<size_t>(at)] = std::move(item);
  keys.push_back(std::move(key));
  Value& entry = items.push_back(std::move(item));
  index_key(keys.size() - 1);
  return entry;
}

void check_call_arguments(const Value* args, const Value* kwargs) {
  if (args != nullptr && !args->is_sequence()) {
    throw Error(Code::kInvalidArgument,
                std::string("args must be a list or tuple, not ") + kind_name(args->kind));
  }
  if (kwargs != nullptr && kwargs->kind != ValueKind::kDict) {
    throw Error(Code::kInvalidArgument,
                std::string("kwargs must be a dict, not ") + kind_name(kwargs->kind));
  }
}

}  // namespace manypy
