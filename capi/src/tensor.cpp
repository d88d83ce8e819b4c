// Tensors: tensor values and reference-counted tensor handles, DLPack in
// and out, without copies unless asked.
#include "handles.h"

using manypy::Tensor;

namespace {

// The core tensor of a tensor value, or the status saying the value is of
// another kind.
manypy_status* tensor_of(const char* function, const manypy_value* value,
                         const std::shared_ptr<Tensor>** out) {
  const manypy::Value& v = manypy::capi::value_of(value);
  if (v.kind != manypy::ValueKind::kTensor) {
    return manypy::capi::make_status(
        MANYPY_ERR_WRONG_KIND,
        std::string(function) + ": the value is " + manypy::kind_name(v.kind) + ", not tensor");
  }
  *out = &v.tensor;
  return nullptr;
}

// manypy_value_get_tensor and manypy_tensor_from_value: what `make` makes
// of a tensor value's core tensor, shared.
template <typename Out, typename Make>
manypy_status* take_tensor_of(const char* function, const manypy_value* value, Out** out_tensor,
                              Make make) {
  return manypy::capi::fence(function, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(value);
    MANYPY_NOT_NULL(out_tensor);
    const std::shared_ptr<Tensor>* tensor = nullptr;
    if (manypy_status* s = tensor_of(api_function, value, &tensor)) return s;
    *out_tensor = make(*tensor);
    return nullptr;
  });
}

// manypy_value_new_tensor and manypy_tensor_new: adopts the caller's
// DLManagedTensor, whose ownership passes on the call (its deleter runs at
// once if anything fails), and hands `make(tensor)` to *out.
template <typename Out, typename Make>
manypy_status* adopt(const char* function, DLManagedTensor* tensor, Out** out, const char* out_name,
                     Make&& make) {
  return manypy::capi::fence(function, [&](const char* api_function) -> manypy_status* {
    if (out == nullptr) {
      if (tensor && tensor->deleter) tensor->deleter(tensor);  // owned even on failure
      return manypy::capi::invalid_argument(api_function,
                                            (std::string(out_name) + " must not be NULL").c_str());
    }
    MANYPY_NOT_NULL(tensor);
    // From here on a failure drops `adopted`, which runs the deleter.
    std::shared_ptr<Tensor> adopted = Tensor::adopt_caller(tensor);
    *out = make(std::move(adopted));
    return nullptr;
  });
}

// manypy_value_new_tensor_from_buffer and manypy_tensor_new_from_buffer:
// the same for a buffer, whose release runs at once if anything fails.
template <typename Out, typename Make>
manypy_status* from_buffer(const char* function, void* data, size_t data_size, DLDataType dtype,
                           int32_t ndim, const int64_t* shape, const int64_t* strides, int copy,
                           void (*release)(void*), void* release_ctx, Out** out,
                           const char* out_name, Make&& make) {
  return manypy::capi::fence(function, [&](const char* api_function) -> manypy_status* {
    if (out == nullptr || (copy != 0 && copy != 1)) {
      if (release) release(release_ctx);  // owned even on failure
      return manypy::capi::invalid_argument(
          api_function, out == nullptr ? (std::string(out_name) + " must not be NULL").c_str()
                                       : "copy must be 0 or 1");
    }
    std::shared_ptr<Tensor> tensor = Tensor::from_buffer(data, data_size, dtype, ndim, shape,
                                                         strides, copy != 0, release, release_ctx);
    *out = make(std::move(tensor));
    return nullptr;
  });
}

manypy_value* new_tensor_value(std::shared_ptr<Tensor> tensor) {
  return manypy::capi::new_value(manypy::Value::of_tensor(std::move(tensor)));
}

manypy_tensor* new_tensor_handle(std::shared_ptr<Tensor> tensor) {
  return new manypy_tensor(std::move(tensor));
}

}  // namespace

extern "C" {

manypy_status* manypy_value_new_tensor(DLManagedTensor* tensor, manypy_value** out_value) {
  return adopt(__func__, tensor, out_value, "out_value", new_tensor_value);
}

manypy_status* manypy_value_new_tensor_from_buffer(void* data, size_t data_size, DLDataType dtype,
                                                   int32_t ndim, const int64_t* shape,
                                                   const int64_t* strides, int copy,
                                                   void (*release)(void*), void* release_ctx,
                                                   manypy_value** out_value) {
  return from_buffer(__func__, data, data_size, dtype, ndim, shape, strides, copy, release,
                     release_ctx, out_value, "out_value", new_tensor_value);
}

manypy_status* manypy_value_get_tensor(const manypy_value* value, DLManagedTensor** out_tensor) {
  return take_tensor_of(__func__, value, out_tensor,
                        [](const std::shared_ptr<Tensor>& t) { return Tensor::share(t); });
}

manypy_status* manypy_tensor_new(DLManagedTensor* tensor, manypy_tensor** out_tensor) {
  return adopt(__func__, tensor, out_tensor, "out_tensor", new_tensor_handle);
}

manypy_status* manypy_tensor_new_from_buffer(void* data, size_t data_size, DLDataType dtype,
                                             int32_t ndim, const int64_t* shape,
                                             const int64_t* strides, int copy,
                                             void (*release)(void*), void* release_ctx,
                                             manypy_tensor** out_tensor) {
  return from_buffer(__func__, data, data_size, dtype, ndim, shape, strides, copy, release,
                     release_ctx, out_tensor, "out_tensor", new_tensor_handle);
}

manypy_status* manypy_tensor_from_value(const manypy_value* value, manypy_tensor** out_tensor) {
  return take_tensor_of(__func__, value, out_tensor, new_tensor_handle);
}

manypy_tensor* manypy_tensor_retain(manypy_tensor* tensor) {
  // Relaxed, as for std::shared_ptr: a new reference is made from one the
  // caller holds, so the count cannot reach 0 meanwhile.
  if (tensor != nullptr) tensor->refs.fetch_add(1, std::memory_order_relaxed);
  return tensor;
}

void manypy_tensor_release(manypy_tensor* tensor) {
  // acq_rel: every use of the tensor by the threads that held references
  // happens before the delete that may run the deleter.
  if (tensor != nullptr && tensor->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    delete tensor;
  }
}

const DLTensor* manypy_tensor_dl_tensor(const manypy_tensor* tensor) {
  return tensor != nullptr ? &tensor->tensor->dl() : nullptr;
}

manypy_status* manypy_value_new_tensor_ref(const manypy_tensor* tensor, manypy_value** out_value) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(tensor);
    MANYPY_NOT_NULL(out_value);
    *out_value = new_tensor_value(tensor->tensor);
    return nullptr;
  });
}

}  // extern "C"
