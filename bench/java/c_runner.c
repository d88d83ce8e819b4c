/*
 * The C side of bench/java/JavaVsC.java: the same serving loop as the Java
 * side, written as a C service would write it against manypy.h, run on
 * native threads inside the same JVM process, on the same pool and model.
 *
 * Each call: wrap the input buffer as a tensor (borrowed, zero copy), build
 * the args tuple and the kwargs dict (steps=5, normalize=False), call, take
 * the two result tensors out as DLPack (as a consumer reading them would),
 * free everything.
 */
#define _GNU_SOURCE
#include <jni.h>
#include <manypy.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

typedef struct {
  manypy_object* model;
  float* input;
  size_t input_bytes;
  double seconds;
  pthread_barrier_t* start;
  long calls;
  char error[512];
} worker;

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int fail(worker* w, manypy_status* s) {
  snprintf(w->error, sizeof w->error, "%s", manypy_status_message(s));
  manypy_status_free(s);
  return -1;
}

/* Releases one result tensor the way a consumer would after reading it. */
static int take_tensor(worker* w, const manypy_value* dict, const char* key) {
  const manypy_value* item = NULL;
  DLManagedTensor* t = NULL;
  manypy_status* s = manypy_value_dict_get(dict, key, &item);
  if (!s) s = manypy_value_get_tensor(item, &t);
  if (s) return fail(w, s);
  t->deleter(t);
  return 0;
}

static int one_call(worker* w) {
  static const int64_t shape[2] = {4, 64};
  manypy_value* x = NULL;
  manypy_status* s = manypy_value_new_tensor_from_buffer(
      w->input, w->input_bytes, (DLDataType){kDLFloat, 32, 1}, 2, shape, NULL, 0, NULL, NULL, &x);
  if (s) return fail(w, s);
  manypy_value* args = manypy_value_new_tuple();
  manypy_value* kwargs = manypy_value_new_dict();
  manypy_value* out = NULL;
  s = manypy_value_append(args, x);
  if (!s) s = manypy_value_dict_set(kwargs, "steps", manypy_value_new_int64(5));
  if (!s) s = manypy_value_dict_set(kwargs, "normalize", manypy_value_new_bool(0));
  if (!s) s = manypy_object_call(w->model, NULL, args, kwargs, NULL, &out);
  int rc = s ? fail(w, s) : 0;
  if (!rc) rc = take_tensor(w, out, "logits");
  if (!rc) rc = take_tensor(w, out, "norm");
  manypy_value_free(out);
  manypy_value_free(kwargs);
  manypy_value_free(args);
  return rc;
}

static void* run(void* arg) {
  worker* w = arg;
  pthread_barrier_wait(w->start);
  double end = now_seconds() + w->seconds;
  while (now_seconds() < end) {
    if (one_call(w)) break;
    w->calls++;
  }
  return NULL;
}

/* static native long runC(long model, ByteBuffer input, int threads, double seconds):
 * total calls made; throws RuntimeException if a call failed. */
JNIEXPORT jlong JNICALL Java_JavaVsC_runC(JNIEnv* env, jclass cls, jlong model, jobject input,
                                          jint threads, jdouble seconds) {
  (void)cls;
  enum { kMaxThreads = 64 };
  if (threads < 1 || threads > kMaxThreads) threads = 1;
  worker workers[kMaxThreads];
  pthread_t ids[kMaxThreads];
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, (unsigned)threads);
  for (int i = 0; i < threads; ++i) {
    memset(&workers[i], 0, sizeof workers[i]);
    workers[i].model = (manypy_object*)(intptr_t)model;
    workers[i].input = (*env)->GetDirectBufferAddress(env, input);
    workers[i].input_bytes = (size_t)(*env)->GetDirectBufferCapacity(env, input);
    workers[i].seconds = seconds;
    workers[i].start = &start;
    pthread_create(&ids[i], NULL, run, &workers[i]);
  }
  long total = 0;
  const char* error = NULL;
  for (int i = 0; i < threads; ++i) {
    pthread_join(ids[i], NULL);
    total += workers[i].calls;
    if (workers[i].error[0] && !error) error = workers[i].error;
  }
  pthread_barrier_destroy(&start);
  if (error) {
    (*env)->ThrowNew(env, (*env)->FindClass(env, "java/lang/RuntimeException"), error);
    return -1;
  }
  return total;
}
