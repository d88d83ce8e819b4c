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

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MANYPY_INTERP_API_VERSION 1u

/* Status codes used across the boundary; they match manypy_code. */
enum {
  MPI_OK = 0,
  MPI_ERR_INVALID_ARGUMENT = 1,
  MPI_ERR_OUT_OF_RANGE = 2,
  MPI_ERR_PYTHON = 3,
  MPI_ERR_SYNTAX = 4,
  MPI_ERR_UNSUPPORTED_TYPE = 5,
  MPI_ERR_STATIC_TLS = 7,
  MPI_ERR_LOADER = 9,
  MPI_ERR_INTERNAL = 11
};

enum {
  MPI_VALUE_NONE = 0,
  MPI_VALUE_BOOL = 1,
  MPI_VALUE_INT64 = 2,
  MPI_VALUE_DOUBLE = 3,
  MPI_VALUE_STRING = 4
};

typedef struct mpi_value {
  int kind;
  int64_t i; /* BOOL (0/1) and INT64 */
  double d;
  const char* s; /* STRING: borrowed for the duration of the sink call */
  size_t len;
} mpi_value;

/* Host-side receiver of results. Every pointer handed to it is borrowed for
 * the duration of the callback only. */
typedef struct mpi_sink {
  void* ctx;
  /* An error: code, Python type name ("" if none), one-line message,
   * traceback ("" if none). */
  void (*error)(void* ctx, int code, const char* py_type, const char* message,
                const char* traceback);
  void (*value)(void* ctx, const mpi_value* value);
} mpi_sink;

typedef struct mpi_start_options {
  const char* python_home;     /* sys.prefix of the Python to embed */
  int import_torch;            /* import torch while starting */
  /* Takes (1) or drops (0) a lock shared by every interpreter of the
   * process, around work that reads and restores process-wide state. */
  void (*process_lock)(int acquire);
} mpi_start_options;

typedef struct mpi_lease_options {
  const char* const* extra_sys_path;
  size_t extra_sys_path_count;
  int intra_op_threads;
} mpi_lease_options;

typedef struct manypy_interp_api {
  uint32_t version;
  uint32_t size; /* sizeof(manypy_interp_api) on the interpreter side */

  /* Starts Python on the calling thread, which becomes the interpreter's
   * main thread. Returns with the GIL released. */
  int (*start)(const mpi_start_options* options, const mpi_sink* sink);

  /* Begins a lease by a pool: remembers sys.path and sys.modules, adds the
   * pool's sys.path entries, sets intra-op threads, makes a fresh globals
   * dict. */
  int (*lease_begin)(const mpi_lease_options* options, const mpi_sink* sink);
  /* Ends a lease: drops the globals, modules imported since lease_begin and
   * the extra sys.path entries; collects garbage. */
  int (*lease_end)(const mpi_sink* sink);

  /* Statements into the lease's globals. */
  int (*exec)(const char* source, const mpi_sink* sink);
  /* One expression; its value goes to sink->value. */
  int (*eval)(const char* expression, const mpi_sink* sink);

  /* Called on a host thread that is about to exit, after its last call into
   * this interpreter: deletes its Python thread state. Never called on the
   * interpreter's main thread. */
  void (*thread_exit)(void);
} manypy_interp_api;

/* Returns the table for `version`, or NULL if this library does not speak it. */
typedef const manypy_interp_api* (*manypy_interp_get_api_fn)(uint32_t version);

#ifdef __cplusplus
}
#endif

#endif /* MANYPY_INTERP_API_H */
