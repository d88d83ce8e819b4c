/* SWIG interface over capi/include/manypy.h: generates the JNI layer of the
 * Java binding (org.manypy.internal.ManypyNative and ManypyNativeJNI).
 *
 * The generated classes are internal: users touch the hand-written API in
 * java/ (org.manypy). The mapping is deliberately thin and allocation-free:
 *  - every opaque handle (manypy_pool*, manypy_value*, ...) crosses as a Java
 *    long, and every `T** out_x` as a long[1] the call fills;
 *  - a returned manypy_status* is a long too (0 is success); the Java side
 *    reads it and turns it into a ManypyException;
 *  - strings cross as NUL-terminated UTF-8 byte arrays, encoded and decoded
 *    by org.manypy.internal.Utf8 with Java's real UTF-8 codec (JNI's own
 *    string functions speak "modified UTF-8", which mangles characters
 *    outside the BMP and NUL);
 *  - what SWIG cannot map (function pointers, Java buffers and arrays,
 *    DLPack structs) is wrapped by the hand-written glue in jni_glue.h.
 * Deadlines and cancellation need nothing special: manypy_cancel_token* is a
 * handle (long), nanoseconds are int64_t (long), and
 * manypy_call_options_set_timeout/_set_deadline/_set_cancel_token,
 * manypy_cancel_token_new/_cancel/_is_cancelled/_free and
 * manypy_monotonic_ns are wrapped as they are declared. So are the stop's
 * pool settings: manypy_pool_options_set_stop_grace (int64_t nanoseconds,
 * a long) and manypy_pool_check_interpreter (a status, a long), which
 * PoolOptions.stopGrace and Pool.checkInterpreter call.
 * Admission control and the batcher are wrapped as declared too
 * (manypy_pool_options_set_queue_limit, manypy_pool_queued/_in_flight,
 * manypy_batcher_options_*, manypy_batcher_new/_free/_call): size_t is a
 * long, a manypy_batcher** a long[1].
 * The serving lifecycle (since 0.3) is wrapped as declared where it can be:
 * manypy_pool_options_set_serve_early/_max_interpreters/_grow_after/_name,
 * manypy_pool_resize, manypy_pool_drain (its counts as long[1]),
 * manypy_pool_prometheus, manypy_pool_request_metrics (the array as a long,
 * read by the glue's accessors, freed by manypy_request_metrics_free) and
 * manypy_object_share. What takes a struct the caller fills or a C callback
 * goes through the glue: manypy_jni_pool_get_stats and
 * manypy_jni_pool_options_set_on_interpreter_failed.
 * AOTInductor packages on the host (since 0.3) are wrapped as declared
 * (manypy_aoti_load_file/_load_bytes with a trust handle, 0 for the host
 * trust; manypy_aoti_free, _call, _metadata; manypy_set_host_archive_trust;
 * manypy_archive_save_copy), except the asynchronous call, which the glue's
 * manypy_jni_aoti_call_async submits as it does manypy_script_call_async.
 */
%module ManypyNative

%include "stdint.i"
%include "enumsimple.swg"
%javaconst(1);

/* The wrapper is compiled as C++ into libmanypy_jni.so. */
%{
#include <stdint.h>
#include "manypy.h"
#include "jni_glue.h"
%}

/* ---- opaque handles cross as long --------------------------------------- */
%typemap(jstype) SWIGTYPE * "long"
%typemap(javain) SWIGTYPE * "$javainput"
%typemap(javaout) SWIGTYPE * { return $jnicall; }

/* T** out-parameters: a long[1] that receives the handle. */
%typemap(jni) SWIGTYPE **OUT_HANDLE "jlongArray"
%typemap(jtype) SWIGTYPE **OUT_HANDLE "long[]"
%typemap(jstype) SWIGTYPE **OUT_HANDLE "long[]"
%typemap(javain) SWIGTYPE **OUT_HANDLE "$javainput"
%typemap(in) SWIGTYPE **OUT_HANDLE ($*1_ltype temp = 0) {
  if (!manypy_jni_check_out_array(jenv, $input)) return $null;
  $1 = &temp;
}
%typemap(argout) SWIGTYPE **OUT_HANDLE {
  jlong handle_out = (jlong)(intptr_t)temp$argnum;
  jenv->SetLongArrayRegion($input, 0, 1, &handle_out);
}

%apply SWIGTYPE **OUT_HANDLE {
  manypy_value** out_value, manypy_value** out_result, manypy_value** out_list,
  manypy_value** out_bytes, manypy_value** out_text, manypy_value** out_json,
  const manypy_value** out_item, manypy_pool** out_pool,
  manypy_package** out_package, manypy_object** out_object,
  manypy_script_module** out_module, manypy_aoti_module** out_module,
  manypy_value** out_dict, manypy_profiler** out_profiler,
  manypy_profile_entry** out_entries, manypy_tensor** out_tensor,
  manypy_batcher** out_batcher, manypy_request_metrics** out_metrics
};

/* Scalar out-parameters: a one-element Java array. */
%define MANYPY_OUT_SCALAR(CTYPE, JNITYPE, JNIARRAY, JAVAARRAY, SETTER)
%typemap(jni) CTYPE *OUT_SCALAR "JNIARRAY"
%typemap(jtype) CTYPE *OUT_SCALAR "JAVAARRAY"
%typemap(jstype) CTYPE *OUT_SCALAR "JAVAARRAY"
%typemap(javain) CTYPE *OUT_SCALAR "$javainput"
%typemap(in) CTYPE *OUT_SCALAR (CTYPE temp = 0) {
  if (!manypy_jni_check_out_array(jenv, $input)) return $null;
  $1 = &temp;
}
%typemap(argout) CTYPE *OUT_SCALAR {
  JNITYPE scalar_out = (JNITYPE)temp$argnum;
  jenv->SETTER($input, 0, 1, &scalar_out);
}
%enddef
MANYPY_OUT_SCALAR(int, jint, jintArray, int[], SetIntArrayRegion)
MANYPY_OUT_SCALAR(int64_t, jlong, jlongArray, long[], SetLongArrayRegion)
MANYPY_OUT_SCALAR(size_t, jlong, jlongArray, long[], SetLongArrayRegion)
MANYPY_OUT_SCALAR(double, jdouble, jdoubleArray, double[], SetDoubleArrayRegion)
%apply int *OUT_SCALAR { int* out, int* out_has };
%apply int64_t *OUT_SCALAR { int64_t* out, int64_t* out_id };
%apply size_t *OUT_SCALAR { size_t* out_length, size_t* out_count, size_t* out_finished,
                            size_t* out_cancelled };
%apply double *OUT_SCALAR { double* out };

/* ---- strings: NUL-terminated UTF-8 byte arrays -------------------------- */
%typemap(jni) const char * "jbyteArray"
%typemap(jtype) const char * "byte[]"
%typemap(jstype) const char * "String"
%typemap(javain) const char * "org.manypy.internal.Utf8.cstring($javainput)"
%typemap(in) const char * {
  $1 = $input ? (char*)jenv->GetByteArrayElements($input, NULL) : NULL;
}
%typemap(freearg) const char * {
  if ($1) jenv->ReleaseByteArrayElements($input, (jbyte*)$1, JNI_ABORT);
}
%typemap(out) const char * { $result = manypy_jni_utf8_bytes(jenv, $1); }
%typemap(javaout) const char * { return org.manypy.internal.Utf8.decode($jnicall); }

/* (pointer, length) inputs: a Java byte[] (its bytes are copied by the call). */
%typemap(jni) (const void* data, size_t size), (const void* data, size_t length),
              (const char* utf8, size_t length) "jbyteArray"
%typemap(jtype) (const void* data, size_t size), (const void* data, size_t length),
                (const char* utf8, size_t length) "byte[]"
%typemap(jstype) (const void* data, size_t size), (const void* data, size_t length),
                 (const char* utf8, size_t length) "byte[]"
%typemap(javain) (const void* data, size_t size), (const void* data, size_t length),
                 (const char* utf8, size_t length) "$javainput"
%typemap(in) (const void* data, size_t size), (const void* data, size_t length),
             (const char* utf8, size_t length) {
  $1 = $input ? ($1_ltype)jenv->GetByteArrayElements($input, NULL) : NULL;
  $2 = $input ? (size_t)jenv->GetArrayLength($input) : 0;
}
%typemap(freearg) (const void* data, size_t size), (const void* data, size_t length),
                  (const char* utf8, size_t length) {
  if ($1) jenv->ReleaseByteArrayElements($input, (jbyte*)$1, JNI_ABORT);
}

/* The glue functions take the JNIEnv of the calling thread. */
%typemap(in, numinputs=0) JNIEnv* jenv "$1 = jenv;"

/* What the glue wraps instead, or what the Java side does not need. */
%ignore manypy_value_new_tensor;
%ignore manypy_value_new_tensor_from_buffer;
%ignore manypy_value_get_string;
%ignore manypy_value_get_bytes;
%ignore manypy_value_get_tensor;
/* manypy_tensor's DLPack and buffer constructors and its DLTensor: the glue
 * wraps them (Java has direct ByteBuffers, not pointers). */
%ignore manypy_tensor_new;
%ignore manypy_tensor_new_from_buffer;
%ignore manypy_tensor_dl_tensor;
%ignore manypy_value_dict_key;
%ignore manypy_add_op_callbacks;
%ignore manypy_remove_op_callbacks;
%ignore manypy_set_api_usage_handler;
%ignore manypy_set_export_hook;
// Trusted archives go through org.manypy.ArchiveTrust: a native trust made
// at each use (manypy_archive_trust_*, manypy_pool_options_set_archive_trust,
// manypy_script_load_*_trusted, manypy_aoti_load_*,
// manypy_set_host_archive_trust, wrapped as declared), whose verifier the
// glue sets (manypy_jni_archive_trust_set_verifier). The pool options' own
// allow-list and verifier functions are not used.
%ignore manypy_pool_options_set_archive_verifier;
%ignore manypy_archive_trust_set_verifier;
%ignore manypy_archive_verifier_fn;
%ignore manypy_op_input;
%ignore manypy_op_event;
%ignore manypy_profile_entry;
/* The serving lifecycle's structs and callback: the glue reads the structs
 * (manypy_jni_pool_get_stats fills one; manypy_jni_request_metrics_* read an
 * array of them, stepping by struct_size) and sets the callback
 * (manypy_jni_pool_options_set_on_interpreter_failed). */
%ignore manypy_pool_stats;
%ignore manypy_pool_get_stats;
%ignore manypy_request_metrics;
%ignore manypy_request_metrics_at;
%ignore manypy_interpreter_failed_fn;
%ignore manypy_pool_options_set_on_interpreter_failed;
/* The header's static inline steppers over struct_size (the glue uses them). */
%ignore manypy_op_event_input;
%ignore manypy_profile_entry_at;
%ignore manypy_op_callback_fn;
%ignore manypy_api_usage_fn;
%ignore manypy_export_hook_fn;
/* Asynchronous calls take a C callback: the glue's manypy_jni_*_call_async
 * register a Java completion instead (jni_async.cpp). */
%ignore manypy_call_done_fn;
%ignore manypy_object_call_async;
%ignore manypy_script_call_async;
%ignore manypy_aoti_call_async;
%ignore manypy_batcher_call_async;

%include "manypy.h"
%include "jni_glue.h"
