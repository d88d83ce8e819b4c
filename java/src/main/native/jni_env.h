/* The JVM side of the glue: the JavaVM, JNIEnv for callback threads, and the
 * Java methods callbacks are dispatched to (org.manypy.CallbackDispatch). */
#ifndef MANYPY_JNI_ENV_H
#define MANYPY_JNI_ENV_H

#include <jni.h>

#include "manypy.h"

namespace manypy_jni {

/* The JNIEnv of the calling thread. A thread the JVM does not know (a
 * library or torch thread) is attached as a daemon on first use and
 * detached when it exits. nullptr if the JVM refuses (it is shutting down):
 * the callback is then skipped. */
JNIEnv* callback_env();

/* org.manypy.CallbackDispatch and its static methods, resolved at load. */
struct Dispatch {
  jclass type;
  jmethodID op_event;    /* (Object, boolean, byte[], long, long, int, long, long, byte[], byte[],
                            long[])V */
  jmethodID api_usage;   /* (Object, byte[])V */
  jmethodID export_hook; /* (Object)J */
  jmethodID verify_archive;     /* (Object, byte[], byte[])Z */
  jmethodID call_done;          /* (Object, long, long)V: an asynchronous call's outcome */
  jmethodID call_lost;          /* (Object, Throwable)V: what escaped call_done */
  jmethodID interpreter_failed; /* (Object, int, long)V: a background start failed */
};
const Dispatch& dispatch();

/* Deletes a JNI global reference from any thread: the free_user_data and
 * release callbacks of everything the glue registers. */
void delete_global_ref(void* ref);

/* A JNI global reference to `object` in *out, or, when the JVM has none
 * left, a MANYPY_ERR_RESOURCE_EXHAUSTED status (the JVM's pending
 * OutOfMemoryError is cleared: the status reports it). */
manypy_status* new_global_ref(JNIEnv* env, jobject object, jobject* out);

/* Raises a Java exception of class `class_name` (e.g.
 * "java/lang/IllegalArgumentException") for the glue's caller to see when the
 * native method returns. Always returns false, for `return throw_java(...)`. */
bool throw_java(JNIEnv* env, const char* class_name, const char* message);

/* A backstop after every call into Java: CallbackDispatch catches every
 * Throwable itself, but an Error raised before its try block (a stack
 * overflow, out of memory) must not stay pending in native code. */
void clear_pending_exception(JNIEnv* env);

}  // namespace manypy_jni

#endif
