/* Hand-written JNI glue for what SWIG cannot map from manypy.h: Java byte
 * arrays for UTF-8 strings, direct ByteBuffers as tensors, tensors handed
 * out by manypy, and Java objects as callbacks. SWIG wraps the functions
 * below (manypy.i %includes this header) into org.manypy.internal.ManypyNative;
 * the ones under `#ifndef SWIG` are for the generated wrapper only.
 *
 * Every function is safe to call from any Java thread. None throws a Java
 * exception except as stated; failures come back as a manypy_status*. */
#ifndef MANYPY_JNI_GLUE_H
#define MANYPY_JNI_GLUE_H

#include <jni.h>
#include <stdint.h>

#include "manypy.h"

#ifndef SWIG
/* Throws IllegalArgumentException and returns false unless `array` is a
 * non-null array of length >= 1 (an out-parameter). */
bool manypy_jni_check_out_array(JNIEnv* jenv, jarray array);
/* The bytes of a NUL-terminated UTF-8 string as a new byte[] (null for NULL). */
jbyteArray manypy_jni_utf8_bytes(JNIEnv* jenv, const char* utf8);
#endif

/* MANYPY_VERSION_NUMBER of the header this glue was compiled against. */
int32_t manypy_jni_glue_version(void);

/* ---- values ------------------------------------------------------------- */

/* The UTF-8 bytes of a string value (may contain NUL), or null if `value`
 * is not a string. */
jbyteArray manypy_jni_value_string(JNIEnv* jenv, const manypy_value* value);
/* The bytes of a bytes value, or null if `value` is not bytes. */
jbyteArray manypy_jni_value_bytes(JNIEnv* jenv, const manypy_value* value);
/* The UTF-8 key of entry `index` of a dict value, all of it (a key from
 * Python may contain NUL), or null. */
jbyteArray manypy_jni_value_dict_key(JNIEnv* jenv, const manypy_value* value, size_t index);

/* ---- tensors ------------------------------------------------------------ */
/* A Java Tensor holds one reference to a manypy_tensor (manypy.h): made here
 * over a direct ByteBuffer, or by manypy_tensor_from_value for a result, and
 * passed to calls with manypy_value_new_tensor_ref (no copy, no new DLPack
 * wrapper per call). Released with manypy_tensor_release. */

/* A tensor over a direct ByteBuffer's memory from its position 0 on
 * (`strides` in elements; null: C-contiguous). `copy` 0 lends the memory
 * (zero copy): the buffer is held by a JNI global reference until manypy no
 * longer needs it (possibly after the last reference, if a model kept the
 * tensor). `copy` 1 copies the bytes now (a read-only buffer, which a model
 * must not be lent). Bad arguments are a MANYPY_ERR_INVALID_ARGUMENT status;
 * a layout the buffer cannot hold, MANYPY_ERR_BAD_TENSOR. */
manypy_status* manypy_jni_tensor_new_from_direct_buffer(JNIEnv* jenv, jobject buffer,
                                                        int dtype_code, int dtype_bits,
                                                        jlongArray shape, jlongArray strides,
                                                        int copy, manypy_tensor** out_tensor);

/* {dtype code, bits, lanes, ndim, shape[ndim]..., strides[ndim]...}, with
 * strides (in elements) filled in for a C-contiguous tensor; null for NULL. */
jlongArray manypy_jni_tensor_layout(JNIEnv* jenv, const manypy_tensor* tensor);
/* A direct ByteBuffer over `byte_size` bytes of the tensor's data (from its
 * first element), valid while the caller's reference lives. Throws
 * IllegalArgumentException for a tensor without data. */
jobject manypy_jni_tensor_buffer(JNIEnv* jenv, const manypy_tensor* tensor, int64_t byte_size);

/* ---- callbacks into Java ------------------------------------------------ */
/* Each registers a Java object through a JNI global reference, released
 * exactly once when the registration ends. Calls reach Java through
 * org.manypy.CallbackDispatch on whatever thread runs them: a thread the JVM
 * does not know is attached (as a daemon) on first use and detached when it
 * exits. A Java exception never propagates into manypy. */

/* manypy_add_op_callbacks with `target`'s onEnter (if with_enter) and
 * onExit (if with_exit). */
manypy_status* manypy_jni_add_op_callbacks(JNIEnv* jenv, jobject target, int with_enter,
                                           int with_exit, double sampling_probability,
                                           int needs_inputs, int64_t* out_id);
manypy_status* manypy_jni_remove_op_callbacks(int64_t id);
/* `handler` null removes the handler. */
manypy_status* manypy_jni_set_api_usage_handler(JNIEnv* jenv, jobject handler);
/* `hook` null removes the hook. */
manypy_status* manypy_jni_set_export_hook(JNIEnv* jenv, jobject hook);
/* manypy_archive_trust_set_verifier with `verifier`'s trusts(byte[], String)
 * (org.manypy.ArchiveVerifier), which gets a copy of the digest; null
 * removes the verifier. The trust and its copies (pool options, pools)
 * share the global reference. */
manypy_status* manypy_jni_archive_trust_set_verifier(JNIEnv* jenv, manypy_archive_trust* trust,
                                                     jobject verifier);
/* How many verifiers the glue holds (global references not yet released):
 * each set_verifier adds one, released exactly once when the last copy of
 * its trust goes. For the tests. */
int64_t manypy_jni_archive_verifiers_held(void);

/* ---- asynchronous calls ------------------------------------------------- */
/* manypy_object_call_async, manypy_script_call_async, manypy_aoti_call_async
 * and manypy_batcher_call_async with `completion` (an org.manypy.AsyncCall)
 * as the callback, held by a JNI global reference until the call completes.
 * The completion runs on a manypy thread, attached to the JVM once as a
 * daemon (jni_env.h); it calls CallbackDispatch.callDone(completion, result,
 * status), which reads the outcome (borrowed), and then frees the outcome
 * and the reference itself, whatever Java did: nothing leaks and nothing is
 * freed twice. A Throwable that escapes callDone is handed to
 * CallbackDispatch.callLost, so the future still completes. A refused call
 * (a status returned) releases the reference at once: it never completes. */
manypy_status* manypy_jni_object_call_async(JNIEnv* jenv, manypy_object* object, const char* method,
                                            const manypy_value* args, const manypy_value* kwargs,
                                            const manypy_call_options* options, jobject completion);
manypy_status* manypy_jni_script_call_async(JNIEnv* jenv, manypy_script_module* module,
                                            const char* method, const manypy_value* args,
                                            const manypy_value* kwargs,
                                            const manypy_call_options* options, jobject completion);
manypy_status* manypy_jni_aoti_call_async(JNIEnv* jenv, manypy_aoti_module* module,
                                          const manypy_value* args, const manypy_value* kwargs,
                                          const manypy_call_options* options, jobject completion);
manypy_status* manypy_jni_batcher_call_async(JNIEnv* jenv, manypy_batcher* batcher,
                                             const manypy_value* args, const manypy_value* kwargs,
                                             const manypy_call_options* options,
                                             jobject completion);
/* Asynchronous calls accepted and not yet completed (their global
 * references not yet released). For the tests: every completion arrives. */
int64_t manypy_jni_async_calls_pending(void);

/* ---- profiler snapshots ------------------------------------------------- */
jbyteArray manypy_jni_profile_entry_model(JNIEnv* jenv, const manypy_profile_entry* entries,
                                          size_t index);
jbyteArray manypy_jni_profile_entry_op(JNIEnv* jenv, const manypy_profile_entry* entries,
                                       size_t index);
/* {count, total_ns, p50_ns, p99_ns} */
jlongArray manypy_jni_profile_entry_numbers(JNIEnv* jenv, const manypy_profile_entry* entries,
                                            size_t index);

/* ---- the serving lifecycle (since 0.3) ---------------------------------- */

/* How many longs manypy_jni_pool_get_stats fills. */
#define MANYPY_JNI_POOL_STATS_LENGTH (9 + MANYPY_CODE_SLOTS)

/* manypy_pool_get_stats (with this glue's struct_size) into `out`, which
 * must hold MANYPY_JNI_POOL_STATS_LENGTH longs: {draining, interpreters,
 * starting, ready, busy, broken, in_flight, queued, completed[0], ...,
 * completed[MANYPY_CODE_SLOTS - 1], lost}. A null or short array is a
 * MANYPY_ERR_INVALID_ARGUMENT status. */
manypy_status* manypy_jni_pool_get_stats(JNIEnv* jenv, const manypy_pool* pool, jlongArray out);

/* manypy_pool_options_set_on_interpreter_failed with a trampoline that calls
 * CallbackDispatch.interpreterFailed(callback, interpreter, status) on the
 * manypy thread that reports the failure (attached as a daemon, as for
 * every callback), the status borrowed for the call. `callback` (an
 * org.manypy.InterpreterFailedCallback) is held by a JNI global reference
 * that manypy releases exactly once (its free_user_data): when the last
 * pool or options holding it let go (a pool once its last handle, package,
 * object, batcher and call are gone), when it is replaced, or at once if
 * the setter fails. Every report until then reaches it. null removes the
 * callback. */
manypy_status* manypy_jni_pool_options_set_on_interpreter_failed(JNIEnv* jenv,
                                                                 manypy_pool_options* options,
                                                                 jobject callback);
/* How many interpreter-failed callbacks the glue holds (global references
 * manypy has not released yet). For the tests. */
int64_t manypy_jni_interpreter_failed_callbacks_held(void);

/* Entry `index` (< the count) of a manypy_pool_request_metrics array,
 * stepped by the library's struct_size: its model (UTF-8 bytes); its counts
 * {num_buckets, request_count, queue_count, completed[0], ...,
 * completed[MANYPY_CODE_SLOTS - 1], request_buckets[num_buckets]...,
 * queue_buckets[num_buckets]...}; and its seconds {request_seconds_sum,
 * queue_seconds_sum, bucket_bounds[num_buckets]...}. */
jbyteArray manypy_jni_request_metrics_model(JNIEnv* jenv, const manypy_request_metrics* metrics,
                                            size_t index);
jlongArray manypy_jni_request_metrics_counts(JNIEnv* jenv, const manypy_request_metrics* metrics,
                                             size_t index);
jdoubleArray manypy_jni_request_metrics_seconds(JNIEnv* jenv, const manypy_request_metrics* metrics,
                                                size_t index);

#endif /* MANYPY_JNI_GLUE_H */
