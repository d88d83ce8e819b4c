#include "batch_values.h"

#include <ATen/ATen.h>

#include <cstring>

#include "error.h"
#include "torch_compat.h"

namespace manypy {

namespace {

void append_signature(const Value& v, int dim, std::string& sig, int64_t& rows, bool& any_tensor) {
  sig += std::to_string(static_cast<int>(v.kind));
  sig += ':';
  switch (v.kind) {
    case ValueKind::kNone:
      break;
    case ValueKind::kBool:
      sig += v.b ? '1' : '0';
      break;
    case ValueKind::kInt64:
      sig += std::to_string(v.i);
      break;
    case ValueKind::kDouble: {
      // Bit for bit: 0.1 and 0.1000000001 are different arguments.
      char bits[sizeof v.d];
      std::memcpy(bits, &v.d, sizeof v.d);
      sig.append(bits, sizeof bits);
      break;
    }
    case ValueKind::kString:
    case ValueKind::kBytes:
      sig += std::to_string(v.s.size()) + ':' + v.s;
      break;
    case ValueKind::kTensor: {
      const DLTensor& t = v.tensor->dl();
      if (t.ndim <= dim) {
        throw Error(Code::kInvalidArgument, "a batched call's tensors need the batch dimension " +
                                                std::to_string(dim) + ", and " +
                                                v.tensor->describe() + " has " +
                                                std::to_string(t.ndim) + " dimension(s)");
      }
      if (any_tensor && t.shape[dim] != rows) {
        throw Error(Code::kInvalidArgument,
                    "a batched call's tensors must all have the same size along the batch "
                    "dimension " +
                        std::to_string(dim) + ": " + std::to_string(rows) + " and " +
                        std::to_string(t.shape[dim]) + " (" + v.tensor->describe() + ")");
      }
      any_tensor = true;
      rows = t.shape[dim];
      sig += std::to_string(t.dtype.code) + '.' + std::to_string(t.dtype.bits) + '.' +
             std::to_string(t.dtype.lanes) + '[';
      for (int k = 0; k < t.ndim; ++k) {
        sig += k == dim ? std::string("*") : std::to_string(t.shape[k]);
        sig += ',';
      }
      sig += ']';
      break;
    }
    case ValueKind::kList:
    case ValueKind::kTuple:
    case ValueKind::kDict:
      sig += std::to_string(v.items.size()) + '(';
      for (size_t k = 0; k < v.items.size(); ++k) {
        if (v.kind == ValueKind::kDict) sig += std::to_string(v.keys[k].size()) + ':' + v.keys[k];
        append_signature(v.items[k], dim, sig, rows, any_tensor);
        sig += ',';
      }
      sig += ')';
      break;
  }
}

at::Tensor to_aten(const Value& v) { return torch_compat::from_dlpack(Tensor::share(v.tensor)); }

Value from_aten(const at::Tensor& t) {
  return Value::of_tensor(Tensor::adopt(torch_compat::to_dlpack(t)));
}

// The value at the same place in each request, concatenated or copied.
Value concat_at(const std::vector<const Value*>& at, int dim) {
  const Value& first = *at.front();
  switch (first.kind) {
    case ValueKind::kTensor: {
      std::vector<at::Tensor> parts;
      parts.reserve(at.size());
      for (const Value* v : at) parts.push_back(to_aten(*v));
      return from_aten(at::cat(parts, dim));
    }
    case ValueKind::kList:
    case ValueKind::kTuple:
    case ValueKind::kDict: {
      Value out = Value::container(first.kind);
      std::vector<const Value*> items(at.size());
      for (size_t k = 0; k < first.items.size(); ++k) {
        for (size_t r = 0; r < at.size(); ++r) items[r] = &at[r]->items[k];
        Value item = concat_at(items, dim);
        if (first.kind == ValueKind::kDict) {
          out.put(first.keys[k], std::move(item));
        } else {
          out.append(std::move(item));
        }
      }
      return out;
    }
    default:
      return first.clone();  // equal in every request (the signature says so)
  }
}

}  // namespace

BatchShape batch_shape(const Value& args, const Value* kwargs, int dim) {
  BatchShape shape;
  bool any_tensor = false;
  append_signature(args, dim, shape.signature, shape.rows, any_tensor);
  shape.signature += '|';
  if (kwargs != nullptr) append_signature(*kwargs, dim, shape.signature, shape.rows, any_tensor);
  if (!any_tensor) {
    throw Error(Code::kInvalidArgument,
                "a batched call needs at least one tensor argument with the batch dimension " +
                    std::to_string(dim));
  }
  return shape;
}

Value concat_rows(const std::vector<const Value*>& requests, int dim) {
  return concat_at(requests, dim);
}

Value rows_of(const Value& result, int dim, int64_t offset, int64_t rows, int64_t total_rows) {
  switch (result.kind) {
    case ValueKind::kTensor: {
      const DLTensor& t = result.tensor->dl();
      if (t.ndim <= dim || t.shape[dim] != total_rows) {
        throw Error(Code::kBadTensor,
                    "the batch's result " + result.tensor->describe() + " does not have the " +
                        std::to_string(total_rows) + " rows of its batch along dimension " +
                        std::to_string(dim) +
                        ", so it cannot be split back to its requests (a batched method must "
                        "return one row per input row)");
      }
      return from_aten(to_aten(result).narrow(dim, offset, rows));
    }
    case ValueKind::kList:
    case ValueKind::kTuple:
    case ValueKind::kDict: {
      Value out = Value::container(result.kind);
      for (size_t k = 0; k < result.items.size(); ++k) {
        Value item = rows_of(result.items[k], dim, offset, rows, total_rows);
        if (result.kind == ValueKind::kDict) {
          out.put(result.keys[k], std::move(item));
        } else {
          out.append(std::move(item));
        }
      }
      return out;
    }
    default:
      return result.clone();
  }
}

}  // namespace manypy
