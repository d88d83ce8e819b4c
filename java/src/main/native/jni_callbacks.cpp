// Java objects as manypy callbacks: operator callbacks, the API usage
// handler, the export hook and archive verifiers. Each trampoline runs on
// whatever thread manypy calls it from, inside a local frame (a library
// thread never returns to Java, so its local references must not pile up),
// and clears any Java exception before returning to manypy.
#include <atomic>
#include <vector>

#include "jni_env.h"
#include "jni_glue.h"

namespace {

using manypy_jni::callback_env;
using manypy_jni::clear_pending_exception;
using manypy_jni::dispatch;

// Local references one trampoline may create.
constexpr jint kLocalFrame = 16;

jbyteArray utf8_or_empty(JNIEnv* env, const char* utf8) {
  return manypy_jni_utf8_bytes(env, utf8 ? utf8 : "");
}

// Inputs as {kind, dtype code, bits, lanes, ndim, shape...} per input.
jlongArray encode_inputs(JNIEnv* env, const manypy_op_event* event) {
  if (event->num_inputs == 0) return nullptr;
  std::vector<jlong> out;
  for (size_t i = 0; i < event->num_inputs; ++i) {
    // Stepped by the library's struct_size, not this glue's sizeof.
    const manypy_op_input& in = *manypy_op_event_input(event, i);
    out.insert(out.end(), {in.kind, in.dtype.code, in.dtype.bits, in.dtype.lanes, in.ndim});
    for (int32_t d = 0; d < in.ndim; ++d) out.push_back(in.shape[d]);
  }
  jlongArray array = env->NewLongArray(static_cast<jsize>(out.size()));
  if (array) env->SetLongArrayRegion(array, 0, static_cast<jsize>(out.size()), out.data());
  return array;
}

void op_event(const manypy_op_event* event, void* target, jboolean enter) {
  JNIEnv* env = callback_env();
  if (!env || env->PushLocalFrame(kLocalFrame) != JNI_OK) return;
  jbyteArray name = utf8_or_empty(env, event->name);
  jbyteArray model = utf8_or_empty(env, event->model_id);
  jbyteArray request = utf8_or_empty(env, event->request_id);
  jlongArray inputs = encode_inputs(env, event);
  if (!env->ExceptionCheck()) {
    env->CallStaticVoidMethod(
        dispatch().type, dispatch().op_event, static_cast<jobject>(target), enter, name,
        static_cast<jlong>(event->sequence_number), static_cast<jlong>(event->thread_id),
        static_cast<jint>(event->interpreter), static_cast<jlong>(event->start_ns),
        static_cast<jlong>(event->end_ns), model, request, inputs);
  }
  clear_pending_exception(env);
  env->PopLocalFrame(nullptr);
}

void op_enter(const manypy_op_event* event, void* target) { op_event(event, target, JNI_TRUE); }
void op_exit(const manypy_op_event* event, void* target) { op_event(event, target, JNI_FALSE); }

void api_usage(const char* key, void* handler) {
  JNIEnv* env = callback_env();
  if (!env || env->PushLocalFrame(kLocalFrame) != JNI_OK) return;
  jbyteArray bytes = utf8_or_empty(env, key);
  if (!env->ExceptionCheck()) {
    env->CallStaticVoidMethod(dispatch().type, dispatch().api_usage, static_cast<jobject>(handler),
                              bytes);
  }
  clear_pending_exception(env);
  env->PopLocalFrame(nullptr);
}

manypy_value* export_hook(void* hook) {
  JNIEnv* env = callback_env();
  if (!env || env->PushLocalFrame(kLocalFrame) != JNI_OK) return nullptr;
  jlong files = env->CallStaticLongMethod(dispatch().type, dispatch().export_hook,
                                          static_cast<jobject>(hook));
  if (env->ExceptionCheck()) files = 0;  // dispatch returns 0 after catching
  clear_pending_exception(env);
  env->PopLocalFrame(nullptr);
  return reinterpret_cast<manypy_value*>(static_cast<intptr_t>(files));
}

// Verifiers held: one per global reference set_verifier made, until its
// release.
std::atomic<int64_t> g_verifiers_held{0};

int verify_archive(const uint8_t* sha256, const char* origin, void* verifier) {
  JNIEnv* env = callback_env();
  if (!env || env->PushLocalFrame(kLocalFrame) != JNI_OK) return 0;  // refused
  jbyteArray digest = env->NewByteArray(32);
  if (digest) env->SetByteArrayRegion(digest, 0, 32, reinterpret_cast<const jbyte*>(sha256));
  jbyteArray path = utf8_or_empty(env, origin);
  jboolean trusted = JNI_FALSE;
  if (!env->ExceptionCheck()) {
    trusted = env->CallStaticBooleanMethod(dispatch().type, dispatch().verify_archive,
                                           static_cast<jobject>(verifier), digest, path);
  }
  if (env->ExceptionCheck()) trusted = JNI_FALSE;  // dispatch returns false after catching
  clear_pending_exception(env);
  env->PopLocalFrame(nullptr);
  return trusted ? 1 : 0;
}

void release_verifier(void* ref) {
  manypy_jni::delete_global_ref(ref);
  g_verifiers_held.fetch_sub(1);
}

}  // namespace

manypy_status* manypy_jni_add_op_callbacks(JNIEnv* jenv, jobject target, int with_enter,
                                           int with_exit, double sampling_probability,
                                           int needs_inputs, int64_t* out_id) {
  jobject ref = nullptr;
  if (target) {
    if (manypy_status* status = manypy_jni::new_global_ref(jenv, target, &ref)) return status;
  }
  uint64_t id = 0;
  // manypy frees the reference once: on removal, or at once on failure.
  manypy_status* status = manypy_add_op_callbacks(
      with_enter ? op_enter : nullptr, with_exit ? op_exit : nullptr, ref,
      manypy_jni::delete_global_ref, sampling_probability, needs_inputs, &id);
  if (!status) *out_id = static_cast<int64_t>(id);
  return status;
}

manypy_status* manypy_jni_remove_op_callbacks(int64_t id) {
  return manypy_remove_op_callbacks(static_cast<uint64_t>(id));
}

manypy_status* manypy_jni_set_api_usage_handler(JNIEnv* jenv, jobject handler) {
  if (!handler) return manypy_set_api_usage_handler(nullptr, nullptr, nullptr);
  jobject ref = nullptr;
  if (manypy_status* status = manypy_jni::new_global_ref(jenv, handler, &ref)) return status;
  return manypy_set_api_usage_handler(api_usage, ref, manypy_jni::delete_global_ref);
}

manypy_status* manypy_jni_set_export_hook(JNIEnv* jenv, jobject hook) {
  if (!hook) return manypy_set_export_hook(nullptr, nullptr, nullptr);
  jobject ref = nullptr;
  if (manypy_status* status = manypy_jni::new_global_ref(jenv, hook, &ref)) return status;
  return manypy_set_export_hook(export_hook, ref, manypy_jni::delete_global_ref);
}

manypy_status* manypy_jni_archive_trust_set_verifier(JNIEnv* jenv, manypy_archive_trust* trust,
                                                     jobject verifier) {
  if (!verifier) return manypy_archive_trust_set_verifier(trust, nullptr, nullptr, nullptr);
  jobject ref = nullptr;
  if (manypy_status* status = manypy_jni::new_global_ref(jenv, verifier, &ref)) return status;
  g_verifiers_held.fetch_add(1);
  // manypy releases the reference once: when the last copy of the trust
  // goes, or at once on failure.
  return manypy_archive_trust_set_verifier(trust, verify_archive, ref, release_verifier);
}

int64_t manypy_jni_archive_verifiers_held(void) { return g_verifiers_held.load(); }
