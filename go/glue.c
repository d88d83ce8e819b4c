/* C helpers of the Go binding (glue.h). */
#include "glue.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "_cgo_export.h"

struct mpgo_tensor {
  DLManagedTensor* managed; /* owned: its deleter runs with the last reference */
  atomic_long refs;
};

const DLTensor* mpgo_tensor_dl(const mpgo_tensor* t) { return &t->managed->dl_tensor; }

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
  atomic_init(&t->refs, 1);
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
  if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) == 1) {
    t->managed->deleter(t->managed);
    free(t);
  }
}

static void view_deleter(DLManagedTensor* self) {
  mpgo_tensor_unref((mpgo_tensor*)self->manager_ctx);
  free(self);
}

manypy_status* mpgo_tensor_value(mpgo_tensor* t, manypy_value** out) {
  DLManagedTensor* view = malloc(sizeof *view);
  if (!view) return out_of_memory();
  /* Same layout and memory; shape and strides stay valid because the view
   * holds a reference on t. */
  view->dl_tensor = t->managed->dl_tensor;
  view->manager_ctx = t;
  view->deleter = view_deleter;
  atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
  /* manypy runs view->deleter exactly once, at once if this fails. */
  return manypy_value_new_tensor(view, out);
}

manypy_status* mpgo_append_tensor(manypy_value* sequence, mpgo_tensor* t) {
  manypy_value* item = NULL;
  manypy_status* status = mpgo_tensor_value(t, &item);
  if (status) return status;
  return manypy_value_append(sequence, item);
}

/* A Go string may be empty with a NULL data pointer; the C API wants bytes. */
static const char* nonnull(const char* data) { return data ? data : ""; }

manypy_status* mpgo_append_string(manypy_value* sequence, const char* data, size_t length) {
  manypy_value* item = NULL;
  manypy_status* status = manypy_value_new_string(nonnull(data), length, &item);
  if (status) return status;
  return manypy_value_append(sequence, item);
}

manypy_status* mpgo_dict_set_string(manypy_value* dict, const char* key, const char* data,
                                    size_t length) {
  manypy_value* item = NULL;
  manypy_status* status = manypy_value_new_string(nonnull(data), length, &item);
  if (status) return status;
  return manypy_value_dict_set(dict, key, item);
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

manypy_status* mpgo_set_archive_verifier(manypy_pool_options* options, uintptr_t handle) {
  return manypy_pool_options_set_archive_verifier(options, verify_archive, (void*)handle,
                                                  free_handle);
}

const manypy_op_input* mpgo_op_event_input(const manypy_op_event* event, size_t index) {
  return manypy_op_event_input(event, index);
}

const manypy_profile_entry* mpgo_profile_entry_at(const manypy_profile_entry* entries,
                                                  size_t index) {
  return manypy_profile_entry_at(entries, index);
}
