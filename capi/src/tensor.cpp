// Tensor values: DLPack in and out, without copies unless asked.
#include "handles.h"

extern "C" {

manypy_status* manypy_value_new_tensor(DLManagedTensor* tensor, manypy_value** out_value) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    if (out_value == nullptr) {
      if (tensor && tensor->deleter) tensor->deleter(tensor);  // owned even on failure
      return manypy::capi::invalid_argument(api_function, "out_value must not be NULL");
    }
    MANYPY_NOT_NULL(tensor);
    std::shared_ptr<manypy::Tensor> adopted = manypy::Tensor::adopt_caller(tensor);
    *out_value = manypy::capi::new_value(manypy::Value::of_tensor(std::move(adopted)));
    return nullptr;
  });
}

manypy_status* manypy_value_new_tensor_from_buffer(void* data, size_t data_size,
                                                   DLDataType dtype, int32_t ndim,
                                                   const int64_t* shape, const int64_t* strides,
                                                   int copy, void (*release)(void*),
                                                   void* release_ctx, manypy_value** out_value) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    if (out_value == nullptr || (copy != 0 && copy != 1)) {
      if (release) release(release_ctx);  // owned even on failure
      return manypy::capi::invalid_argument(
          api_function, out_value == nullptr ? "out_value must not be NULL" : "copy must be 0 or 1");
    }
    std::shared_ptr<manypy::Tensor> tensor = manypy::Tensor::from_buffer(
        data, data_size, dtype, ndim, shape, strides, copy != 0, release, release_ctx);
    *out_value = manypy::capi::new_value(manypy::Value::of_tensor(std::move(tensor)));
    return nullptr;
  });
}

manypy_status* manypy_value_get_tensor(const manypy_value* value, DLManagedTensor** out_tensor) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(value);
    MANYPY_NOT_NULL(out_tensor);
    const manypy::Value& v = manypy::capi::value_of(value);
    if (v.kind != manypy::ValueKind::kTensor) {
      return manypy::capi::make_status(MANYPY_ERR_WRONG_KIND,
                                       std::string(api_function) + ": the value is " +
                                           manypy::kind_name(v.kind) + ", not tensor");
    }
    *out_tensor = manypy::Tensor::share(v.tensor);
    return nullptr;
  });
}

}  // extern "C"
