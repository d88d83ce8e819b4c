// Asynchronous calls: the trampoline manypy calls when a call completes, and
// the submissions that register a Java completion (an org.manypy.AsyncCall)
// for it. The trampoline runs on a manypy thread (an interpreter's home
// thread, manypy's completion thread, a host worker thread), which lives as
// long as the process: callback_env() attaches it to the JVM once, as a
// daemon, and it stays attached.
#include <atomic>
#include <cstdint>

#include "jni_env.h"
#include "jni_glue.h"

namespace {

using manypy_jni::callback_env;
using manypy_jni::dispatch;

// Calls accepted whose completion has not yet finished.
std::atomic<int64_t> g_pending{0};

void call_done(void* user_data, manypy_value* result, manypy_status* status) {
  auto completion = static_cast<jobject>(user_data);
  if (JNIEnv* env = callback_env()) {
    // Java reads the outcome without taking it: it is freed below in every
    // case, so an exception at any point in Java can neither leak it nor
    // free it twice.
    env->CallStaticVoidMethod(dispatch().type, dispatch().call_done, completion,
                              static_cast<jlong>(reinterpret_cast<intptr_t>(result)),
                              static_cast<jlong>(reinterpret_cast<intptr_t>(status)));
    if (jthrowable error = env->ExceptionOccurred()) {
      // callDone catches every Throwable; one escaped anyway (an Error
      // before its try block). The future must still complete.
      env->ExceptionClear();
      env->CallStaticVoidMethod(dispatch().type, dispatch().call_lost, completion, error);
      manypy_jni::clear_pending_exception(env);
      env->DeleteLocalRef(error);
    }
    env->DeleteGlobalRef(completion);
  }
  // No env: the JVM is shutting down, and nothing in it waits any more.
  manypy_value_free(result);
  manypy_status_free(status);
  g_pending.fetch_sub(1);
}

// Registers `completion` and runs `submit(call_done, reference)`.
template <typename Submit>
manypy_status* submit_async(JNIEnv* jenv, jobject completion, Submit submit) {
  if (!completion) {
    return manypy_status_new(MANYPY_ERR_INVALID_ARGUMENT, "manypy: no completion for the call");
  }
  jobject ref = nullptr;
  if (manypy_status* status = manypy_jni::new_global_ref(jenv, completion, &ref)) return status;
  g_pending.fetch_add(1);
  manypy_status* refused = submit(ref);
  if (refused) {
    // call_done never runs for a refused call.
    jenv->DeleteGlobalRef(ref);
    g_pending.fetch_sub(1);
  }
  return refused;
}

}  // namespace

manypy_status* manypy_jni_object_call_async(JNIEnv* jenv, manypy_object* object, const char* method,
                                            const manypy_value* args, const manypy_value* kwargs,
                                            const manypy_call_options* options,
                                            jobject completion) {
  return submit_async(jenv, completion, [&](jobject ref) {
    return manypy_object_call_async(object, method, args, kwargs, options, call_done, ref);
  });
}

manypy_status* manypy_jni_script_call_async(JNIEnv* jenv, manypy_script_module* module,
                                            const char* method, const manypy_value* args,
                                            const manypy_value* kwargs,
                                            const manypy_call_options* options,
                                            jobject completion) {
  return submit_async(jenv, completion, [&](jobject ref) {
    return manypy_script_call_async(module, method, args, kwargs, options, call_done, ref);
  });
}

manypy_status* manypy_jni_aoti_call_async(JNIEnv* jenv, manypy_aoti_module* module,
                                          const manypy_value* args, const manypy_value* kwargs,
                                          const manypy_call_options* options, jobject completion) {
  return submit_async(jenv, completion, [&](jobject ref) {
    return manypy_aoti_call_async(module, args, kwargs, options, call_done, ref);
  });
}

manypy_status* manypy_jni_batcher_call_async(JNIEnv* jenv, manypy_batcher* batcher,
                                             const manypy_value* args, const manypy_value* kwargs,
                                             const manypy_call_options* options,
                                             jobject completion) {
  return submit_async(jenv, completion, [&](jobject ref) {
    return manypy_batcher_call_async(batcher, args, kwargs, options, call_done, ref);
  });
}

int64_t manypy_jni_async_calls_pending(void) { return g_pending.load(); }
