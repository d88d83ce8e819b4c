/*
 * The C side of bench/java/JavaVsC.java, as JNI: the serving loop of the
 * binding benchmarks' shared C side (bindings/bench/c_side.h), run on
 * native threads inside the same JVM process, on the same pool and model
 * as the Java side.
 *
 * Each call, as a C service would write it against manypy.h: wrap the input
 * buffer as a tensor (borrowed, zero copy), build the args tuple and the
 * kwargs dict (steps=5, normalize=False), call, take the two result tensors
 * out as DLPack, free everything.
 */
#include <jni.h>
#include <stdint.h>

#include "c_side.h"

static jlong throw_runtime(JNIEnv* env, const char* message) {
  (*env)->ThrowNew(env, (*env)->FindClass(env, "java/lang/RuntimeException"), message);
  return -1;
}

/* static native long runC(long model, ByteBuffer input, int threads, double seconds):
 * total calls made, each thread calling until its start + seconds; throws
 * RuntimeException if a call failed. */
JNIEXPORT jlong JNICALL Java_JavaVsC_runC(JNIEnv* env, jclass cls, jlong model, jobject input,
                                          jint threads, jdouble seconds) {
  (void)cls;
  float* data = (*env)->GetDirectBufferAddress(env, input);
  const jlong bytes = (*env)->GetDirectBufferCapacity(env, input);
  if (!data || bytes < 0) return throw_runtime(env, "runC: input is not a direct ByteBuffer");
  c_side_request* request =
      c_side_request_python_heavy((manypy_object*)(intptr_t)model, data, (size_t)bytes);
  if (!request) return throw_runtime(env, "runC: out of memory");
  uint64_t calls = 0;
  int64_t ns = 0;
  char error[512];
  const int rc = c_side_throughput(request, threads, seconds, C_SIDE_EACH_UNTIL_DEADLINE, &calls,
                                   &ns, error, sizeof error);
  c_side_request_free(request);
  return rc == 0 ? (jlong)calls : throw_runtime(env, error);
}

/* static native void latenciesC(long model, ByteBuffer input, long[] out):
 * out.length calls, one at a time on this thread, each wrapping `input`
 * (float32 [1, 16], borrowed) in a new tensor and args tuple as a C service
 * would; out[i] is call i's wall time in ns. Throws RuntimeException if a
 * call failed. */
JNIEXPORT void JNICALL Java_JavaVsC_latenciesC(JNIEnv* env, jclass cls, jlong model, jobject input,
                                               jlongArray out) {
  (void)cls;
  float* data = (*env)->GetDirectBufferAddress(env, input);
  const jlong bytes = (*env)->GetDirectBufferCapacity(env, input);
  if (!data || bytes < 0) {
    throw_runtime(env, "latenciesC: input is not a direct ByteBuffer");
    return;
  }
  const jsize n = (*env)->GetArrayLength(env, out);
  const int64_t shape[2] = {1, 16};
  c_side_request* request =
      c_side_request_tensor((manypy_object*)(intptr_t)model, data, (size_t)bytes, 2, shape);
  jlong* ns = (*env)->GetLongArrayElements(env, out, NULL);
  if (!request || !ns) {
    c_side_request_free(request);
    if (ns) (*env)->ReleaseLongArrayElements(env, out, ns, JNI_ABORT);
    throw_runtime(env, "latenciesC: out of memory");
    return;
  }
  char error[512];
  const int rc = c_side_latencies(request, (int64_t*)ns, (size_t)n, error, sizeof error);
  c_side_request_free(request);
  (*env)->ReleaseLongArrayElements(env, out, ns, 0);
  if (rc != 0) throw_runtime(env, error);
}
