// The JavaVM, thread attachment for callbacks, and JNI_OnLoad.
#include "jni_env.h"

#include <cstdio>

namespace manypy_jni {
namespace {

JavaVM* g_vm = nullptr;
Dispatch g_dispatch{};

// Detaches, when the thread exits, a thread this glue attached. Threads the
// JVM started (or that attached themselves) are never detached here.
struct AttachedThread {
  bool attached = false;
  ~AttachedThread() {
    if (attached && g_vm) g_vm->DetachCurrentThread();
  }
};
thread_local AttachedThread t_attached;

}  // namespace

JNIEnv* callback_env() {
  if (!g_vm) return nullptr;
  JNIEnv* env = nullptr;
  jint got = g_vm->GetEnv(reinterpret_cast<void**>(&env), JNI_VERSION_1_8);
  if (got == JNI_OK) return env;
  if (got != JNI_EDETACHED) return nullptr;
  JavaVMAttachArgs args{JNI_VERSION_1_8, const_cast<char*>("manypy-native"), nullptr};
  // As a daemon: an attached library thread must not keep the JVM from
  // exiting.
  if (g_vm->AttachCurrentThreadAsDaemon(reinterpret_cast<void**>(&env), &args) != JNI_OK) {
    return nullptr;
  }
  t_attached.attached = true;
  return env;
}

const Dispatch& dispatch() { return g_dispatch; }

void delete_global_ref(void* ref) {
  if (!ref) return;
  if (JNIEnv* env = callback_env()) env->DeleteGlobalRef(static_cast<jobject>(ref));
}

manypy_status* new_global_ref(JNIEnv* env, jobject object, jobject* out) {
  *out = env->NewGlobalRef(object);
  if (*out) return nullptr;
  env->ExceptionClear();
  return manypy_status_new(MANYPY_ERR_RESOURCE_EXHAUSTED,
                           "manypy: the JVM has no JNI global reference left");
}

bool throw_java(JNIEnv* env, const char* class_name, const char* message) {
  jclass type = env->FindClass(class_name);
  if (type) env->ThrowNew(type, message);  // else FindClass left its own error pending
  return false;
}

void clear_pending_exception(JNIEnv* env) {
  if (!env->ExceptionCheck()) return;
  std::fprintf(stderr, "manypy: a Java callback raised an error it did not catch:\n");
  env->ExceptionDescribe();  // prints and clears
  env->ExceptionClear();
}

}  // namespace manypy_jni

extern "C" JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM* vm, void*) {
  using manypy_jni::g_dispatch;
  JNIEnv* env = nullptr;
  if (vm->GetEnv(reinterpret_cast<void**>(&env), JNI_VERSION_1_8) != JNI_OK) return JNI_ERR;
  // FindClass here uses the class loader that loaded this library: the jar's.
  jclass type = env->FindClass("org/manypy/CallbackDispatch");
  if (!type) return JNI_ERR;  // NoClassDefFoundError stays pending for the loader
  g_dispatch.type = static_cast<jclass>(env->NewGlobalRef(type));
  g_dispatch.op_event =
      env->GetStaticMethodID(type, "opEvent", "(Ljava/lang/Object;Z[BJJIJJ[B[B[J)V");
  g_dispatch.api_usage = env->GetStaticMethodID(type, "apiUsage", "(Ljava/lang/Object;[B)V");
  g_dispatch.export_hook = env->GetStaticMethodID(type, "exportHook", "(Ljava/lang/Object;)J");
  g_dispatch.verify_archive =
      env->GetStaticMethodID(type, "verifyArchive", "(Ljava/lang/Object;[B[B)Z");
  g_dispatch.call_done = env->GetStaticMethodID(type, "callDone", "(Ljava/lang/Object;JJ)V");
  g_dispatch.call_lost =
      env->GetStaticMethodID(type, "callLost", "(Ljava/lang/Object;Ljava/lang/Throwable;)V");
  g_dispatch.interpreter_failed =
      env->GetStaticMethodID(type, "interpreterFailed", "(Ljava/lang/Object;IJ)V");
  if (!g_dispatch.op_event || !g_dispatch.api_usage || !g_dispatch.export_hook ||
      !g_dispatch.verify_archive || !g_dispatch.call_done || !g_dispatch.call_lost ||
      !g_dispatch.interpreter_failed) {
    return JNI_ERR;
  }
  manypy_jni::g_vm = vm;
  return JNI_VERSION_1_8;
}
