// Tensors between Java and manypy without copying: direct ByteBuffers in,
// DLPack tensors out (wrapped in a reference-counted holder).
#include <atomic>
#include <new>
#include <vector>

#include "jni_env.h"
#include "jni_glue.h"

struct manypy_jni_tensor {
  std::atomic<int> refs{1};
  DLManagedTensor* managed = nullptr;
};

namespace {

void unref(manypy_jni_tensor* tensor) {
  if (tensor->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  if (tensor->managed->deleter) tensor->managed->deleter(tensor->managed);
  delete tensor;
}

using manypy_jni::throw_java;

bool throw_illegal_argument(JNIEnv* jenv, const char* message) {
  return throw_java(jenv, "java/lang/IllegalArgumentException", message);
}

bool throw_out_of_memory(JNIEnv* jenv) {
  return throw_java(jenv, "java/lang/OutOfMemoryError", "manypy: native memory exhausted");
}

bool read_longs(JNIEnv* jenv, jlongArray array, std::vector<int64_t>* out) {
  jsize length = jenv->GetArrayLength(array);
  out->resize(static_cast<size_t>(length));
  if (length) jenv->GetLongArrayRegion(array, 0, length, reinterpret_cast<jlong*>(out->data()));
  return !jenv->ExceptionCheck();
}

}  // namespace

manypy_status* manypy_jni_tensor_from_direct_buffer(JNIEnv* jenv, jobject buffer,
                                                    int64_t byte_offset, int dtype_code,
                                                    int dtype_bits, jlongArray shape,
                                                    jlongArray strides,
                                                    manypy_value** out_value) {
  // The Java side checks all of this first; these are backstops that throw.
  char* base = buffer ? static_cast<char*>(jenv->GetDirectBufferAddress(buffer)) : nullptr;
  jlong capacity = buffer ? jenv->GetDirectBufferCapacity(buffer) : -1;
  if (!base || capacity < 0) {
    throw_illegal_argument(jenv, "manypy: a direct ByteBuffer is required");
    return nullptr;
  }
  if (byte_offset < 0 || byte_offset > capacity || !shape) {
    throw_illegal_argument(jenv, "manypy: tensor offset outside its buffer, or no shape");
    return nullptr;
  }
  std::vector<int64_t> dims, steps;
  if (!read_longs(jenv, shape, &dims)) return nullptr;
  if (strides) {
    if (!read_longs(jenv, strides, &steps)) return nullptr;
    if (steps.size() != dims.size()) {
      throw_illegal_argument(jenv, "manypy: strides and shape differ in length");
      return nullptr;
    }
  }
  jobject keep_alive = jenv->NewGlobalRef(buffer);
  if (!keep_alive) return nullptr;  // OutOfMemoryError pending
  DLDataType dtype{static_cast<uint8_t>(dtype_code), static_cast<uint8_t>(dtype_bits), 1};
  // On failure manypy calls the release (deleting the reference) at once.
  return manypy_value_new_tensor_from_buffer(
      base + byte_offset, static_cast<size_t>(capacity - byte_offset), dtype,
      static_cast<int32_t>(dims.size()), dims.data(), strides ? steps.data() : nullptr,
      /*copy=*/0, manypy_jni::delete_global_ref, keep_alive, out_value);
}

manypy_status* manypy_jni_tensor_of_value(JNIEnv* jenv, const manypy_value* value,
                                          manypy_jni_tensor** out_tensor) {
  DLManagedTensor* managed = nullptr;
  if (manypy_status* status = manypy_value_get_tensor(value, &managed)) return status;
  auto* tensor = new (std::nothrow) manypy_jni_tensor;
  if (!tensor) {
    managed->deleter(managed);
    throw_out_of_memory(jenv);
    return nullptr;
  }
  tensor->managed = managed;
  *out_tensor = tensor;
  return nullptr;
}

jlongArray manypy_jni_tensor_layout(JNIEnv* jenv, const manypy_jni_tensor* tensor) {
  const DLTensor& t = tensor->managed->dl_tensor;
  std::vector<jlong> layout = {t.dtype.code, t.dtype.bits, t.dtype.lanes, t.ndim};
  for (int i = 0; i < t.ndim; ++i) layout.push_back(t.shape[i]);
  std::vector<jlong> strides(static_cast<size_t>(t.ndim));
  int64_t step = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    strides[static_cast<size_t>(i)] = t.strides ? t.strides[i] : step;
    step *= t.shape[i];
  }
  layout.insert(layout.end(), strides.begin(), strides.end());
  jlongArray array = jenv->NewLongArray(static_cast<jsize>(layout.size()));
  if (array) jenv->SetLongArrayRegion(array, 0, static_cast<jsize>(layout.size()), layout.data());
  return array;
}

jobject manypy_jni_tensor_buffer(JNIEnv* jenv, manypy_jni_tensor* tensor, int64_t byte_size) {
  const DLTensor& t = tensor->managed->dl_tensor;
  if (!t.data || byte_size <= 0) {
    throw_illegal_argument(jenv, "manypy: an empty tensor has no buffer");
    return nullptr;
  }
  return jenv->NewDirectByteBuffer(static_cast<char*>(t.data) + t.byte_offset, byte_size);
}

manypy_status* manypy_jni_tensor_to_value(JNIEnv* jenv, manypy_jni_tensor* tensor,
                                          manypy_value** out_value) {
  if (!tensor) return manypy_value_new_tensor(nullptr, out_value);  // the C API's error
  auto* view = new (std::nothrow) DLManagedTensor;
  if (!view) {
    throw_out_of_memory(jenv);
    return nullptr;
  }
  // Same layout and memory as the holder's tensor; the shape and strides
  // arrays stay valid because the view holds a reference on the holder.
  view->dl_tensor = tensor->managed->dl_tensor;
  view->manager_ctx = tensor;
  view->deleter = [](DLManagedTensor* self) {
    unref(static_cast<manypy_jni_tensor*>(self->manager_ctx));
    delete self;
  };
  tensor->refs.fetch_add(1, std::memory_order_relaxed);
  // manypy runs view->deleter exactly once, at once if this fails.
  return manypy_value_new_tensor(view, out_value);
}

void manypy_jni_tensor_release(manypy_jni_tensor* tensor) {
  if (tensor) unref(tensor);
}
