// Strings, bytes and profiler entries as Java byte arrays.
#include <cstring>

#include "jni_env.h"
#include "jni_glue.h"

namespace {

jbyteArray new_byte_array(JNIEnv* jenv, const void* data, size_t length) {
  if (length > INT32_MAX) {
    manypy_jni::throw_java(jenv, "java/lang/OutOfMemoryError",
                           "manypy: more than 2 GiB of bytes for one Java array");
    return nullptr;
  }
  jbyteArray array = jenv->NewByteArray(static_cast<jsize>(length));
  if (array && length) {
    jenv->SetByteArrayRegion(array, 0, static_cast<jsize>(length), static_cast<const jbyte*>(data));
  }
  return array;  // null with OutOfMemoryError pending if the JVM is out of heap
}

}  // namespace

bool manypy_jni_check_out_array(JNIEnv* jenv, jarray array) {
  if (array && jenv->GetArrayLength(array) >= 1) return true;
  return manypy_jni::throw_java(jenv, "java/lang/IllegalArgumentException",
                                "manypy: an out-parameter array of length >= 1 is required");
}

jbyteArray manypy_jni_utf8_bytes(JNIEnv* jenv, const char* utf8) {
  return utf8 ? new_byte_array(jenv, utf8, std::strlen(utf8)) : nullptr;
}

int32_t manypy_jni_glue_version(void) { return MANYPY_VERSION_NUMBER; }

namespace {

// The bytes a manypy_value_get_* accessor `get` reads (pointer and length),
// or null when the value is not of its kind.
template <typename Data, typename Get>
jbyteArray value_bytes(JNIEnv* jenv, const manypy_value* value, Get get) {
  Data data = nullptr;
  size_t length = 0;
  if (manypy_status* status = get(value, &data, &length)) {
    manypy_status_free(status);
    return nullptr;
  }
  return new_byte_array(jenv, data, length);
}

}  // namespace

jbyteArray manypy_jni_value_string(JNIEnv* jenv, const manypy_value* value) {
  return value_bytes<const char*>(jenv, value, manypy_value_get_string);
}

jbyteArray manypy_jni_value_bytes(JNIEnv* jenv, const manypy_value* value) {
  return value_bytes<const void*>(jenv, value, manypy_value_get_bytes);
}

jbyteArray manypy_jni_value_dict_key(JNIEnv* jenv, const manypy_value* value, size_t index) {
  // With its length: a key from Python may contain NUL.
  return value_bytes<const char*>(jenv, value,
                                  [index](const manypy_value* v, const char** key, size_t* length) {
                                    return manypy_value_dict_key(v, index, key, length);
                                  });
}

jbyteArray manypy_jni_profile_entry_model(JNIEnv* jenv, const manypy_profile_entry* entries,
                                          size_t index) {
  return manypy_jni_utf8_bytes(jenv, manypy_profile_entry_at(entries, index)->model_id);
}

jbyteArray manypy_jni_profile_entry_op(JNIEnv* jenv, const manypy_profile_entry* entries,
                                       size_t index) {
  return manypy_jni_utf8_bytes(jenv, manypy_profile_entry_at(entries, index)->op_name);
}

jlongArray manypy_jni_profile_entry_numbers(JNIEnv* jenv, const manypy_profile_entry* entries,
                                            size_t index) {
  // Stepped by the library's struct_size, not this glue's sizeof.
  const manypy_profile_entry& e = *manypy_profile_entry_at(entries, index);
  jlong numbers[4] = {static_cast<jlong>(e.count), e.total_ns, e.p50_ns, e.p99_ns};
  jlongArray array = jenv->NewLongArray(4);
  if (array) jenv->SetLongArrayRegion(array, 0, 4, numbers);
  return array;
}
