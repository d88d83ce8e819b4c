// Tensors as manypy holds them: one DLManagedTensor, shared by every value
// and every interpreter that uses it, whose deleter runs exactly once when
// the last user lets go. Never copies data unless asked to.
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace manypy {

// DLPack's type code for bool (kDLBool from DLPack 0.8; manypy.h's
// MANYPY_DL_BOOL): 8 bits, 1 lane. Debian's DLPack 0.6 has no name for it.
constexpr uint8_t kDLBoolCode = 6;

class Tensor {
 public:
  // Takes ownership of `managed` (its deleter runs when the Tensor dies).
  // Checks device, dtype and shape first; on failure runs the deleter at
  // once and throws Error(kBadTensor).
  static std::shared_ptr<Tensor> adopt(DLManagedTensor* managed);
  // The same for a tensor from a caller, which is checked further: data is
  // not NULL when there are elements, and every byte the layout addresses
  // (data + byte_offset + strides) is memory mapped in this process.
  static std::shared_ptr<Tensor> adopt_caller(DLManagedTensor* managed);

  // Over a caller's buffer, borrowed (release runs when the Tensor dies) or
  // copied into a new C-contiguous buffer (release runs before returning).
  // Checks that every addressed element lies in [data, data + data_size).
  static std::shared_ptr<Tensor> from_buffer(void* data, size_t data_size, DLDataType dtype,
                                             int32_t ndim, const int64_t* shape,
                                             const int64_t* strides, bool copy,
                                             void (*release)(void*), void* release_ctx);

  ~Tensor();
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  const DLTensor& dl() const { return managed_->dl_tensor; }

  // A new DLManagedTensor over the same memory that keeps this Tensor alive
  // until its deleter runs. For callers and for interpreters: each consumer
  // gets its own, so each can run its deleter once.
  static DLManagedTensor* share(const std::shared_ptr<Tensor>& tensor);

  // "float32[2, 3]" for messages.
  std::string describe() const;

 private:
  explicit Tensor(DLManagedTensor* managed) : managed_(managed) {}
  DLManagedTensor* managed_;
};

// Checks that torch can take `dtype` over DLPack; returns "" or the reason.
std::string unsupported_dtype_reason(DLDataType dtype);

}  // namespace manypy
