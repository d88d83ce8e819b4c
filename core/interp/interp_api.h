/*
 * The one boundary between the host side of manypy and the small library it
 * loads into each interpreter's link-map namespace (libmanypy_interp.so).
 *
 * Only C types and function pointers cross it. Memory is never handed across:
 * every string the interpreter side produces is passed to a host-side sink
 * callback, which copies it before returning, because each namespace has its
 * own malloc and freeing a chunk in the wrong one corrupts a heap.
 *
 * The interpreter side exports exactly one symbol, manypy_interp_get_api,
 * and the table it returns is versioned: the host asks for the version it
 * was built against and refuses to go on if it gets anything else.
 */
#ifndef MANYPY_INTERP_API_H
#define MANYPY_INTERP_API_H

#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MANYPY_INTERP_API_VERSION 11u

/* Status codes used across the boundary; they match manypy_code (the C
 * API checks that at compile time, capi/src/abi_checks.cpp). */
enum {
  MPI_OK = 0,
  MPI_ERR_INVALID_ARGUMENT = 1,
  MPI_ERR_OUT_OF_RANGE = 2,
  MPI_ERR_PYTHON = 3,
  MPI_ERR_SYNTAX = 4,
  MPI_ERR_UNSUPPORTED_TYPE = 5,
  MPI_ERR_STATIC_TLS = 7,
  MPI_ERR_RESOURCE_EXHAUSTED = 8,
  MPI_ERR_LOADER = 9,
  MPI_ERR_INTERNAL = 11,
  MPI_ERR_BAD_ARCHIVE = 13,
  MPI_ERR_MODULE_NOT_FOUND = 16,
  MPI_ERR_BAD_TENSOR = 17,
  MPI_ERR_NO_SUCH_NAME = 18,
  MPI_ERR_DEADLINE_EXCEEDED = 19,
  MPI_ERR_CANCELLED = 20,
  MPI_ERR_UNTRUSTED_ARCHIVE = 21
};

enum {
  MPI_VALUE_NONE = 0,
  MPI_VALUE_BOOL = 1,
  MPI_VALUE_INT64 = 2,
  MPI_VALUE_DOUBLE = 3,
  MPI_VALUE_STRING = 4,
  MPI_VALUE_TENSOR = 5,
  MPI_VALUE_BYTES = 6,
  MPI_VALUE_LIST = 7,
  MPI_VALUE_TUPLE = 8,
  MPI_VALUE_DICT = 9
};

/* DLPack's type code for bool (kDLBool, DLPack >= 0.8), as MANYPY_DL_BOOL.
 * Tensors cross the boundary with it whatever torch's DLPack can express. */
#define MPI_DL_BOOL 6

/* The most containers a value may nest, as manypy::Value::kMaxDepth. */
#define MPI_MAX_DEPTH 64

/* A value tree. As an argument (host to interpreter) the whole tree is
 * host memory, read-only, valid for the call; ownership of every `tensor`
 * passes to the interpreter, which runs its deleter exactly once. As a
 * result (sink->value), scalars, strings and bytes are borrowed for the
 * callback, and ownership of `tensor` passes to the host. */
typedef struct mpi_value {
  int kind;
  int64_t i; /* BOOL (0/1) and INT64 */
  double d;
  const char* s; /* STRING (UTF-8), BYTES */
  size_t len;
  DLManagedTensor* tensor;       /* TENSOR */
  const struct mpi_value* items; /* LIST, TUPLE; DICT: the values */
  size_t count;
  const char* const* keys;   /* DICT: UTF-8 keys (NUL-terminated too) */
  const size_t* key_lengths; /* DICT: each key's length (a key may hold NUL) */
} mpi_value;

/* The host's handle on one running call that may have to stop early (it
 * has a deadline or a cancel token). Host memory, valid for the call.
 *
 * The host fills `deadline_ns` and `grace_ns` before the call, and sets
 * `stop`, once, to MPI_ERR_DEADLINE_EXCEEDED or MPI_ERR_CANCELLED (with
 * __atomic builtins, from any thread), then calls interrupt(). The
 * interpreter side then raises the stop in the call once, at the next line
 * of the model's own code, so that its clean-up (finally blocks, __exit__)
 * runs; if the call has not returned `grace_ns` after that, it raises the
 * stop again at every line, of any code ("escalates"). Everything the call
 * runs is bounded so: converting its arguments, lazy replication, the call,
 * preparing its result and building its error text.
 *
 * The fields after `grace_ns` belong to the interpreter side, which reads
 * and writes them only under its GIL; the host reads `retire` and
 * `retire_reason` after the call returned. */
typedef struct mpi_call_control {
  int stop;
  int64_t deadline_ns; /* CLOCK_MONOTONIC; INT64_MAX: none */
  int64_t grace_ns;
  void* running; /* the PyThreadState running the call, or NULL */
  unsigned long thread_ident;
  int interrupted;        /* a stop was asked for while the call ran */
  int64_t first_event_ns; /* the first line of Python run after that */
  int64_t raised_ns;      /* when the stop was raised in the call; 0: not yet */
  int escalated;          /* the stop was raised at every line */
  /* 1 when the interpreter must not serve again: the call's clean-up was
   * cut short, or left state behind that could not be repaired. */
  int retire;
  char retire_reason[256];
  /* When the call first began running in the interpreter, holding its GIL
   * (CLOCK_MONOTONIC; set by mpi_call_begin if 0): the end of its wait,
   * for the host's queue-time metrics. */
  int64_t began_ns;
} mpi_call_control;

/* Host-side receiver of results. Every pointer handed to it is borrowed for
 * the duration of the callback only (but for result tensors, see mpi_value).
 * A container result arrives as begin(kind, count), then its items (each a
 * value() or a nested begin/end; in a dict each preceded by key()), then
 * end(). */
typedef struct mpi_sink {
  void* ctx;
  /* An error: code, Python type name ("" if none), one-line message,
   * traceback ("" if none). */
  void (*error)(void* ctx, int code, const char* py_type, const char* message,
                const char* traceback);
  void (*value)(void* ctx, const mpi_value* value);
  void (*begin)(void* ctx, int kind, size_t count);
  void (*key)(void* ctx, const char* key, size_t length);
  void (*end)(void* ctx);
} mpi_sink;

/* Services the host offers the interpreter side. */
typedef struct mpi_host_api {
  /* A package's storage record, which must hold exactly `nbytes` bytes,
   * stored, as a uint8 DLPack tensor over the host's copy of the archive (no
   * copy). On success returns MPI_OK and *out (owned by the caller); else
   * returns the code (MPI_ERR_BAD_ARCHIVE, MPI_ERR_NO_SUCH_NAME, ...) and
   * writes a message to `error`. */
  int (*package_record)(uint64_t package_id, const char* record, uint64_t nbytes,
                        DLManagedTensor** out, char* error, size_t error_size);
  /* An API usage event of this interpreter's torch (c10::LogAPIUsage). Any
   * thread; never throws. */
  void (*api_usage)(const char* key);
  /* The files the host's export hook adds to every archive written: calls
   * add(ctx, name, data, size) for each (pointers valid during the call).
   * Any thread; never throws. */
  void (*export_files)(void (*add)(void* ctx, const char* name, const void* data, size_t size),
                       void* ctx);
  /* Bytes of stack the calling thread has left below the caller, or
   * SIZE_MAX if its bounds cannot be read (core/src/stack_headroom.h). Any
   * thread; cheap after a thread's first call; never throws. Since API 11:
   * the interpreter side keeps no thread-local cache of its own, since a
   * namespace's thread-local storage comes out of the process's static TLS
   * (docs/isolation.md). */
  size_t (*stack_room)(void);
} mpi_host_api;

typedef struct mpi_start_options {
  const char* python_home; /* sys.prefix of the Python to embed */
  int import_torch;        /* import torch while starting */
  /* Takes (1) or drops (0) a lock shared by every interpreter of the
   * process, around work that reads and restores process-wide state. */
  void (*process_lock)(int acquire);
  const mpi_host_api* host; /* lives as long as the process */
  /* libmanypy_hooks.so, loaded into the namespace before torch. */
  const char* hooks_library;
} mpi_start_options;

typedef struct mpi_lease_options {
  const char* const* extra_sys_path;
  size_t extra_sys_path_count;
  int intra_op_threads;
  /* 1: os._exit and os.abort end the process; 0: they raise instead. */
  int allow_process_exit;
} mpi_lease_options;

typedef struct manypy_interp_api {
  uint32_t version;
  uint32_t size; /* sizeof(manypy_interp_api) on the interpreter side */

  /* Starts Python on the calling thread, which becomes the interpreter's
   * main thread. Returns with the GIL released. */
  int (*start)(const mpi_start_options* options, const mpi_sink* sink);

  /* Begins a lease by a pool: remembers sys.path and sys.modules (and, at
   * the first lease, the interpreter's settings), adds the pool's sys.path
   * entries, sets intra-op threads, makes a fresh globals dict. */
  int (*lease_begin)(const mpi_lease_options* options, const mpi_sink* sink);
  /* Ends a lease: drops the globals, modules imported since lease_begin and
   * the extra sys.path entries; collects garbage; puts the settings model
   * code can change back as the first lease found them. Fails
   * (manypy.LeaseStateError) when one cannot be: the interpreter must not
   * serve another pool. */
  int (*lease_end)(const mpi_sink* sink);

  /* Statements into the lease's globals. `model_id` and `request_id`
   * (either may be NULL; both NULL: none) are the context that operator
   * callbacks of everything it runs report, as for object_call; `control`
   * (NULL for none) bounds it as for object_call. */
  int (*exec)(const char* source, const char* model_id, const char* request_id,
              mpi_call_control* control, const mpi_sink* sink);
  /* One expression; its value goes to the sink. The rest as for exec. */
  int (*eval)(const char* expression, const char* model_id, const char* request_id,
              mpi_call_control* control, const mpi_sink* sink);

  /* Opens package `package_id` (its archive is `size` bytes of host memory
   * at `data`, valid until package_close) in this interpreter. `control`
   * (NULL for none) bounds it as for object_call. */
  int (*package_open)(uint64_t package_id, const void* data, size_t size, mpi_call_control* control,
                      const mpi_sink* sink);
  void (*package_close)(uint64_t package_id);

  /* Unpickles module/name of an open package as object `object_id`;
   * `control` as for package_open. */
  int (*object_load)(uint64_t object_id, uint64_t package_id, const char* module, const char* name,
                     mpi_call_control* control, const mpi_sink* sink);
  void (*object_drop)(uint64_t object_id);
  /* Calls the object (method NULL) or its method; args is a LIST or TUPLE or
   * NULL, kwargs a DICT or NULL. The result goes to the sink. `control` is
   * NULL for a call that cannot stop early; otherwise a call whose
   * control->stop is set before it starts runs nothing, and one stopped
   * while running reports control->stop as its error, with the traceback of
   * where it stopped. */
  int (*object_call)(uint64_t object_id, const char* method, const mpi_value* args,
                     const mpi_value* kwargs, const char* model_id, const char* request_id,
                     mpi_call_control* control, const mpi_sink* sink);
  /* `control` (NULL for none) as for object_call. */
  int (*object_getattr)(uint64_t object_id, const char* name, mpi_call_control* control,
                        const mpi_sink* sink);
  int (*object_hasattr)(uint64_t object_id, const char* name, int* out_has, const mpi_sink* sink);

  /* Operator callbacks in this interpreter's libtorch (hooks_api.h); add
   * returns MPI_OK or MPI_ERR_RESOURCE_EXHAUSTED (no slot left). */
  int (*add_op_callbacks)(uint64_t id, double sampling_probability, int needs_inputs,
                          int32_t interpreter, void (*emit)(uint64_t, int, const void*));
  void (*remove_op_callbacks)(uint64_t id);

  /* torch.ops.load_library(path) in this interpreter. */
  int (*load_library)(const char* path, const mpi_sink* sink);

  /* Stops the call of `control` if it is running Python code in this
   * interpreter, as mpi_call_control describes. Called by the host after it
   * set control->stop, from a thread of its own; takes the GIL, so it waits
   * while C code holds it. Does nothing if the call is not running (not
   * started yet, or finished). */
  void (*interrupt)(mpi_call_control* control);

  /* Called on a host thread that is about to exit, after its last call into
   * this interpreter: deletes its Python thread state. Never called on the
   * interpreter's main thread. */
  void (*thread_exit)(void);

  /* The stop of `control`'s call again, where its interrupt's trace cannot
   * raise it: the call runs inside a trace, profile or monitoring callback,
   * or sends no events, or was escalated and still runs. Injects the stop
   * as an asynchronous exception, raised at the eval loop's next check (a
   * backward jump, a call), and marks the call escalated (so the
   * interpreter retires when it ends). Leaves the call to the trace while
   * the trace's own grace period runs. The host calls it from a grace
   * period after interrupt() on, every few milliseconds, until the call
   * ends. Takes the GIL. Returns 1 while the call still runs in this
   * interpreter, 0 once it ended. */
  int (*escalate)(mpi_call_control* control);
} manypy_interp_api;

/* Returns the table for `version`, or NULL if this library does not speak it. */
typedef const manypy_interp_api* (*manypy_interp_get_api_fn)(uint32_t version);

#ifdef __cplusplus
}
#endif

#endif /* MANYPY_INTERP_API_H */
