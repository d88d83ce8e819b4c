/*
 * manypy: a pool of isolated embedded CPython interpreters, each with its own
 * GIL, behind a stable C ABI.
 *
 * Conventions (apply to every function below unless its comment says
 * otherwise):
 *
 *  - Handles are opaque. Every constructor has exactly one destructor; every
 *    destructor returns void and accepts NULL.
 *  - A fallible function returns `manypy_status*`: NULL on success, otherwise
 *    an owned status object the caller frees with manypy_status_free(). There
 *    is no thread-local "last error".
 *  - A failing call leaves its out-parameters untouched.
 *  - Strings passed in are borrowed for the duration of the call and must be
 *    NUL-terminated UTF-8. Strings returned are owned by the object they came
 *    from and live as long as it does.
 *  - No C++ exception ever crosses this boundary.
 *  - Thread safety is stated per type.
 */
#ifndef MANYPY_H
#define MANYPY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define MANYPY_API __attribute__((visibility("default")))
#else
#define MANYPY_API
#endif

/* ------------------------------------------------------------------------ */
/* Version                                                                  */
/* ------------------------------------------------------------------------ */

#define MANYPY_VERSION_MAJOR 0
#define MANYPY_VERSION_MINOR 1
#define MANYPY_VERSION_PATCH 0
#define MANYPY_VERSION_STRING "0.1.0"
/* Encoded as major * 10000 + minor * 100 + patch. */
#define MANYPY_VERSION_NUMBER \
  (MANYPY_VERSION_MAJOR * 10000 + MANYPY_VERSION_MINOR * 100 + MANYPY_VERSION_PATCH)

/* The version of the library actually loaded, encoded as MANYPY_VERSION_NUMBER.
 * Bindings compare it with the header they were built against: the major
 * numbers must match and the runtime minor must be >= the header's.
 * Thread safety: any thread, any time. */
MANYPY_API uint32_t manypy_version_number(void);

/* The loaded library's version as "major.minor.patch". Static storage.
 * Thread safety: any thread, any time. */
MANYPY_API const char* manypy_version_string(void);

/* ------------------------------------------------------------------------ */
/* Status                                                                   */
/* ------------------------------------------------------------------------ */

/* Stable, append-only codes. Never renumbered. */
typedef enum manypy_code {
  MANYPY_OK = 0,
  /* A NULL handle or pointer, an empty string, a bad option value. */
  MANYPY_ERR_INVALID_ARGUMENT = 1,
  /* An index or count outside its allowed range (interpreter index, pool size). */
  MANYPY_ERR_OUT_OF_RANGE = 2,
  /* Python raised an exception; see manypy_status_python_type() and
   * manypy_status_traceback(). */
  MANYPY_ERR_PYTHON = 3,
  /* Python source did not compile (a SyntaxError); traceback attached. */
  MANYPY_ERR_SYNTAX = 4,
  /* A Python result has a type the C API cannot represent. */
  MANYPY_ERR_UNSUPPORTED_TYPE = 5,
  /* A value was asked for as a kind it is not (e.g. a string as int64). */
  MANYPY_ERR_WRONG_KIND = 6,
  /* The process ran out of static TLS for another interpreter. The message
   * names the fix: start the process with
   * GLIBC_TUNABLES=glibc.rtld.optional_static_tls=<bytes>. */
  MANYPY_ERR_STATIC_TLS = 7,
  /* A platform resource is exhausted: link-map namespaces, pthread keys,
   * threads, memory. */
  MANYPY_ERR_RESOURCE_EXHAUSTED = 8,
  /* The dynamic loader or the Python runtime could not be started. */
  MANYPY_ERR_LOADER = 9,
  /* The interpreter is unusable (it failed to start earlier). */
  MANYPY_ERR_INTERPRETER_BROKEN = 10,
  /* A bug in manypy: please report it with the message. */
  MANYPY_ERR_INTERNAL = 11
} manypy_code;

/* Owned by the caller; free with manypy_status_free(). Not thread safe:
 * use a status from one thread at a time. */
typedef struct manypy_status manypy_status;

/* The status's code. A NULL status is success: returns MANYPY_OK. */
MANYPY_API manypy_code manypy_status_code(const manypy_status* status);

/* A stable, upper-case name for a code, e.g. "MANYPY_ERR_PYTHON". Static
 * storage; "MANYPY_UNKNOWN" for values this version does not know. */
MANYPY_API const char* manypy_code_name(manypy_code code);

/* One line describing the failure, e.g.
 * "interpreter 1: ZeroDivisionError: division by zero". Owned by the status.
 * "" for a NULL status. */
MANYPY_API const char* manypy_status_message(const manypy_status* status);

/* For MANYPY_ERR_PYTHON and MANYPY_ERR_SYNTAX: the Python exception's
 * qualified type name, e.g. "ZeroDivisionError". "" otherwise. Owned by the
 * status. */
MANYPY_API const char* manypy_status_python_type(const manypy_status* status);

/* For MANYPY_ERR_PYTHON and MANYPY_ERR_SYNTAX: the formatted Python
 * traceback, as Python's traceback.format_exception() prints it. "" otherwise.
 * Owned by the status. */
MANYPY_API const char* manypy_status_traceback(const manypy_status* status);

/* Frees a status. Accepts NULL. */
MANYPY_API void manypy_status_free(manypy_status* status);

/* ------------------------------------------------------------------------ */
/* Values: what manypy_pool_eval returns                                    */
/* ------------------------------------------------------------------------ */

typedef enum manypy_value_kind {
  MANYPY_VALUE_NONE = 0,
  MANYPY_VALUE_BOOL = 1,
  MANYPY_VALUE_INT64 = 2,
  MANYPY_VALUE_DOUBLE = 3,
  MANYPY_VALUE_STRING = 4
} manypy_value_kind;

/* An immutable value copied out of an interpreter. Owned by the caller; free
 * with manypy_value_free(). Safe to read from several threads at once. */
typedef struct manypy_value manypy_value;

/* The value's kind. MANYPY_VALUE_NONE for a NULL value. */
MANYPY_API manypy_value_kind manypy_value_get_kind(const manypy_value* value);

/* Typed accessors. Each fails with MANYPY_ERR_WRONG_KIND when the value is of
 * another kind and MANYPY_ERR_INVALID_ARGUMENT on NULL arguments. */
MANYPY_API manypy_status* manypy_value_get_bool(const manypy_value* value, int* out);
MANYPY_API manypy_status* manypy_value_get_int64(const manypy_value* value, int64_t* out);
MANYPY_API manypy_status* manypy_value_get_double(const manypy_value* value, double* out);

/* The UTF-8 bytes of a string value and their length (the string may contain
 * NUL; it is also NUL-terminated). The bytes are owned by the value.
 * `out_length` may be NULL when the caller only needs the NUL-terminated
 * string. */
MANYPY_API manypy_status* manypy_value_get_string(const manypy_value* value,
                                                  const char** out_utf8,
                                                  size_t* out_length);

/* Frees a value. Accepts NULL. */
MANYPY_API void manypy_value_free(manypy_value* value);

/* ------------------------------------------------------------------------ */
/* Pool options                                                             */
/* ------------------------------------------------------------------------ */

/* How a call reaches an interpreter.
 * DIRECT:  the calling thread enters the interpreter itself. Fastest. Each
 *          host thread that exits after calling leaves a little memory behind
 *          inside each interpreter it used (see docs/threads.md).
 * HANDOFF: the call runs on a thread the library owns (one per interpreter)
 *          while the caller waits. Costs a thread hand-over per call; memory
 *          stays flat however many host threads come and go. */
typedef enum manypy_thread_mode {
  MANYPY_THREAD_MODE_DIRECT = 0,
  MANYPY_THREAD_MODE_HANDOFF = 1
} manypy_thread_mode;

/* Options for manypy_pool_create. Owned by the caller. Not thread safe. */
typedef struct manypy_pool_options manypy_pool_options;

/* New options with defaults: 1 interpreter, no extra sys.path entries, 1
 * intra-op thread per interpreter, DIRECT thread mode. Returns NULL only when
 * out of memory. */
MANYPY_API manypy_pool_options* manypy_pool_options_new(void);

/* Frees options. Accepts NULL. */
MANYPY_API void manypy_pool_options_free(manypy_pool_options* options);

/* Number of interpreters, 1 to manypy_max_interpreters(). Checked by
 * manypy_pool_create, which fails with MANYPY_ERR_OUT_OF_RANGE outside it. */
MANYPY_API manypy_status* manypy_pool_options_set_interpreters(manypy_pool_options* options,
                                                              size_t count);

/* Appends a directory to every interpreter's sys.path for the pool's lifetime
 * (as torch::deploy's PathEnvironment). The string is copied. */
MANYPY_API manypy_status* manypy_pool_options_add_sys_path(manypy_pool_options* options,
                                                          const char* path);

/* Intra-op threads per interpreter (torch.set_num_threads), >= 1. Default 1:
 * parallelism comes from interpreters, not from inside one op. */
MANYPY_API manypy_status* manypy_pool_options_set_intra_op_threads(
    manypy_pool_options* options, int threads);

MANYPY_API manypy_status* manypy_pool_options_set_thread_mode(manypy_pool_options* options,
                                                             manypy_thread_mode mode);

/* ------------------------------------------------------------------------ */
/* Pool                                                                     */
/* ------------------------------------------------------------------------ */

/* The most interpreters this process can hold at once (all pools together):
 * bounded by glibc's link-map namespaces and by pthread keys. Static TLS may
 * bound it lower at run time; that is reported as MANYPY_ERR_STATIC_TLS.
 * Thread safety: any thread. */
MANYPY_API size_t manypy_max_interpreters(void);

/* A pool of interpreters. Thread safe: any number of threads may call the
 * functions below on one pool at once, except manypy_pool_destroy, which must
 * not race with other calls on the same pool. */
typedef struct manypy_pool manypy_pool;

/* Pass as the interpreter index to let the pool choose: a free interpreter
 * if there is one, else the least loaded. */
#define MANYPY_ANY_INTERPRETER (-1)

/* Creates a pool. Interpreters are leased from a process-wide set and started
 * on first use (each imports torch, about a second); later pools reuse them.
 * `options` is borrowed; NULL means defaults. On success *out_pool is owned by
 * the caller; free it with manypy_pool_destroy(). */
MANYPY_API manypy_status* manypy_pool_create(const manypy_pool_options* options,
                                            manypy_pool** out_pool);

/* Destroys a pool and returns its interpreters to the process-wide set,
 * cleaned: objects it created and modules it imported are dropped and
 * sys.path is restored. Waits for calls in flight on other threads to finish
 * (but must not be called concurrently with new calls). Accepts NULL. */
MANYPY_API void manypy_pool_destroy(manypy_pool* pool);

/* Number of interpreters in the pool. 0 for NULL. */
MANYPY_API size_t manypy_pool_size(const manypy_pool* pool);

/* Runs Python source (statements) in an interpreter's global namespace, which
 * persists for the pool's lifetime. `interpreter` is an index in
 * [0, manypy_pool_size) or MANYPY_ANY_INTERPRETER. */
MANYPY_API manypy_status* manypy_pool_exec(manypy_pool* pool, int32_t interpreter,
                                          const char* source);

/* Runs the same source in every interpreter of the pool, in index order, and
 * stops at the first failure, whose message names the interpreter. Use it to
 * define functions or register module source everywhere. */
MANYPY_API manypy_status* manypy_pool_exec_all(manypy_pool* pool, const char* source);

/* Evaluates one Python expression and copies its result out. Results of type
 * None, bool, int (fitting int64), float and str are supported; others fail
 * with MANYPY_ERR_UNSUPPORTED_TYPE. On success *out_value is owned by the
 * caller. */
MANYPY_API manypy_status* manypy_pool_eval(manypy_pool* pool, int32_t interpreter,
                                          const char* expression, manypy_value** out_value);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MANYPY_H */
