/*
 * The table of libmanypy_hooks.so: C++ code of ours that talks to the
 * libtorch of the namespace it is loaded into. The interpreter side loads it
 * into each namespace after the namespace's pthread keys are fenced (it
 * pulls in libc10, whose constructors create keys) and before `import
 * torch`, so hooks are in place for everything torch does. Only C types and
 * function pointers cross.
 */
#ifndef MANYPY_HOOKS_API_H
#define MANYPY_HOOKS_API_H

#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MANYPY_HOOKS_API_VERSION 3u

/* At most this many operator-callback registrations at once. */
#define MPH_MAX_OP_CALLBACKS 16

/* One input of an operator, when inputs are asked for: kind 5 (tensor) with
 * dtype and shape, 2 int, 3 double, 1 bool, 0 None, -1 anything else. */
typedef struct mph_op_input {
  int32_t kind;
  uint8_t dtype_code, dtype_bits; /* DLPack codes (tensors only; bool: 6) */
  uint16_t dtype_lanes;
  int32_t ndim;
  const int64_t* shape;
} mph_op_input;

/* One operator event; every pointer is valid during the emit call only. */
typedef struct mph_op_event {
  const char* name;
  int64_t sequence_number;
  uint64_t thread_id;
  int32_t interpreter;      /* -1: the host */
  int64_t start_ns, end_ns; /* CLOCK_MONOTONIC; end_ns 0 when entering */
  const char* model_id;     /* "" when the call set none */
  const char* request_id;
  size_t num_inputs;
  const mph_op_input* inputs;
} mph_op_event;

/* phase 0: entering the operator; 1: leaving it. */
typedef void (*mph_emit_fn)(uint64_t registration, int phase, const mph_op_event* event);

typedef struct manypy_hooks_api {
  uint32_t version;
  uint32_t size;
  /* Routes this libtorch's API usage events (c10::LogAPIUsage) to `log`.
   * `log` is host code: it may run on any thread, and must not throw. */
  void (*set_api_usage_logger)(void (*log)(const char* key));
  /* Makes every TorchScript archive this libtorch writes (torch.jit.save)
   * carry the files `collect` produces: collect calls add(ctx, name, data,
   * size) for each, with pointers valid during that add call. */
  void (*set_export_files)(void (*collect)(void (*add)(void* ctx, const char* name,
                                                       const void* data, size_t size),
                                           void* ctx));
  int (*add_op_callbacks)(uint64_t id, double sampling_probability, int needs_inputs,
                          int32_t interpreter, mph_emit_fn emit); /* 0, or -1: no slot */
  void (*remove_op_callbacks)(uint64_t id);
  void (*push_context)(const char* model_id, const char* request_id);
  void (*pop_context)(void);
  /* Makes a result tensor exported with torch's to_dlpack the host's alone,
   * once the call dropped its references: as it is when nothing else in
   * the interpreter can reach its storage, else a copy replaces it.
   * 0, or -1 (and *managed unchanged) when the copy failed. */
  int (*own_exported_tensor)(DLManagedTensor** managed);
} manypy_hooks_api;

typedef const manypy_hooks_api* (*manypy_hooks_get_api_fn)(uint32_t version);

#ifdef __cplusplus
}
#endif

#endif
