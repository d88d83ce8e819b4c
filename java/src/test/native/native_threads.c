/* Native threads for NativeThreadsTest: threads the JVM never saw, each
 * calling a model once through the C API and then exiting, so that operator
 * callbacks in Java run on them (the glue attaches them) and their exit
 * must detach them. */
#include <jni.h>
#include <manypy.h>
#include <pthread.h>
#include <stdint.h>

typedef struct {
  manypy_object* model;
  void* input; /* float32 [4, 64] */
  size_t input_bytes;
  int failed;
} call;

static void* call_once(void* arg) {
  call* c = arg;
  static const int64_t shape[2] = {4, 64};
  manypy_value* x = NULL;
  manypy_value* out = NULL;
  manypy_value* args = manypy_value_new_tuple();
  manypy_status* s = manypy_value_new_tensor_from_buffer(
      c->input, c->input_bytes, (DLDataType){kDLFloat, 32, 1}, 2, shape, NULL, 0, NULL, NULL, &x);
  if (!s) s = manypy_value_append(args, x);
  if (!s) s = manypy_object_call(c->model, NULL, args, NULL, NULL, &out);
  c->failed = s != NULL;
  manypy_status_free(s);
  manypy_value_free(out);
  manypy_value_free(args);
  return NULL;
}

/* static native int callFromNewThreads(long model, ByteBuffer input, int threads):
 * the number of calls that failed. */
JNIEXPORT jint JNICALL Java_org_manypy_NativeThreadsTest_callFromNewThreads(JNIEnv* env, jclass cls,
                                                                            jlong model,
                                                                            jobject input,
                                                                            jint threads) {
  (void)cls;
  enum { kMax = 16 };
  call calls[kMax];
  pthread_t ids[kMax];
  if (threads > kMax) threads = kMax;
  for (int i = 0; i < threads; ++i) {
    calls[i] = (call){(manypy_object*)(intptr_t)model, (*env)->GetDirectBufferAddress(env, input),
                      (size_t)(*env)->GetDirectBufferCapacity(env, input), 0};
    pthread_create(&ids[i], NULL, call_once, &calls[i]);
  }
  int failed = 0;
  for (int i = 0; i < threads; ++i) {
    pthread_join(ids[i], NULL);
    failed += calls[i].failed;
  }
  return failed;
}
