#include "ivalue_convert.h"

#include <ATen/core/Dict.h>
#include <ATen/core/List.h>

#include "error.h"
#include "torch_compat.h"

namespace manypy {

namespace {

bool all_of_kind(const StableVector<Value>& items, ValueKind kind) {
  for (const Value& v : items) {
    if (v.kind != kind) return false;
  }
  return true;
}

// TorchScript checks argument types against the method's schema, so a list
// of tensors must arrive as List[Tensor], not List[Any].
c10::IValue list_to_ivalue(const StableVector<Value>& items) {
  if (!items.empty() && all_of_kind(items, ValueKind::kTensor)) {
    c10::List<at::Tensor> list;
    for (const Value& v : items) list.push_back(to_ivalue(v).toTensor());
    return list;
  }
  if (!items.empty() && all_of_kind(items, ValueKind::kInt64)) {
    c10::List<int64_t> list;
    for (const Value& v : items) list.push_back(v.i);
    return list;
  }
  if (!items.empty() && all_of_kind(items, ValueKind::kDouble)) {
    c10::List<double> list;
    for (const Value& v : items) list.push_back(v.d);
    return list;
  }
  if (!items.empty() && all_of_kind(items, ValueKind::kBool)) {
    c10::List<bool> list;
    for (const Value& v : items) list.push_back(v.b);
    return list;
  }
  if (!items.empty() && all_of_kind(items, ValueKind::kString)) {
    c10::List<std::string> list;
    for (const Value& v : items) list.push_back(v.s);
    return list;
  }
  c10::impl::GenericList list(c10::AnyType::get());
  for (const Value& v : items) list.push_back(to_ivalue(v));
  return list;
}

c10::IValue dict_to_ivalue(const Value& value) {
  if (!value.items.empty() && all_of_kind(value.items, ValueKind::kTensor)) {
    c10::Dict<std::string, at::Tensor> dict;
    for (size_t k = 0; k < value.items.size(); ++k) {
      dict.insert(value.keys[k], to_ivalue(value.items[k]).toTensor());
    }
    return dict;
  }
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  for (size_t k = 0; k < value.items.size(); ++k) {
    dict.insert(value.keys[k], to_ivalue(value.items[k]));
  }
  return dict;
}

}  // namespace

c10::IValue to_ivalue(const Value& value) {
  switch (value.kind) {
    case ValueKind::kNone:
      return c10::IValue();
    case ValueKind::kBool:
      return c10::IValue(value.b);
    case ValueKind::kInt64:
      return c10::IValue(value.i);
    case ValueKind::kDouble:
      return c10::IValue(value.d);
    case ValueKind::kString:
      return c10::IValue(value.s);
    case ValueKind::kTensor:
      return c10::IValue(torch_compat::from_dlpack(Tensor::share(value.tensor)));
    case ValueKind::kBytes:
      throw Error(Code::kUnsupportedType, "TorchScript has no bytes type");
    case ValueKind::kList:
      return list_to_ivalue(value.items);
    case ValueKind::kTuple: {
      std::vector<c10::IValue> items;
      for (const Value& v : value.items) items.push_back(to_ivalue(v));
      return c10::ivalue::Tuple::create(std::move(items));
    }
    case ValueKind::kDict:
      return dict_to_ivalue(value);
  }
  throw Error(Code::kInternal, "unknown value kind");
}

namespace {

Value from_ivalue_at(const c10::IValue& iv, uint32_t depth) {
  if (iv.isNone()) return Value::none();
  if (iv.isBool()) return Value::of_bool(iv.toBool());
  if (iv.isInt()) return Value::of_int(iv.toInt());
  if (iv.isDouble()) return Value::of_double(iv.toDouble());
  if (iv.isString()) return Value::of_string(iv.toStringRef());
  if (iv.isTensor()) {
    // DLPack carries no autograd state; the managed tensor keeps the storage.
    return Value::of_tensor(Tensor::adopt(torch_compat::to_dlpack(iv.toTensor().detach())));
  }
  if (!iv.isList() && !iv.isTuple() && !iv.isGenericDict()) {
    throw Error(Code::kUnsupportedType,
                "a TorchScript result of type " + iv.tagKind() + " is not supported");
  }
  if (depth >= Value::kMaxDepth) {
    throw Error(Code::kUnsupportedType,
                "result is nested more than " + std::to_string(Value::kMaxDepth) + " deep");
  }
  if (iv.isGenericDict()) {
    Value out = Value::container(ValueKind::kDict);
    for (const auto& entry : iv.toGenericDict()) {
      if (!entry.key().isString()) {
        throw Error(Code::kUnsupportedType, "a dict key of type " + entry.key().tagKind() +
                                                " is not supported (keys must be str)");
      }
      out.put(entry.key().toStringRef(), from_ivalue_at(entry.value(), depth + 1));
    }
    return out;
  }
  Value out = Value::container(iv.isList() ? ValueKind::kList : ValueKind::kTuple);
  if (iv.isList()) {
    for (const c10::IValue& item : iv.toListRef()) out.append(from_ivalue_at(item, depth + 1));
  } else {
    for (const c10::IValue& item : iv.toTupleRef().elements()) {
      out.append(from_ivalue_at(item, depth + 1));
    }
  }
  return out;
}

}  // namespace

Value from_ivalue(const c10::IValue& iv) { return from_ivalue_at(iv, 0); }

}  // namespace manypy
