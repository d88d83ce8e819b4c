/* C helpers of the Go binding (glue.h). */
#include "glue.h"

#include <time.h>

#include "_cgo_export.h"

/* The helpers' own allocation failure, as the library reports its own. */
static manypy_status* out_of_memory(void) {
  return manypy_status_new(MANYPY_ERR_RESOURCE_EXHAUSTED, "out of memory");
}

static mpgo_tensor_ref tensor_ref(manypy_status* status, manypy_tensor* t) {
  mpgo_tensor_ref r = {status, NULL, NULL};
  if (!status) {
    r.tensor = t;
    r.dl = manypy_tensor_dl_tensor(t);
  }
  return r;
}

mpgo_tensor_ref mpgo_tensor_of_value(const manypy_value* value) {
  manypy_tensor* t = NULL;
  manypy_status* status = manypy_tensor_from_value(value, &t);
  return tensor_ref(status, t);
}

static void release_trampoline(void* ctx) { mpgoReleaseBuffer((uintptr_t)ctx); }

mpgo_tensor_ref mpgo_tensor_from_buffer(void* data, size_t data_size, uint8_t code, uint8_t bits,
                                        int32_t ndim, const int64_t* shape, int copy,
                                        uintptr_t release_handle) {
  DLDataType dtype = {code, bits, 1};
  manypy_tensor* t = NULL;
  manypy_status* status = manypy_tensor_new_from_buffer(
      data, data_size, dtype, ndim, shape, NULL, copy, release_handle ? release_trampoline : NULL,
      (void*)release_handle, &t);
  return tensor_ref(status, t);
}

manypy_status* mpgo_append_tensor(manypy_value* sequence, const manypy_tensor* t) {
  manypy_value* item = NULL;
  manypy_status* status = manypy_value_new_tensor_ref(t, &item);
  if (status) return status;
  return manypy_value_append(sequence, item);
}

/* A call's positional arguments: `args` itself, or when it is NULL and
 * count > 0, a tuple of the tensors (the common call), made here. */
static manypy_status* positional(manypy_value** args, manypy_tensor* const* tensors, int count) {
  if (*args || count <= 0) return NULL;
  manypy_value* tuple = manypy_value_new_tuple();
  if (!tuple) return out_of_memory();
  for (int i = 0; i < count; ++i) {
    manypy_status* status = mpgo_append_tensor(tuple, tensors[i]);
    if (status) {
      manypy_value_free(tuple);
      return status;
    }
  }
  *args = tuple;
  return NULL;
}

/* Fills r from a call's status and result: a tensor result is taken as a
 * manypy_tensor at once, any other is returned as the value. */
static void take_result(mpgo_call_result* r, manypy_status* status, manypy_value* result) {
  r->status = status;
  if (status) return;
  if (manypy_value_get_kind(result) == MANYPY_VALUE_TENSOR) {
    mpgo_tensor_ref t = mpgo_tensor_of_value(result);
    r->status = t.status;
    r->tensor = t.tensor;
    r->dl = t.dl;
    manypy_value_free(result);
    return;
  }
  r->value = result;
}

/* manypy_object_call, manypy_script_call or manypy_aoti_call, on a target of its kind. */
typedef manypy_status* (*call_fn)(void* target, const char* method, const manypy_value* args,
                                  const manypy_value* kwargs, const manypy_call_options* options,
                                  manypy_value** out);

static manypy_status* object_call(void* target, const char* method, const manypy_value* args,
                                  const manypy_value* kwargs, const manypy_call_options* options,
                                  manypy_value** out) {
  return manypy_object_call(target, method, args, kwargs, options, out);
}

static manypy_status* script_call(void* target, const char* method, const manypy_value* args,
                                  const manypy_value* kwargs, const manypy_call_options* options,
                                  manypy_value** out) {
  return manypy_script_call(target, method, args, kwargs, options, out);
}

/* manypy_aoti_call: a compiled model has no methods (method is always NULL). */
static manypy_status* aoti_call(void* target, const char* method, const manypy_value* args,
                                const manypy_value* kwargs, const manypy_call_options* options,
                                manypy_value** out) {
  (void)method;
  return manypy_aoti_call(target, args, kwargs, options, out);
}

/* Whether the goroutine that made a call on this thread should yield to the
 * Go scheduler: once per kYieldEvery per thread (scheduling.go says why).
 * Per thread, because the goroutine is not known here: a goroutine locked
 * to its thread yields that often, others about that often per P. */
static int time_to_yield(void) {
  enum { kYieldEvery = 5000000 /* ns */ };
  static __thread int64_t last;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  int64_t now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
  if (now - last < kYieldEvery) return 0;
  last = now;
  return 1;
}

static mpgo_call_result call(call_fn fn, void* target, const char* method, manypy_value* args,
                             manypy_tensor* const* tensors, int count, manypy_value* kwargs,
                             const manypy_call_options* options) {
  mpgo_call_result r = {NULL, NULL, NULL, NULL, 0};
  r.status = positional(&args, tensors, count);
  if (!r.status) {
    manypy_value* result = NULL;
    manypy_status* status = fn(target, method, args, kwargs, options, &result);
    take_result(&r, status, result);
  }
  manypy_value_free(args);
  manypy_value_free(kwargs);
  r.yield = time_to_yield();
  return r;
}

mpgo_call_result mpgo_object_call(manypy_object* object, const char* method, manypy_value* args,
                                  uintptr_t t0, uintptr_t t1, uintptr_t t2, uintptr_t t3,
                                  int tensors, manypy_value* kwargs,
                                  const manypy_call_options* options) {
  manypy_tensor* const list[4] = {(manypy_tensor*)t0, (manypy_tensor*)t1, (manypy_tensor*)t2,
                                  (manypy_tensor*)t3};
  return call(object_call, object, method, args, list, tensors, kwargs, options);
}

mpgo_call_result mpgo_script_call(manypy_script_module* module, const char* method,
                                  manypy_value* args, uintptr_t t0, uintptr_t t1, uintptr_t t2,
                                  uintptr_t t3, int tensors, manypy_value* kwargs,
                                  const manypy_call_options* options) {
  manypy_tensor* const list[4] = {(manypy_tensor*)t0, (manypy_tensor*)t1, (manypy_tensor*)t2,
                                  (manypy_tensor*)t3};
  return call(script_call, module, method, args, list, tensors, kwargs, options);
}

mpgo_call_result mpgo_aoti_call(manypy_aoti_module* module, manypy_value* args, uintptr_t t0,
                                uintptr_t t1, uintptr_t t2, uintptr_t t3, int tensors,
                                manypy_value* kwargs, const manypy_call_options* options) {
  manypy_tensor* const list[4] = {(manypy_tensor*)t0, (manypy_tensor*)t1, (manypy_tensor*)t2,
                                  (manypy_tensor*)t3};
  return call(aoti_call, module, NULL, args, list, tensors, kwargs, options);
}

/* ---- asynchronous calls ------------------------------------------------- */

/* The completion of an asynchronous call, on a manypy thread: the tensor is
 * taken here (cheap, and it spares the waiting goroutine a cgo call); the
 * Go side only hands the outcome to the goroutine, which converts it. */
static void call_done(void* user_data, manypy_value* result, manypy_status* status) {
  mpgo_call_result r = {NULL, NULL, NULL, NULL, 0};
  take_result(&r, status, result);
  mpgoCallDone((uintptr_t)user_data, r.status, r.value, r.tensor, (DLTensor*)r.dl);
}

manypy_status* mpgo_batcher_call_async(manypy_batcher* batcher, manypy_value* args, uintptr_t t0,
                                       uintptr_t t1, uintptr_t t2, uintptr_t t3, int tensors,
                                       manypy_value* kwargs, const manypy_call_options* options,
                                       uintptr_t done_handle) {
  manypy_tensor* const list[4] = {(manypy_tensor*)t0, (manypy_tensor*)t1, (manypy_tensor*)t2,
                                  (manypy_tensor*)t3};
  manypy_status* status = positional(&args, list, tensors);
  if (!status) {
    status =
        manypy_batcher_call_async(batcher, args, kwargs, options, call_done, (void*)done_handle);
  }
  manypy_value_free(args);
  manypy_value_free(kwargs);
  return status;
}

/* ---- callbacks: C function pointers to the Go trampolines ---------------- */

static void free_handle(void* user_data) { mpgoFreeHandle((uintptr_t)user_data); }

static void op_enter(const manypy_op_event* event, void* user_data) {
  mpgoOnOpEvent((manypy_op_event*)event, (uintptr_t)user_data, 0);
}

static void op_exit(const manypy_op_event* event, void* user_data) {
  mpgoOnOpEvent((manypy_op_event*)event, (uintptr_t)user_data, 1);
}

manypy_status* mpgo_add_op_callbacks(int with_enter, int with_exit, uintptr_t handle,
                                     double probability, int needs_inputs, uint64_t* out_id) {
  return manypy_add_op_callbacks(with_enter ? op_enter : NULL, with_exit ? op_exit : NULL,
                                 (void*)handle, free_handle, probability, needs_inputs, out_id);
}

static void api_usage(const char* key, void* user_data) {
  mpgoOnAPIUsage((char*)key, (uintptr_t)user_data);
}

manypy_status* mpgo_set_api_usage_handler(uintptr_t handle) {
  if (!handle) return manypy_set_api_usage_handler(NULL, NULL, NULL);
  return manypy_set_api_usage_handler(api_usage, (void*)handle, free_handle);
}

static manypy_value* export_hook(void* user_data) {
  return (manypy_value*)mpgoExportHook((uintptr_t)user_data);
}

manypy_status* mpgo_set_export_hook(uintptr_t handle) {
  if (!handle) return manypy_set_export_hook(NULL, NULL, NULL);
  return manypy_set_export_hook(export_hook, (void*)handle, free_handle);
}

static int verify_archive(const uint8_t* sha256, const char* origin, void* user_data) {
  return mpgoVerifyArchive((uint8_t*)sha256, (char*)origin, (uintptr_t)user_data);
}

manypy_status* mpgo_archive_trust_set_verifier(manypy_archive_trust* trust, uintptr_t handle) {
  return manypy_archive_trust_set_verifier(trust, verify_archive, (void*)handle, free_handle);
}

static void interpreter_failed(void* user_data, int32_t interpreter, const manypy_status* why) {
  mpgoOnInterpreterFailed((uintptr_t)user_data, interpreter, (manypy_status*)why);
}

static void free_interpreter_failed(void* user_data) {
  mpgoFreeInterpreterFailed((uintptr_t)user_data);
}

manypy_status* mpgo_pool_options_set_on_interpreter_failed(manypy_pool_options* options,
                                                           uintptr_t handle) {
  return manypy_pool_options_set_on_interpreter_failed(options, interpreter_failed, (void*)handle,
                                                       free_interpreter_failed);
}

const manypy_request_metrics* mpgo_request_metrics_at(const manypy_request_metrics* metrics,
                                                      size_t index) {
  return manypy_request_metrics_at(metrics, index);
}

const manypy_op_input* mpgo_op_event_input(const manypy_op_event* event, size_t index) {
  return manypy_op_event_input(event, index);
}

const manypy_profile_entry* mpgo_profile_entry_at(const manypy_profile_entry* entries,
                                                  size_t index) {
  return manypy_profile_entry_at(entries, index);
}
