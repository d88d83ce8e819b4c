// Tensors between Java and manypy without copying: a Java Tensor holds one
// reference to a manypy_tensor (the C API's shared, reference-counted
// tensor), made over a direct ByteBuffer or taken from a result value.
#include <vector>

#include "jni_env.h"
#include "jni_glue.h"

namespace {

manypy_status* invalid_argument(const char* message) {
  return manypy_status_new(MANYPY_ERR_INVALID_ARGUMENT, message);
}

// The array's elements; empty when it is null.
std::vector<int64_t> read_longs(JNIEnv* jenv, jlongArray array) {
  std::vector<int64_t> out(array ? static_cast<size_t>(jenv->GetArrayLength(array)) : 0);
  if (!out.empty()) {
    jenv->GetLongArrayRegion(array, 0, static_cast<jsize>(out.size()),
                             reinterpret_cast<jlong*>(out.data()));
  }
  return out;
}

}  // namespace

manypy_status* manypy_jni_tensor_new_from_direct_buffer(JNIEnv* jenv, jobject buffer,
                                                        int dtype_code, int dtype_bits,
                                                        jlongArray shape, jlongArray strides,
                                                        int copy, manypy_tensor** out_tensor) {
  // The Java side checks all of this first; these are backstops.
  char* base = buffer ? static_cast<char*>(jenv->GetDirectBufferAddress(buffer)) : nullptr;
  jlong capacity = buffer ? jenv->GetDirectBufferCapacity(buffer) : -1;
  if (!base || capacity < 0) return invalid_argument("manypy: a direct ByteBuffer is required");
  if (!shape) return invalid_argument("manypy: a tensor needs a shape");
  std::vector<int64_t> dims = read_longs(jenv, shape);
  std::vector<int64_t> steps = read_longs(jenv, strides);
  if (strides && steps.size() != dims.size()) {
    return invalid_argument("manypy: strides and shape differ in length");
  }
  DLDataType dtype{static_cast<uint8_t>(dtype_code), static_cast<uint8_t>(dtype_bits), 1};
  const int32_t ndim = static_cast<int32_t>(dims.size());
  const int64_t* stride_data = strides ? steps.data() : nullptr;
  if (copy) {
    // Copied now (a read-only buffer): manypy's memory, nothing to keep alive.
    return manypy_tensor_new_from_buffer(base, static_cast<size_t>(capacity), dtype, ndim,
                                         dims.data(), stride_data, 1, nullptr, nullptr, out_tensor);
  }
  // Lent: the buffer stays reachable through a global reference until
  // manypy no longer needs its memory (after the last reference and value,
  // possibly in an interpreter that kept the tensor).
  jobject keep_alive = nullptr;
  if (manypy_status* status = manypy_jni::new_global_ref(jenv, buffer, &keep_alive)) return status;
  // On failure manypy calls the release (deleting the reference) at once.
  return manypy_tensor_new_from_buffer(base, static_cast<size_t>(capacity), dtype, ndim,
                                       dims.data(), stride_data, 0, manypy_jni::delete_global_ref,
                                       keep_alive, out_tensor);
}

jlongArray manypy_jni_tensor_layout(JNIEnv* jenv, const manypy_tensor* tensor) {
  const DLTensor* t = manypy_tensor_dl_tensor(tensor);
  if (!t) return nullptr;
  std::vector<jlong> layout = {t->dtype.code, t->dtype.bits, t->dtype.lanes, t->ndim};
  for (int i = 0; i < t->ndim; ++i) layout.push_back(t->shape[i]);
  std::vector<jlong> strides(static_cast<size_t>(t->ndim));
  int64_t step = 1;
  for (int i = t->ndim - 1; i >= 0; --i) {
    strides[static_cast<size_t>(i)] = t->strides ? t->strides[i] : step;
    step *= t->shape[i];
  }
  layout.insert(layout.end(), strides.begin(), strides.end());
  jlongArray array = jenv->NewLongArray(static_cast<jsize>(layout.size()));
  if (array) jenv->SetLongArrayRegion(array, 0, static_cast<jsize>(layout.size()), layout.data());
  return array;
}

jobject manypy_jni_tensor_buffer(JNIEnv* jenv, const manypy_tensor* tensor, int64_t byte_size) {
  const DLTensor* t = manypy_tensor_dl_tensor(tensor);
  if (!t || !t->data || byte_size <= 0) {
    manypy_jni::throw_java(jenv, "java/lang/IllegalArgumentException",
                           "manypy: an empty tensor has no buffer");
    return nullptr;
  }
  return jenv->NewDirectByteBuffer(static_cast<char*>(t->data) + t->byte_offset, byte_size);
}
