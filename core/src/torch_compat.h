// The host's libtorch API where torch 1.13 (Debian, the first build leg) and
// torch 2.x (PyPI, the second; README, "Torch and Python versions") differ.
// The one place in the core that names torch versions.
#pragma once

#include <ATen/DLConvertor.h>
#include <torch/version.h>

#include "tensor.h"  // kDLBoolCode

namespace manypy::torch_compat {

// DLPack to and from the host's libtorch. torch 2.x's DLPack has bool
// (kDLBool, code 6: kDLBoolCode); torch 1.13's has not, so a bool tensor crosses as
// uint8 and is viewed back as bool, zero-copy either way.
#if TORCH_VERSION_MAJOR >= 2
inline at::Tensor from_dlpack(DLManagedTensor* managed) { return at::fromDLPack(managed); }
inline DLManagedTensor* to_dlpack(const at::Tensor& t) { return at::toDLPack(t); }
#else
inline at::Tensor from_dlpack(DLManagedTensor* managed) {
  const bool is_bool = managed->dl_tensor.dtype.code == kDLBoolCode;
  if (is_bool) managed->dl_tensor.dtype.code = kDLUInt;  // ours: a fresh share
  at::Tensor t = at::fromDLPack(managed);
  return is_bool ? t.view(at::kBool) : t;
}

inline DLManagedTensor* to_dlpack(const at::Tensor& t) {
  if (t.scalar_type() != at::kBool) return at::toDLPack(t);
  DLManagedTensor* managed = at::toDLPack(t.view(at::kByte));
  managed->dl_tensor.dtype.code = kDLBoolCode;
  return managed;
}
#endif

}  // namespace manypy::torch_compat
