/* C helpers of the Go binding (glue.h). */
#include "glue.h"

#include <stdlib.h>
#include <time.h>

#include "_cgo_export.h"


/* The C API has no constructor for a status, so the helpers' own failure
 * (malloc) is this address, which Go recognises and never frees. */
static char oom_marker;
manypy_status* mpgo_oom_status(void) { return (manypy_status*)&oom_marker; }
static manypy_status* out_of_memory(void) { return mpgo_oom_status(); }

static manypy_status* hold(DLManagedTensor* managed, mpgo_tensor** out) {
  mpgo_tensor* t = malloc(sizeof *t);
  if (!t) {
    managed->deleter(managed);
    return out_of_memory();
  }
  t->managed = managed;
  t->refs = 1;
  *out = t;
  return NULL;
}

manypy_status* mpgo_tensor_of_value(const manypy_value* value, mpgo_tensor** out) {
  DLManagedTensor* managed = NULL;
  manypy_status* status = manypy_value_get_tensor(value, &managed);
  if (status) return status;
  return hold(managed, out);
}

static void release_trampoline(void* ctx) { mpgoReleaseBuffer((uintptr_t)ctx); }

manypy_status* mpgo_tensor_from_buffer(void* data, size_t data_size, uint8_t code, uint8_t bits,
                                       int32_t ndim, const int64_t* shape, const int64_t* strides,
                                       int copy, uintptr_t release_handle, mpgo_tensor** out) {
  DLDataType dtype = {code, bits, 1};
  manypy_value* value = NULL;
  manypy_status* status = manypy_value_new_tensor_from_buffer(
      data, data_size, dtype, ndim, shape, strides, copy,
      release_handle ? release_trampoline : NULL, (void*)release_handle, &value);
  if (status) return status;
  /* The value's tensor outlives the value: the DLManagedTensor holds it. */
  status = mpgo_tensor_of_value(value, out);
  manypy_value_free(value);
  return status;
}

void mpgo_tensor_unref(mpgo_tensor* t) {
  if (!t) return;
  if (__atomic_fetch_sub(&t->refs, 1, __ATOMIC_ACQ_REL) == 1) {
    t->managed->deleter(t->managed);
    free(t);
  }
}

static void unref_release(void* ctx) { mpgo_tensor_unref((mpgo_tensor*)ctx); }

/* The bytes a layout addresses from its first element (torch's strides are
 * never negative), for manypy_value_new_tensor_from_buffer's size check. */
static size_t span_bytes(const DLTensor* dl) {
  size_t itemsize = dl->dtype.bits / 8;
  size_t last = 0, step = 1;
  for (int32_t i = dl->ndim - 1; i >= 0; --i) {
    if (dl->shape[i] == 0) return 0;
    int64_t stride = dl->strides ? dl->strides[i] : (int64_t)step;
    last += (size_t)(dl->shape[i] - 1) * (size_t)stride;
    step *= (size_t)dl->shape[i];
  }
  return (last + 1) * itemsize;
}

manypy_status* mpgo_tensor_value(mpgo_tensor* t, manypy_value** out) {
  /* A borrowed buffer over the same memory, holding a reference on t until
   * manypy releases it. Not manypy_value_new_tensor over a view: that
   * checks a caller's DLManagedTensor's pages with a system call per
   * value, and this memory is manypy's own or already checked. */
  const DLTensor* dl = &t->managed->dl_tensor;
  __atomic_fetch_add(&t->refs, 1, __ATOMIC_RELAXED);
  /* manypy runs the release exactly once, at once if this fails. */
  return manypy_value_new_tensor_from_buffer((char*)dl->data + dl->byte_offset, span_bytes(dl),
                                             dl->dtype, dl->ndim, dl->shape, dl->strides, 0,
                                             unref_release, t, out);
}

manypy_status* mpgo_append_tensor(manypy_value* sequence, mpgo_tensor* t) {
  manypy_value* item = NULL;
  manypy_status* status = mpgo_tensor_value(t, &item);
  if (status) return status;
  return manypy_value_append(sequence, item);
}

/* A call's positional arguments: `args` itself, or when it is NULL and
 * count > 0, a tuple of the tensors (the common call), made here. */
static manypy_status* positional(manypy_value** args, mpgo_tensor* const* tensors, int count) {
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

/* Fills r from a call's status and result: a tensor result is taken as an
 * mpgo_tensor at once, any other is returned as the value. */
static void take_result(mpgo_call_result* r, manypy_status* status, manypy_value* result) {
  r->status = status;
  if (status) return;
  if (manypy_value_get_kind(result) == MANYPY_VALUE_TENSOR) {
    r->status = mpgo_tensor_of_value(result, &r->tensor);
    manypy_value_free(result);
    return;
  }
  r->value = result;
}

/* manypy_object_call or manypy_script_call, on a target of either kind. */
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
                             mpgo_tensor* const* tensors, int count, manypy_value* kwargs,
                             const manypy_call_options* options) {
  mpgo_call_result r = {NULL, NULL, NULL, 0};
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
  mpgo_tensor* const list[4] = {(mpgo_tensor*)t0, (mpgo_tensor*)t1, (mpgo_tensor*)t2,
                                (mpgo_tensor*)t3};
  return call(object_call, object, method, args, list, tensors, kwargs, options);
}

mpgo_call_result mpgo_script_call(manypy_script_module* module, const char* method,
                                  manypy_value* args, uintptr_t t0, uintptr_t t1, uintptr_t t2,
                                  uintptr_t t3, int tensors, manypy_value* kwargs,
                                  const manypy_call_options* options) {
  mpgo_tensor* const list[4] = {(mpgo_tensor*)t0, (mpgo_tensor*)t1, (mpgo_tensor*)t2,
                                (mpgo_tensor*)t3};
  return call(script_call, module, method, args, list, tensors, kwargs, options);
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

const manypy_op_input* mpgo_op_event_input(const manypy_op_event* event, size_t index) {
  return manypy_op_event_input(event, index);
}

const manypy_profile_entry* mpgo_profile_entry_at(const manypy_profile_entry* entries,
                                                  size_t index) {
  return manypy_profile_entry_at(entries, index);
}
