// Values to and from libtorch's IValues, for the TorchScript host path.
// Tensors cross as DLPack, without copies.
#pragma once

#include <ATen/core/ivalue.h>

#include "value.h"

namespace manypy {

// Throws Error(kUnsupportedType) for bytes (TorchScript has no such type).
c10::IValue to_ivalue(const Value& value);

// Throws Error(kUnsupportedType) for IValues with no Value equivalent
// (objects, futures, non-string dict keys...).
Value from_ivalue(const c10::IValue& ivalue);

}  // namespace manypy
