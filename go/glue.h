/* C helpers of the Go binding: the parts that are cheaper or only possible
 * on the C side of cgo. Each helper folds several C API calls into one cgo
 * transition, or gives the C API a function pointer to a Go callback. */
#ifndef MANYPY_GO_GLUE_H
#define MANYPY_GO_GLUE_H

#include <manypy.h>
#include <stdint.h>

/* A tensor reference and its layout (manypy_tensor_dl_tensor, valid while
 * the reference is held), returned by value: Go reads the layout without
 * another cgo call. On failure status is set and the rest is NULL. */
typedef struct mpgo_tensor_ref {
  manypy_status* status;
  manypy_tensor* tensor;
  const DLTensor* dl;
} mpgo_tensor_ref;

/* The tensor of a tensor value (manypy_tensor_from_value: zero copy). */
mpgo_tensor_ref mpgo_tensor_of_value(const manypy_value* value);

/* manypy_tensor_new_from_buffer: copied now (copy = 1), or borrowed
 * (copy = 0), in which case the Go callback mpgoReleaseBuffer(release_handle)
 * runs when manypy no longer needs the buffer (at once on failure). */
mpgo_tensor_ref mpgo_tensor_from_buffer(void* data, size_t data_size, uint8_t code, uint8_t bits,
                                        int32_t ndim, const int64_t* shape, int copy,
                                        uintptr_t release_handle);

/* Appends a new value of t (manypy_value_new_tensor_ref) to a list or tuple. */
manypy_status* mpgo_append_tensor(manypy_value* sequence, const manypy_tensor* t);

/* A call's outcome, returned by value: a status, or the result, of which a
 * tensor is taken as a manypy_tensor at once (the common case, without a
 * walk from Go), with its layout, and any other is the value. By value because cgo checks
 * every Go pointer passed to C, and an out-parameter in Go memory (with the
 * tensors as a Go array) cost a quarter of the binding's time per call. */
typedef struct mpgo_call_result {
  manypy_status* status;
  manypy_value* value;
  manypy_tensor* tensor;
  const DLTensor* dl; /* tensor's, when tensor is set */
  int yield;          /* 1: the calling goroutine should yield now (scheduling.go) */
} mpgo_call_result;
/* manypy_object_call and manypy_script_call in one cgo transition. The
 * positional arguments are `args` (owned, may be NULL) or, when args is NULL
 * and tensors > 0, a tuple of the manypy_tensor pointers t0.. made here (calls
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
/* manypy_aoti_call in one cgo transition, with the arguments as
 * mpgo_object_call takes them (a compiled model has no methods). */
mpgo_call_result mpgo_aoti_call(manypy_aoti_module* module, manypy_value* args, uintptr_t t0,
                                uintptr_t t1, uintptr_t t2, uintptr_t t3, int tensors,
                                manypy_value* kwargs, const manypy_call_options* options);
/* manypy_batcher_call_async in one cgo transition, with the arguments as
 * mpgo_object_call takes them (args and kwargs owned, freed here: the call
 * copies what it keeps). NULL: accepted, and the Go function
 * mpgoCallDone(done_handle, ...) will run exactly once with the outcome,
 * taken as mpgo_object_call takes it (a tensor result as a manypy_tensor);
 * a status: refused, and it never runs. */
manypy_status* mpgo_batcher_call_async(manypy_batcher* batcher, manypy_value* args, uintptr_t t0,
                                       uintptr_t t1, uintptr_t t2, uintptr_t t3, int tensors,
                                       manypy_value* kwargs, const manypy_call_options* options,
                                       uintptr_t done_handle);

/* Operator callbacks with the Go trampolines; user_data is a cgo.Handle. */
manypy_status* mpgo_add_op_callbacks(int with_enter, int with_exit, uintptr_t handle,
                                     double probability, int needs_inputs, uint64_t* out_id);

/* The API usage handler (handle 0: remove it). */
manypy_status* mpgo_set_api_usage_handler(uintptr_t handle);

/* The export hook (handle 0: remove it). */
manypy_status* mpgo_set_export_hook(uintptr_t handle);

/* The verifier of an archive trust (pools and host loads take trusts). */
manypy_status* mpgo_archive_trust_set_verifier(manypy_archive_trust* trust, uintptr_t handle);

/* The pool options' on_interpreter_failed callback with the Go trampoline
 * (mpgoOnInterpreterFailed); user_data is a cgo.Handle, which the library
 * owns from this call on and frees once (mpgoFreeInterpreterFailed deletes
 * it, and counts it for the tests), at once if the call fails. */
manypy_status* mpgo_pool_options_set_on_interpreter_failed(manypy_pool_options* options,
                                                           uintptr_t handle);

/* Entry `index` of manypy_pool_request_metrics's array (the header's inline
 * function, for cgo). */
const manypy_request_metrics* mpgo_request_metrics_at(const manypy_request_metrics* metrics,
                                                      size_t index);

/* Input `index` of an event (the header's inline function, for cgo). */
const manypy_op_input* mpgo_op_event_input(const manypy_op_event* event, size_t index);

/* Entry `index` of a profile snapshot. */
const manypy_profile_entry* mpgo_profile_entry_at(const manypy_profile_entry* entries,
                                                  size_t index);

#endif
