/* C helpers of the Go binding: the parts that are cheaper or only possible
 * on the C side of cgo. Each helper folds several C API calls into one cgo
 * transition, or gives the C API a function pointer to a Go callback. */
#ifndef MANYPY_GO_GLUE_H
#define MANYPY_GO_GLUE_H

#include <manypy.h>
#include <stdint.h>

/* What a helper returns when its own allocation fails: not a real status,
 * never to be freed or read by the C API (errors.go checks for it). */
manypy_status* mpgo_oom_status(void);

/* A reference-counted DLPack tensor shared by one Go Tensor and every value
 * made from it (each call argument is a tensor value over the same memory
 * whose release drops a reference), so a Go Tensor may be closed while calls
 * still use its memory. */
typedef struct mpgo_tensor {
  DLManagedTensor* managed; /* owned: its deleter runs with the last reference */
  long refs;                /* atomic (__atomic builtins); only glue.c touches it */
} mpgo_tensor;

/* Takes the tensor of a tensor value (zero copy). */
manypy_status* mpgo_tensor_of_value(const manypy_value* value, mpgo_tensor** out);

/* A tensor over a buffer: copied now (copy = 1), or borrowed (copy = 0), in
 * which case the Go callback mpgoReleaseBuffer(release_handle) runs when manypy
 * no longer needs the buffer (at once on failure). */
manypy_status* mpgo_tensor_from_buffer(void* data, size_t data_size, uint8_t code, uint8_t bits,
                                       int32_t ndim, const int64_t* shape, const int64_t* strides,
                                       int copy, uintptr_t release_handle, mpgo_tensor** out);

/* Drops one reference (the Go Tensor's). Accepts NULL. */
void mpgo_tensor_unref(mpgo_tensor* t);

/* A new tensor value sharing t's memory (owned by the caller). */
manypy_status* mpgo_tensor_value(mpgo_tensor* t, manypy_value** out);

/* Appends a new value of t to a list or tuple. */
manypy_status* mpgo_append_tensor(manypy_value* sequence, mpgo_tensor* t);

/* A call's outcome, returned by value: a status, or the result, of which a
 * tensor is taken as an mpgo_tensor at once (the common case, without a
 * walk from Go) and any other is the value. By value because cgo checks
 * every Go pointer passed to C, and an out-parameter in Go memory (with the
 * tensors as a Go array) cost a quarter of the binding's time per call. */
typedef struct mpgo_call_result {
  manypy_status* status;
  manypy_value* value;
  mpgo_tensor* tensor;
  int yield; /* 1: the calling goroutine should yield now (scheduling.go) */
} mpgo_call_result;
/* manypy_object_call and manypy_script_call in one cgo transition. The
 * positional arguments are `args` (owned, may be NULL) or, when args is NULL
 * and tensors > 0, a tuple of the mpgo_tensor pointers t0.. made here (calls
 * whose arguments are 1 to 4 tensors; uintptr_t, as cgo checks arguments of
 * pointer types for Go pointers and these are C memory). Frees args and
 * kwargs (owned, may be NULL). */
mpgo_call_result mpgo_object_call(manypy_object* object, const char* method, manypy_value* args,
                                  uintptr_t t0, uintptr_t t1, uintptr_t t2, uintptr_t t3,
                                  int tensors, manypy_value* kwargs,
                                  const manypy_call_options* options);
mpgo_call_result mpgo_script_call(manypy_script_module* module, const char* method,
                                  manypy_value* args, uintptr_t t0, uintptr_t t1, uintptr_t t2,
                                  uintptr_t t3, int tensors, manypy_value* kwargs,
                                  const manypy_call_options* options);
/* Operator callbacks with the Go trampolines; user_data is a cgo.Handle. */
manypy_status* mpgo_add_op_callbacks(int with_enter, int with_exit, uintptr_t handle,
                                     double probability, int needs_inputs, uint64_t* out_id);

/* The API usage handler (handle 0: remove it). */
manypy_status* mpgo_set_api_usage_handler(uintptr_t handle);

/* The export hook (handle 0: remove it). */
manypy_status* mpgo_set_export_hook(uintptr_t handle);

/* The verifier of an archive trust (pools and host loads take trusts). */
manypy_status* mpgo_archive_trust_set_verifier(manypy_archive_trust* trust, uintptr_t handle);

/* Input `index` of an event (the header's inline function, for cgo). */
const manypy_op_input* mpgo_op_event_input(const manypy_op_event* event, size_t index);

/* Entry `index` of a profile snapshot. */
const manypy_profile_entry* mpgo_profile_entry_at(const manypy_profile_entry* entries,
                                                  size_t index);

#endif
