// The tensor work of dynamic batching (batcher.h): which requests may share
// a batch, concatenating their arguments along the batch dimension, and
// splitting a batch's result back into each request's rows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "value.h"

namespace manypy {

// What a request's arguments say about batching.
struct BatchShape {
  // Equal for requests that may share a batch: the arguments' structure,
  // every non-tensor value, and each tensor's dtype and sizes but the
  // batch dimension's.
  std::string signature;
  // The request's size along the batch dimension (every tensor's).
  int64_t rows = 0;
};

// Throws Error(kInvalidArgument) when the arguments hold no tensor, a tensor
// without dimension `dim`, or tensors of different sizes along it.
// `kwargs` may be null.
BatchShape batch_shape(const Value& args, const Value* kwargs, int dim);

// The batch's arguments: the requests' (which share a signature) with
// each tensor replaced by the concatenation along `dim` of the requests'
// tensors at that place, in order. Copies the tensors' data (once).
Value concat_rows(const std::vector<const Value*>& requests, int dim);

// One request's part of a batch result: every tensor narrowed to rows
// [offset, offset + rows) along `dim` (views, nothing copied); values that
// are not tensors are copied as they are. Throws Error(kBadTensor) when a
// tensor's size along `dim` is not `total_rows` (the model returned fewer
// or more rows than it got), or it has no such dimension.
Value rows_of(const Value& result, int dim, int64_t offset, int64_t rows, int64_t total_rows);

}  // namespace manypy
