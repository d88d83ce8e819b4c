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
