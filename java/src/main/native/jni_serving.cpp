// The serving lifecycle (manypy.h, since 0.3): a pool's stats and request
// metrics as Java arrays, and the callback told of interpreters that fail to
// start in the background, held by a JNI global reference until manypy
// releases it.
#include <atomic>
#include <cstdint>
#include <cstring>

#include "jni_env.h"
#include "jni_glue.h"

namespace {

using manypy_jni::callback_env;
using manypy_jni::clear_pending_exception;
using manypy_jni::dispatch;

// Local references the trampoline may create.
constexpr jint kLocalFrame = 16;

manypy_status* invalid_argument(const char* message) {
  return manypy_status_new(MANYPY_ERR_INVALID_ARGUMENT, message);
}

// Runs on a manypy thread: a new interpreter's home thread, the thread that
// starts a serve-early pool's interpreters, or a growth thread. `callback`
// is the global reference the setter made (alive for as long as manypy
// calls this: manypy releases it only once the pool and options holding it
// are gone); `why` is borrowed for the call. Nothing of Java's escapes:
// CallbackDispatch catches every Throwable, and the backstop below clears
// what an Error raised before its try block would leave pending.
void interpreter_failed(void* callback, int32_t interpreter, const manypy_status* why) {
  JNIEnv* env = callback_env();
  if (!env) return;  // the JVM is shutting down
  if (env->PushLocalFrame(kLocalFrame) != JNI_OK) {
    clear_pending_exception(env);  // its OutOfMemoryError
    return;
  }
  env->CallStaticVoidMethod(dispatch().type, dispatch().interpreter_failed,
                            static_cast<jobject>(callback), static_cast<jint>(interpreter),
                            static_cast<jlong>(reinterpret_cast<intptr_t>(why)));
  clear_pending_exception(env);
  env->PopLocalFrame(nullptr);
}

// Interpreter-failed callbacks held: one per global reference the setter
// made, until manypy releases it.
std::atomic<int64_t> g_failed_callbacks_held{0};

// The free_user_data of the setter: on whatever thread lets go of the pool
// last (a Java thread closing its last handle, the Cleaner's, a manypy
// thread completing its last asynchronous call), attached as a daemon if
// the JVM does not know it. During the JVM's shutdown the reference is left
// to the JVM (delete_global_ref skips it); it is counted as released.
void release_failed_callback(void* ref) {
  manypy_jni::delete_global_ref(ref);
  g_failed_callbacks_held.fetch_sub(1);
}

// Copies `count` uint64_t counts into `array` from `at` on, and returns the
// next position. Counts fit in a jlong (they would take centuries to pass
// 2^63).
jsize put_counts(JNIEnv* jenv, jlongArray array, jsize at, const uint64_t* counts, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const jlong value = static_cast<jlong>(counts[i]);
    jenv->SetLongArrayRegion(array, at++, 1, &value);
  }
  return at;
}

}  // namespace

manypy_status* manypy_jni_pool_get_stats(JNIEnv* jenv, const manypy_pool* pool, jlongArray out) {
  if (!out || jenv->GetArrayLength(out) < MANYPY_JNI_POOL_STATS_LENGTH) {
    return invalid_argument(
        "manypy: pool stats need an array of MANYPY_JNI_POOL_STATS_LENGTH longs");
  }
  manypy_pool_stats stats;
  std::memset(&stats, 0, sizeof stats);
  stats.struct_size = sizeof stats;
  if (manypy_status* status = manypy_pool_get_stats(pool, &stats)) return status;
  // No allocation here (nothing C++ may throw through JNI).
  jlong values[MANYPY_JNI_POOL_STATS_LENGTH] = {
      static_cast<jlong>(stats.draining),  static_cast<jlong>(stats.interpreters),
      static_cast<jlong>(stats.starting),  static_cast<jlong>(stats.ready),
      static_cast<jlong>(stats.busy),      static_cast<jlong>(stats.broken),
      static_cast<jlong>(stats.in_flight), static_cast<jlong>(stats.queued)};
  for (int c = 0; c < MANYPY_CODE_SLOTS; ++c)
    values[8 + c] = static_cast<jlong>(stats.completed[c]);
  values[8 + MANYPY_CODE_SLOTS] = static_cast<jlong>(stats.lost);
  jenv->SetLongArrayRegion(out, 0, MANYPY_JNI_POOL_STATS_LENGTH, values);
  return nullptr;
}

manypy_status* manypy_jni_pool_options_set_on_interpreter_failed(JNIEnv* jenv,
                                                                 manypy_pool_options* options,
                                                                 jobject callback) {
  if (!callback) {
    return manypy_pool_options_set_on_interpreter_failed(options, nullptr, nullptr, nullptr);
  }
  jobject ref = nullptr;
  if (manypy_status* status = manypy_jni::new_global_ref(jenv, callback, &ref)) return status;
  g_failed_callbacks_held.fetch_add(1);
  // manypy releases the reference exactly once: when the last pool or
  // options holding the callback let go, when it is replaced, or at once if
  // this fails.
  return manypy_pool_options_set_on_interpreter_failed(options, interpreter_failed, ref,
                                                       release_failed_callback);
}

int64_t manypy_jni_interpreter_failed_callbacks_held(void) {
  return g_failed_callbacks_held.load();
}

jbyteArray manypy_jni_request_metrics_model(JNIEnv* jenv, const manypy_request_metrics* metrics,
                                            size_t index) {
  // Stepped by the library's struct_size, not this glue's sizeof.
  return manypy_jni_utf8_bytes(jenv, manypy_request_metrics_at(metrics, index)->model);
}

jlongArray manypy_jni_request_metrics_counts(JNIEnv* jenv, const manypy_request_metrics* metrics,
                                             size_t index) {
  const manypy_request_metrics& m = *manypy_request_metrics_at(metrics, index);
  const jsize length = static_cast<jsize>(3 + MANYPY_CODE_SLOTS + 2 * m.num_buckets);
  jlongArray array = jenv->NewLongArray(length);
  if (!array) return nullptr;  // OutOfMemoryError pending for the caller
  const uint64_t head[3] = {m.num_buckets, m.request_count, m.queue_count};
  jsize at = put_counts(jenv, array, 0, head, 3);
  at = put_counts(jenv, array, at, m.completed, MANYPY_CODE_SLOTS);
  at = put_counts(jenv, array, at, m.request_buckets, m.num_buckets);
  put_counts(jenv, array, at, m.queue_buckets, m.num_buckets);
  return array;
}

jdoubleArray manypy_jni_request_metrics_seconds(JNIEnv* jenv, const manypy_request_metrics* metrics,
                                                size_t index) {
  const manypy_request_metrics& m = *manypy_request_metrics_at(metrics, index);
  jdoubleArray array = jenv->NewDoubleArray(static_cast<jsize>(2 + m.num_buckets));
  if (!array) return nullptr;  // OutOfMemoryError pending for the caller
  const jdouble sums[2] = {m.request_seconds_sum, m.queue_seconds_sum};
  jenv->SetDoubleArrayRegion(array, 0, 2, sums);
  if (m.num_buckets > 0) {
    jenv->SetDoubleArrayRegion(array, 2, static_cast<jsize>(m.num_buckets), m.bucket_bounds);
  }
  return array;
}
