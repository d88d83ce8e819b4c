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

/* DLPack (https://github.com/dmlc/dlpack), the version torch 1.13 speaks:
 * Debian's libdlpack-dev 0.6. */
#include <dlpack/dlpack.h>

/* DLPack's type code for bool (kDLBool from DLPack 0.8 on: 8 bits, 1 lane,
 * one byte per element holding 0 or 1). DLPack 0.6 has no name for it. */
#define MANYPY_DL_BOOL 6

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define MANYPY_API __attribute__((visibility("default")))
#else
#define MANYPY_API
#endif

/* Marks every function that returns a manypy_status*: dropping the result
 * leaks the status and ignores a failure, so compilers warn. (In C, GCC's
 * warn_unused_result is not silenced by a cast to void: free the status.)
 * Clang takes no standard attribute after MANYPY_API's GNU one ("'nodiscard'
 * attribute cannot be applied to types"); its warn_unused_result is the
 * same attribute as [[nodiscard]]. */
#if defined(__cplusplus) && __cplusplus >= 201703L && !defined(__clang__)
#define MANYPY_NODISCARD [[nodiscard]]
#elif defined(__GNUC__) || defined(__clang__)
#define MANYPY_NODISCARD __attribute__((warn_unused_result))
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 202311L
#define MANYPY_NODISCARD [[nodiscard]]
#else
#define MANYPY_NODISCARD
#endif

/* ------------------------------------------------------------------------ */
/* Version                                                                  */
/* ------------------------------------------------------------------------ */

/* While the major is 0, the minor is the ABI: SONAME libmanypy.so.0.MINOR.
 * Each function carries the symbol version of the release that added it:
 * MANYPY_0.2 for those of 0.2, MANYPY_0.3 for those 0.3 added (marked
 * "Since 0.3." below). A patch release never changes the ABI. From 1.0 on,
 * the major is the ABI. CMakeLists.txt's project version must match. */
#define MANYPY_VERSION_MAJOR 0
#define MANYPY_VERSION_MINOR 3
#define MANYPY_VERSION_PATCH 0
#define MANYPY_VERSION_STRING "0.3.0"
/* Encoded as major * 10000 + minor * 100 + patch. */
#define MANYPY_VERSION_NUMBER \
  (MANYPY_VERSION_MAJOR * 10000 + MANYPY_VERSION_MINOR * 100 + MANYPY_VERSION_PATCH)

/* The version of the library actually loaded, encoded as MANYPY_VERSION_NUMBER.
 * Bindings compare it with the header they were built against: the major
 * numbers must match and, while the major is 0, the minor numbers too (from
 * 1.0 on, the runtime minor must be >= the header's).
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
  /* A NULL handle or pointer, an empty path, a name that is not valid UTF-8,
   * a flag or option value out of its range, a value nested too deep. */
  MANYPY_ERR_INVALID_ARGUMENT = 1,
  /* An index or count outside its allowed range (interpreter index, pool size). */
  MANYPY_ERR_OUT_OF_RANGE = 2,
  /* Python code raised an exception (or a TorchScript method did); see
   * manypy_status_python_type() and manypy_status_traceback(). */
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
   * threads, memory; or, in DIRECT mode, the calling thread's stack (a call
   * needs 256 KiB of it free; see docs/threads.md). */
  MANYPY_ERR_RESOURCE_EXHAUSTED = 8,
  /* The dynamic loader or the Python runtime could not be started. */
  MANYPY_ERR_LOADER = 9,
  /* The interpreter is unusable: it failed to start earlier, or it was
   * retired after a stopped call whose clean-up was cut short (see
   * "Deadlines and cancellation"); the message says which. */
  MANYPY_ERR_INTERPRETER_BROKEN = 10,
  /* A bug in manypy: please report it with the message. */
  MANYPY_ERR_INTERNAL = 11,
  /* A file named by the caller does not exist or cannot be read. */
  MANYPY_ERR_NOT_FOUND = 12,
  /* Not a zip archive, or a truncated or corrupt one. */
  MANYPY_ERR_BAD_ARCHIVE = 13,
  /* A readable zip archive that is not a torch.package. */
  MANYPY_ERR_NOT_A_PACKAGE = 14,
  /* An archive written by a newer (or much older) PyTorch format. */
  MANYPY_ERR_UNSUPPORTED_VERSION = 15,
  /* Python code needs a module that is neither in the package nor installed
   * (typically a module the package marks `extern`). */
  MANYPY_ERR_MODULE_NOT_FOUND = 16,
  /* A tensor with a dtype, device, shape or strides manypy cannot accept. */
  MANYPY_ERR_BAD_TENSOR = 17,
  /* A name (attribute, method, record, dict key) that does not exist. */
  MANYPY_ERR_NO_SUCH_NAME = 18,
  /* The call's deadline (manypy_call_options_set_timeout or _set_deadline)
   * passed before it finished; its Python code was stopped. */
  MANYPY_ERR_DEADLINE_EXCEEDED = 19,
  /* The call's cancel token (manypy_call_options_set_cancel_token) was
   * cancelled before it finished; its Python code was stopped. */
  MANYPY_ERR_CANCELLED = 20,
  /* An archive the pool, or the trust of a host load, does not trust
   * (manypy_pool_options_add_trusted_sha256, _set_archive_verifier,
   * manypy_archive_trust): refused before any of it ran. */
  MANYPY_ERR_UNTRUSTED_ARCHIVE = 21,
  /* Refused at once, without running, because the pool already has as many
   * calls waiting for an interpreter as its queue limit allows
   * (manypy_pool_options_set_queue_limit). Retry later or shed the load.
   * Since 0.3. */
  MANYPY_ERR_OVERLOADED = 22,
  /* Refused at once, without running, because the pool is draining
   * (manypy_pool_drain): it finishes the calls it has and takes no new
   * ones. Send the call to another pool or process. Since 0.3. */
  MANYPY_ERR_DRAINING = 23
} manypy_code;

/* One more than the largest code this version knows: the length of the
 * per-code arrays of manypy_pool_stats and manypy_request_metrics. Room is
 * left for codes later versions append. Since 0.3. */
#define MANYPY_CODE_SLOTS 32

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

/* When a Python exception caused the error: its qualified type name, e.g.
 * "ZeroDivisionError". That is always so for MANYPY_ERR_PYTHON and
 * MANYPY_ERR_SYNTAX, and may be for the more specific codes a Python
 * exception maps to (MANYPY_ERR_MODULE_NOT_FOUND: "ModuleNotFoundError",
 * MANYPY_ERR_NO_SUCH_NAME: "AttributeError", MANYPY_ERR_BAD_ARCHIVE:
 * "zipfile.BadZipFile", MANYPY_ERR_BAD_TENSOR). "" when no exception was involved.
 * Owned by the status. */
MANYPY_API const char* manypy_status_python_type(const manypy_status* status);

/* The formatted Python traceback (as traceback.format_exception prints it)
 * whenever manypy_status_python_type() is not "", or TorchScript's own
 * traceback for an error raised by a TorchScript method; "" otherwise.
 * Owned by the status. */
MANYPY_API const char* manypy_status_traceback(const manypy_status* status);

/* Frees a status. Accepts NULL. */
MANYPY_API void manypy_status_free(manypy_status* status);

/* A new status with `code` and `message` (UTF-8, copied; NULL means ""),
 * and neither Python type nor traceback, for a binding's own helpers that
 * return statuses as the library's functions do. The caller owns it (free
 * it with manypy_status_free), as any status.
 *  - MANYPY_OK returns NULL: success is no status.
 *  - A code this library does not know, or a message that is not valid
 *    UTF-8, returns a MANYPY_ERR_INVALID_ARGUMENT status saying so instead.
 *  - When memory is exhausted it returns a MANYPY_ERR_RESOURCE_EXHAUSTED
 *    status ("out of memory"; possibly a static one that
 *    manypy_status_free knows): never NULL for a failure code.
 * Thread safety: any thread. Since 0.3. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_status_new(manypy_code code, const char* message);

/* ------------------------------------------------------------------------ */
/* Values: arguments and results                                            */
/* ------------------------------------------------------------------------ */

typedef enum manypy_value_kind {
  MANYPY_VALUE_NONE = 0,
  MANYPY_VALUE_BOOL = 1,
  MANYPY_VALUE_INT64 = 2,
  MANYPY_VALUE_DOUBLE = 3,
  MANYPY_VALUE_STRING = 4,
  MANYPY_VALUE_TENSOR = 5,
  MANYPY_VALUE_BYTES = 6,
  MANYPY_VALUE_LIST = 7,
  MANYPY_VALUE_TUPLE = 8,
  MANYPY_VALUE_DICT = 9 /* string keys, insertion order kept */
} manypy_value_kind;

/* A value: a scalar, a string, bytes, a tensor, or a list, tuple or
 * string-keyed dict of values. Owned by whoever holds the pointer; free with
 * manypy_value_free() (which frees children too, without recursion). Building
 * a value (append, dict_set) is for one thread; a value that is only read may
 * be shared by any number of threads, and may be passed to any number of
 * calls. A value nests at most MANYPY_VALUE_MAX_DEPTH containers (a list in a
 * list is 2): append and dict_set refuse deeper ones, and a Python or
 * TorchScript result deeper than that is MANYPY_ERR_UNSUPPORTED_TYPE. */
#define MANYPY_VALUE_MAX_DEPTH 64
typedef struct manypy_value manypy_value;

/* Constructors. Each returns NULL only when memory is exhausted. */
MANYPY_API manypy_value* manypy_value_new_none(void);
MANYPY_API manypy_value* manypy_value_new_bool(int value);
MANYPY_API manypy_value* manypy_value_new_int64(int64_t value);
MANYPY_API manypy_value* manypy_value_new_double(double value);
MANYPY_API manypy_value* manypy_value_new_list(void);
MANYPY_API manypy_value* manypy_value_new_tuple(void);
MANYPY_API manypy_value* manypy_value_new_dict(void);
/* Copies `length` bytes. NULL also when `data` is NULL and `length` > 0. */
MANYPY_API manypy_value* manypy_value_new_bytes(const void* data, size_t length);
/* Copies `length` bytes, which must be valid UTF-8 (MANYPY_ERR_INVALID_ARGUMENT
 * otherwise). */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_value_new_string(
    const char* utf8, size_t length, manypy_value** out_value);

/* Appends `item` to a list or tuple. Takes ownership of `item` whether or not
 * the call succeeds. MANYPY_ERR_INVALID_ARGUMENT if the list would nest more
 * than MANYPY_VALUE_MAX_DEPTH containers. Amortised O(1). */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_value_append(
    manypy_value* sequence, manypy_value* item);
/* Sets `key` (UTF-8, copied) of a dict to `item`, replacing an earlier value.
 * Takes ownership of `item` whether or not the call succeeds. Depth as for
 * manypy_value_append. Amortised O(1): keys are hashed. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_value_dict_set(
    manypy_value* dict, const char* key, manypy_value* item);
/* The same with a key of `key_length` bytes, which may contain NUL (it
 * reaches Python whole; manypy_value_dict_key reads it back with its
 * length). UTF-8 is checked as for manypy_value_dict_set. `key` may be NULL
 * only when `key_length` is 0 (the empty key). Since 0.3. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_value_dict_set_n(
    manypy_value* dict, const char* key, size_t key_length, manypy_value* item);

/* The value's kind. MANYPY_VALUE_NONE for a NULL value. */
MANYPY_API manypy_value_kind manypy_value_get_kind(const manypy_value* value);

/* Typed accessors. Each fails with MANYPY_ERR_WRONG_KIND when the value is of
 * another kind and MANYPY_ERR_INVALID_ARGUMENT on NULL arguments. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_value_get_bool(
    const manypy_value* value, int* out);
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_value_get_int64(
    const manypy_value* value, int64_t* out);
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_value_get_double(
    const manypy_value* value, double* out);

/* The UTF-8 bytes of a string value and their length (the string may contain
 * NUL; it is also NUL-terminated). The bytes are owned by the value.
 * `out_length` may be NULL when the caller only needs the NUL-terminated
 * string. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_value_get_string(
    const manypy_value* value, const char** out_utf8, size_t* out_length);

/* The bytes of a bytes value, owned by the value. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_value_get_bytes(
    const manypy_value* value, const void** out_data, size_t* out_length);

/* Number of items of a list, tuple or dict (MANYPY_ERR_WRONG_KIND for other
 * kinds). */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_value_length(
    const manypy_value* value, size_t* out_length);

/* Item `index` of a list or tuple, or the value of the `index`-th entry of a
 * dict. Borrowed: owned by `value`, and valid until `value` is freed (later
 * appends and dict_sets on `value` do not move it; a dict_set that replaces
 * this entry's value frees it). MANYPY_ERR_OUT_OF_RANGE past the end. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_value_get_item(
    const manypy_value* value, size_t index, const manypy_value** out_item);

/* The key of the `index`-th entry of a dict (insertion order): UTF-8,
 * NUL-terminated, owned by `value`. A key from Python may contain NUL;
 * `out_length` (may be NULL) receives its full length in bytes. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_value_dict_key(
    const manypy_value* value, size_t index, const char** out_key, size_t* out_length);

/* The value under `key` in a dict. Borrowed, valid as manypy_value_get_item's
 * results are. MANYPY_ERR_NO_SUCH_NAME if absent. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_value_dict_get(
    const manypy_value* value, const char* key, const manypy_value** out_item);
/* The same with a key of `key_length` bytes, which may contain NUL; `key`
 * may be NULL only when `key_length` is 0. Since 0.3. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_value_dict_get_n(
    const manypy_value* value, const char* key, size_t key_length, const manypy_value** out_item);

/* A new value equal to `value` (borrowed), owned by the caller: lists,
 * tuples, dicts and their keys, strings and bytes are copied; tensors are
 * shared, not copied (the clone's tensors are the same memory, kept alive
 * by either value). So a binding may prepare an argument once and put a
 * clone of it into each call's arguments (append and dict_set take
 * ownership of their item), and free the original whenever it likes. The
 * value and its clones are independent values: each may be built on or
 * freed by its own thread. Reading `value` while cloning it is safe from
 * any number of threads, as any reading. Since 0.3. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_value_clone(
    const manypy_value* value, manypy_value** out_value);

/* Frees a value and its children. Accepts NULL. Tensor memory it shares with
 * DLManagedTensors handed out by manypy_value_get_tensor, with manypy_tensor
 * references or with clones stays valid until those are released too. */
MANYPY_API void manypy_value_free(manypy_value* value);

/* ------------------------------------------------------------------------ */
/* Tensors (DLPack, CPU only)                                               */
/* ------------------------------------------------------------------------ */

/* Wraps a caller's DLPack tensor without copying. Takes ownership of
 * `tensor`: manypy calls tensor->deleter(tensor) exactly once, when neither
 * the value nor any interpreter needs the memory any more (which may be after
 * manypy_value_free, if a model kept the tensor), or at once if this call
 * fails. Any thread may run the deleter. The data must stay valid and
 * unmodified by the caller until then. The model may write to it: a torch
 * tensor over lent memory is writable (DLPack 0.6, which torch 1.13
 * speaks, has no read-only flag), so an in-place operation (x.mul_(2))
 * changes the caller's memory, during the call or later if the model keeps
 * the tensor. Lend only memory the model may change; copy read-only memory
 * (a PROT_READ mapping: a write there kills the process) with
 * manypy_value_new_tensor_from_buffer(copy = 1). Strided tensors are accepted (strides NULL means
 * C-contiguous; byte_offset is honoured). Dtypes: int8/16/32/64, uint8,
 * float16/32/64, bfloat16, complex64/128 and bool (MANYPY_DL_BOOL, 8 bits),
 * one lane. Fails with MANYPY_ERR_BAD_TENSOR for a device other than kDLCPU,
 * another dtype, a negative size or stride, a layout too large to address,
 * NULL data with elements, or a layout (byte_offset included) that reaches
 * memory not mapped in this process (the check cannot see a buffer's size,
 * only whether its pages exist: manypy_value_new_tensor_from_buffer, which
 * takes the size, checks more). */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_value_new_tensor(
    DLManagedTensor* tensor, manypy_value** out_value);

/* A tensor over a caller's buffer, for callers without a DLManagedTensor.
 * `shape` has `ndim` entries; `strides` (in elements) is NULL for
 * C-contiguous. `data_size` is the buffer's size in bytes: every element the
 * shape and strides address must lie inside it (MANYPY_ERR_BAD_TENSOR
 * otherwise). shape and strides are copied.
 * Borrowed (`copy` = 0): the buffer is used in place, and the model may
 * write to it (see manypy_value_new_tensor): lend only writable memory the
 * model may change. `release`, if not NULL, is called exactly once with
 * `release_ctx` when manypy no longer needs the buffer, or at once if this
 * call fails.
 * Copied (`copy` = 1): the bytes are copied now (a contiguous copy); `release`
 * is called before this function returns. Any other `copy` is
 * MANYPY_ERR_INVALID_ARGUMENT. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_value_new_tensor_from_buffer(
    void* data, size_t data_size, DLDataType dtype, int32_t ndim, const int64_t* shape,
    const int64_t* strides, int copy, void (*release)(void* release_ctx), void* release_ctx,
    manypy_value** out_value);

/* A tensor value's data as a new DLManagedTensor, without copying. The
 * caller owns the result and must call its deleter exactly once; the data
 * stays valid until then, even after the value is freed. Any thread may call
 * the deleter. A bool tensor has dtype {MANYPY_DL_BOOL, 8, 1}. A result
 * tensor is the host's alone: nothing in the interpreter can reach its
 * memory (it was copied if the model kept it), so no model changes it
 * afterwards; a tensor the caller lent to a model is still the caller's
 * memory, which that model may write. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_value_get_tensor(
    const manypy_value* value, DLManagedTensor** out_tensor);

/* A tensor shared by reference: one tensor (the same one tensor values and
 * interpreters hold inside manypy) that a binding can keep as its own
 * tensor object, read, and pass to any number of calls without a copy or a
 * new DLPack wrapper per call. Each reference is released once with
 * manypy_tensor_release; the memory's deleter (or release callback) runs
 * when the last reference is gone and no value or interpreter uses the
 * tensor any more, on whichever thread that happens. The counting is
 * atomic: references may be taken and released by any threads at once,
 * and reading the tensor from any number of threads is safe. Memory rules
 * (who may write it) are those of manypy_value_new_tensor. Since 0.3. */
typedef struct manypy_tensor manypy_tensor;

/* A tensor with one reference, owned by the caller, from a caller's DLPack
 * tensor: ownership and checks as for manypy_value_new_tensor (the deleter
 * runs exactly once, at once if this call fails). Since 0.3. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_tensor_new(
    DLManagedTensor* tensor, manypy_tensor** out_tensor);

/* A tensor with one reference, owned by the caller, over a caller's
 * buffer: arguments, checks, copy and release exactly as for
 * manypy_value_new_tensor_from_buffer. Since 0.3. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_tensor_new_from_buffer(
    void* data, size_t data_size, DLDataType dtype, int32_t ndim, const int64_t* shape,
    const int64_t* strides, int copy, void (*release)(void* release_ctx), void* release_ctx,
    manypy_tensor** out_tensor);

/* The tensor of a tensor value (MANYPY_ERR_WRONG_KIND for other kinds),
 * without a copy: a new reference owned by the caller, which stays valid
 * after the value is freed. Since 0.3. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_tensor_from_value(
    const manypy_value* value, manypy_tensor** out_tensor);

/* A new reference to `tensor`, for the caller to release: returns `tensor`
 * itself (NULL for NULL). Never fails. Since 0.3. */
MANYPY_API manypy_tensor* manypy_tensor_retain(manypy_tensor* tensor);

/* Drops one reference. Accepts NULL. The last one frees the handle; the
 * memory goes when no value made from it and no interpreter uses it
 * either. Since 0.3. */
MANYPY_API void manypy_tensor_release(manypy_tensor* tensor);

/* The tensor's layout and memory, owned by the tensor: valid, and
 * unchanging, while the caller holds a reference (NULL for NULL). Its
 * first element is at data + byte_offset; data may be NULL when the shape
 * has no element; strides NULL means C-contiguous; a bool tensor has dtype
 * {MANYPY_DL_BOOL, 8, 1}. A binding may keep the pointer as long as its
 * reference. Since 0.3. */
MANYPY_API const DLTensor* manypy_tensor_dl_tensor(const manypy_tensor* tensor);

/* A new tensor value over the tensor's memory, owned by the caller (zero
 * copy, no check of the memory: it was checked when the tensor was made).
 * The caller's reference is not consumed: the value keeps the tensor alive
 * by itself, so the caller may release its reference while the value is in
 * use. Since 0.3. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_value_new_tensor_ref(
    const manypy_tensor* tensor, manypy_value** out_value);

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
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_pool_options_set_interpreters(
    manypy_pool_options* options, size_t count);

/* Appends a directory to every interpreter's sys.path for the pool's lifetime
 * (as torch::deploy's PathEnvironment). The string is copied. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_pool_options_add_sys_path(
    manypy_pool_options* options, const char* path);

/* Intra-op threads per interpreter (torch.set_num_threads), >= 1. Default 1:
 * parallelism comes from interpreters, not from inside one op.
 * MANYPY_ERR_OUT_OF_RANGE below 1. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_pool_options_set_intra_op_threads(
    manypy_pool_options* options, int threads);

/* Trusted archives. Loading a torch.package runs its pickles, which are
 * code: a pool given an allow-list runs only archives whose SHA-256 digest
 * (of the whole file, as `sha256sum` prints it) is on it, or that its
 * verifier accepts. Others fail manypy_package_load_file / _load_bytes with
 * MANYPY_ERR_UNTRUSTED_ARCHIVE before any of their Python runs (the message
 * gives the digest). Without either, every archive is trusted. Reading an
 * archive's records (manypy_archive_*, manypy_package_list_files, _read_file)
 * never runs its code. See docs/security.md. */

/* Adds a digest, 64 hex digits (either case), to the pool's allow-list.
 * MANYPY_ERR_INVALID_ARGUMENT for anything else. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_pool_options_add_trusted_sha256(
    manypy_pool_options* options, const char* hex_digest);

/* Decides about an archive not on the allow-list: returns 1 to trust it, 0
 * to refuse it. `sha256` (32 bytes) and `origin` (the path, or "<bytes>")
 * are borrowed for the call. Runs on the loading thread; must not call
 * manypy and must not unwind. */
typedef int (*manypy_archive_verifier_fn)(
    const uint8_t* sha256, const char* origin, void* user_data);

/* Sets the verifier (NULL removes it), replacing an earlier one. The options
 * and every pool created from them share it; free_user_data, if not NULL,
 * runs exactly once, when the last of them is freed or the verifier is
 * replaced, or at once if this call fails. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_pool_options_set_archive_verifier(
    manypy_pool_options* options, manypy_archive_verifier_fn verifier, void* user_data,
    void (*free_user_data)(void*));

/* Trust for archives, as an object of its own: the same allow-list and
 * verifier as above, for TorchScript loaded on the host
 * (manypy_script_load_file_trusted), and for pools
 * (manypy_pool_options_set_archive_trust), so that one setting can cover
 * every load. Owned by the caller. Setters are not thread safe; a trust
 * being read by loads on any number of threads is. */
typedef struct manypy_archive_trust manypy_archive_trust;

/* A new trust that trusts nothing yet (with neither digests nor verifier,
 * it checks nothing: every archive loads). NULL only when out of memory. */
MANYPY_API manypy_archive_trust* manypy_archive_trust_new(void);
/* Frees it. Accepts NULL. Pools and options it was given keep copies. */
MANYPY_API void manypy_archive_trust_free(manypy_archive_trust* trust);
/* As manypy_pool_options_add_trusted_sha256. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_archive_trust_add_sha256(
    manypy_archive_trust* trust, const char* hex_digest);
/* As manypy_pool_options_set_archive_verifier: the trust, and every copy
 * made from it, share the verifier; free_user_data runs once, when the last
 * of them goes, or at once if this call fails. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_archive_trust_set_verifier(
    manypy_archive_trust* trust, manypy_archive_verifier_fn verifier, void* user_data,
    void (*free_user_data)(void*));
/* Replaces the options' allow-list and verifier with a copy of `trust`'s
 * (NULL: none). */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_pool_options_set_archive_trust(
    manypy_pool_options* options, const manypy_archive_trust* trust);

/* Whether os._exit and os.abort, called by code in the pool's interpreters,
 * end the host process (1) or raise manypy.ProcessExitRefused, a
 * RuntimeError (0, the default): a model must not take a service, and every
 * other model in it, down. A guard against accidents, not a sandbox. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_pool_options_set_allow_process_exit(
    manypy_pool_options* options, int allow);

MANYPY_API MANYPY_NODISCARD manypy_status* manypy_pool_options_set_thread_mode(
    manypy_pool_options* options, manypy_thread_mode mode);

/* How long, in nanoseconds, a stopped call's clean-up may run before the
 * stop escalates (see "Deadlines and cancellation" below). Default 100 ms;
 * 0 escalates at once. Negative is MANYPY_ERR_OUT_OF_RANGE. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_pool_options_set_stop_grace(
    manypy_pool_options* options, int64_t grace_ns);

/* Admission control: the most calls that may wait for an interpreter of the
 * pool at once. A call waits when the interpreter chosen for it is already
 * running another (in DIRECT mode it waits for the interpreter's GIL, in
 * HANDOFF mode and for asynchronous calls in its home thread's queue).
 * Synchronous and asynchronous calls count alike, pinned or not. A call
 * that would exceed the limit is refused at once with MANYPY_ERR_OVERLOADED
 * and never runs; refusing costs a few atomic operations, whatever the
 * load. 0, the default, sets no limit. See manypy_pool_queued. Since 0.3. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_pool_options_set_queue_limit(
    manypy_pool_options* options, size_t limit);

/* Serve as soon as one interpreter is ready (1), or only once all are (0,
 * the default). With 1, manypy_pool_create returns when the first
 * interpreter has started and the others start in the background; calls
 * that may go anywhere go only to started interpreters, and a call pinned
 * to one still starting waits for it, within its deadline. A background
 * start that fails leaves that interpreter broken (manypy_pool_get_stats
 * counts it, manypy_pool_check_interpreter says why, and the callback of
 * manypy_pool_options_set_on_interpreter_failed is told); the pool serves on
 * the others. manypy_pool_create fails only if no interpreter starts.
 *
 * Off by default so that a pool that is returned is whole: with 0, an
 * interpreter that cannot start (static TLS, a broken installation) fails
 * manypy_pool_create itself, and nothing is left half-started. Turn it on
 * for a service behind a readiness probe (docs/deploy.md). Since 0.3. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_pool_options_set_serve_early(
    manypy_pool_options* options, int serve_early);

/* Growth: the most interpreters the pool may grow to by itself, from the
 * number it starts with (manypy_pool_options_set_interpreters, the least).
 * When a call has waited for an interpreter longer than the threshold of
 * manypy_pool_options_set_grow_after, the pool starts one more, in the
 * background, up to this many; while it starts, the pool serves on the
 * others. 0, the default, means the starting number: no growth. Checked by
 * manypy_pool_create: MANYPY_ERR_OUT_OF_RANGE if it is below the starting
 * number or above manypy_max_interpreters(). A pool never shrinks by
 * itself: an interpreter keeps its memory for the life of the process
 * (docs/memory.md), so giving one back only hands it to other pools
 * (manypy_pool_resize). Since 0.3. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_pool_options_set_max_interpreters(
    manypy_pool_options* options, size_t max);

/* How long, in nanoseconds, a call may wait for an interpreter before the
 * pool grows (up to its maximum). Default 20 ms. MANYPY_ERR_OUT_OF_RANGE
 * below 1. Since 0.3. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_pool_options_set_grow_after(
    manypy_pool_options* options, int64_t wait_ns);

/* Told when an interpreter of the pool fails to start in the background
 * (with serve_early, or when the pool grows), with its index in the pool
 * and the status saying why (borrowed for the call). Runs on a thread of
 * manypy's, just after the interpreter is counted broken: a caller that
 * sees it broken in manypy_pool_get_stats may be told a moment later. May
 * call manypy (not manypy_pool_destroy on this pool); must not unwind.
 * Since 0.3. */
typedef void (*manypy_interpreter_failed_fn)(
    void* user_data, int32_t interpreter, const manypy_status* why);
/* Sets the callback (NULL removes it), replacing an earlier one. The
 * options and every pool created from them share it; free_user_data, if
 * not NULL, runs exactly once: when the last of them lets go of it (a pool
 * once its last handle, package, object and call are gone), when it is
 * replaced, or at once if this call fails. Since 0.3. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_pool_options_set_on_interpreter_failed(
    manypy_pool_options* options, manypy_interpreter_failed_fn callback, void* user_data,
    void (*free_user_data)(void*));

/* A name for the pool (copied), the `pool` label of its metrics
 * (manypy_pool_prometheus), so that several pools of a process can be told
 * apart. Default: none (no `pool` label). Since 0.3. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_pool_options_set_name(
    manypy_pool_options* options, const char* name);

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
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_pool_create(
    const manypy_pool_options* options, manypy_pool** out_pool);

/* Frees the caller's pool handle. Accepts NULL. Must not race with other
 * calls that use this same handle: it is gone when this returns.
 *
 * Packages and objects of the pool keep it alive, so this call alone may
 * leave the interpreters leased: they go back to the process-wide set when
 * the last of the pool handle, its packages and its objects is freed. That
 * last free waits for the pool's calls still running (a call through an
 * object holds the pool, so none can start after it), then cleans each
 * interpreter (objects the pool created and modules it imported are dropped,
 * sys.path is restored) and returns it for later pools to reuse. */
MANYPY_API void manypy_pool_destroy(manypy_pool* pool);

/* Number of interpreters in the pool right now (starting, ready, busy or
 * broken): indices [0, size) are valid for pinned calls. It changes with
 * manypy_pool_resize and growth (manypy_pool_options_set_max_interpreters),
 * so read it when needed rather than keeping it. 0 for NULL. Lock-free.
 * Thread safe. */
MANYPY_API size_t manypy_pool_size(const manypy_pool* pool);

/* The pool's load right now, for metrics and for a caller that sheds load
 * itself: calls waiting for an interpreter (what the queue limit bounds),
 * and calls admitted and not yet complete (waiting or running). Calls made
 * through the pool's packages, objects and batchers count. Lock-free reads,
 * so the two may be taken a moment apart. 0 for NULL. Thread safe. Since
 * 0.3. */
MANYPY_API size_t manypy_pool_queued(const manypy_pool* pool);
MANYPY_API size_t manypy_pool_in_flight(const manypy_pool* pool);

/* A pool's health, for readiness probes, dashboards and autoscalers.
 * Fields are only ever appended. The caller sets struct_size to its
 * sizeof(manypy_pool_stats); the library fills the fields that fit in it
 * and leaves the rest alone (MANYPY_ERR_INVALID_ARGUMENT if struct_size is
 * smaller than 0.3's struct). Since 0.3. */
typedef struct manypy_pool_stats {
  uint32_t struct_size; /* in: the caller's sizeof(manypy_pool_stats) */
  uint32_t draining;    /* 1 once manypy_pool_drain was called */
  /* manypy_pool_size: the four counts below and `lost` add up to it (for a
   * caller whose struct ends before `lost`, lost ones count as broken) */
  size_t interpreters;
  size_t starting;  /* not yet able to serve: starting, or being leased */
  size_t ready;     /* serving, with no call */
  size_t busy;      /* serving, with at least one call */
  size_t broken;    /* failed to start, or retired (manypy_pool_check_interpreter says why) */
  size_t in_flight; /* as manypy_pool_in_flight */
  size_t queued;    /* as manypy_pool_queued */
  /* Calls completed since the pool was created, by status code:
   * completed[MANYPY_OK] succeeded, completed[MANYPY_ERR_PYTHON] raised, and
   * so on. Calls refused at admission (MANYPY_ERR_OVERLOADED,
   * MANYPY_ERR_DRAINING) count too. */
  uint64_t completed[MANYPY_CODE_SLOTS];
  /* Lost: a stopped call still runs in it twice its grace period (and at
   * least 1 s) after its stop (model code swallowing the stop where Python
   * cannot raise it, or C code holding the GIL). It serves no other call
   * while that one runs; if the call ends, the interpreter is retired (then
   * broken). A state of its own, not counted in `broken`
   * (manypy_pool_check_interpreter says why; docs/serving.md, "Lost
   * interpreters"). Since 0.4. */
  size_t lost;
  /* Since 0.4. Interpreters replaced since the pool was created: a retired
   * interpreter is replaced by another of the process's, in the same
   * index, while the process has room (docs/serving.md, "Retired
   * interpreters: moving calls, replacement, room"). */
  uint64_t replaced;
  /* Since 0.4. 1 while a retired interpreter could not be replaced for want
   * of room: the process's interpreters are all leased, retired or
   * distrusted (manypy_max_interpreters counts them all, retired ones
   * included). The pool tries again each second. */
  uint32_t no_room;
} manypy_pool_stats;

/* Fills *out (see manypy_pool_stats). Lock-free reads, so the counts may be
 * taken a moment apart. Thread safe. Since 0.3. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_pool_get_stats(
    const manypy_pool* pool, manypy_pool_stats* out);

/* Resizes the pool to `interpreters`, 1 to manypy_max_interpreters().
 * Growing leases interpreters from the process-wide set (starting new ones)
 * and returns once they serve; an interpreter that fails to start stays in
 * the pool, broken, and the first failure is returned. Shrinking takes the
 * highest indices out of the pool at once (calls pinned to them are then
 * MANYPY_ERR_OUT_OF_RANGE; calls running there finish first) and gives
 * them back to the process-wide set for other pools: their memory stays
 * with the process (docs/memory.md). MANYPY_ERR_OUT_OF_RANGE for 0,
 * MANYPY_ERR_RESOURCE_EXHAUSTED when the process has too few interpreters
 * left (the message gives the limit), MANYPY_ERR_DRAINING while draining.
 * Resizes of one pool are serialized. Thread safe. Since 0.3. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_pool_resize(
    manypy_pool* pool, size_t interpreters);

/* Graceful drain, for a service that is stopping (SIGTERM) or moving
 * traffic away: from now on the pool refuses new calls with
 * MANYPY_ERR_DRAINING (through its packages, objects and batchers too).
 * Calls already running or queued go on; at `deadline_ns` (absolute,
 * CLOCK_MONOTONIC, as manypy_call_options_set_deadline; 0: no deadline)
 * those left are cancelled, as by a cancel token (they end with
 * MANYPY_ERR_CANCELLED). Returns when no call is left, or when those
 * cancelled have had their stop grace (manypy_pool_options_set_stop_grace)
 * twice over to end. *out_finished (may be NULL) gets how many of the calls
 * in flight at the start finished by themselves, *out_cancelled (may be
 * NULL) how many the drain cancelled. A pool never stops draining.
 *
 * Calling it again, or from several threads, is allowed: each call waits
 * in the same way and counts the calls in flight when it began. It may race
 * with calls on the pool's objects and with the freeing of handles, not
 * with manypy_pool_destroy of this same handle. Since 0.3. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_pool_drain(
    manypy_pool* pool, int64_t deadline_ns, size_t* out_finished, size_t* out_cancelled);

/* Request metrics of one model in a pool, since the pool was created. A
 * call's model is the model id of its context
 * (manypy_call_options_set_context), "" for calls without one. Durations
 * are in seconds: a request's from admission to completion, its queue time
 * from admission until it began running in its interpreter (in DIRECT mode,
 * until it held the interpreter's GIL). Histogram buckets are cumulative,
 * as Prometheus's: bucket i counts the durations <= bucket_bounds[i]; the
 * count is the +Inf bucket. Fields are only ever appended: step through an
 * array of them by struct_size (manypy_request_metrics_at does). Since 0.3. */
typedef struct manypy_request_metrics {
  uint32_t struct_size; /* this library's sizeof(manypy_request_metrics) */
  const char* model;
  uint64_t completed[MANYPY_CODE_SLOTS]; /* by status code, refusals included */
  size_t num_buckets;
  const double* bucket_bounds; /* num_buckets upper bounds, ascending, in seconds */
  const uint64_t* request_buckets;
  uint64_t request_count;
  double request_seconds_sum;
  const uint64_t* queue_buckets;
  uint64_t queue_count;
  double queue_seconds_sum;
} manypy_request_metrics;

/* Every model's request metrics. *out_metrics (an array of *out_count,
 * with their strings and buckets) is owned by the caller: free it with
 * manypy_request_metrics_free. Thread safe. Since 0.3. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_pool_request_metrics(
    const manypy_pool* pool, manypy_request_metrics** out_metrics, size_t* out_count);
/* Accepts NULL. Since 0.3. */
MANYPY_API void manypy_request_metrics_free(manypy_request_metrics* metrics, size_t count);

/* Entry `index` (< the count) of manypy_pool_request_metrics's array. */
static inline const manypy_request_metrics* manypy_request_metrics_at(
    const manypy_request_metrics* metrics, size_t index) {
  return (const manypy_request_metrics*)((const char*)metrics + index * metrics->struct_size);
}

/* The pool's metrics in the Prometheus text exposition format, as a string
 * value, for a service's /metrics endpoint (docs/metrics.md has the table):
 * manypy_requests_total{model,code}, the histograms
 * manypy_request_duration_seconds{model} and
 * manypy_queue_duration_seconds{model}, the gauges manypy_inflight_requests,
 * manypy_queued_requests and manypy_interpreters{state}, and
 * manypy_draining; since 0.4, manypy_interpreters_replaced_total and
 * manypy_replacement_no_room (manypy_pool_stats). Every series carries pool="<name>" when the pool
 * has a name (manypy_pool_options_set_name). Thread safe. Since 0.3. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_pool_prometheus(
    const manypy_pool* pool, manypy_value** out_text);

/* NULL if interpreter `interpreter` (an index in [0, manypy_pool_size)) can
 * serve calls. Otherwise a status owned by the caller:
 * MANYPY_ERR_INTERPRETER_BROKEN, whose message says why (it was retired
 * after a stopped call whose clean-up was cut short; see "Deadlines and
 * cancellation"; or, since 0.4, it is lost: a stopped call still runs in it
 * twice its grace period (and at least 1 s) after its stop, see
 * manypy_pool_stats.lost), or
 * MANYPY_ERR_OUT_OF_RANGE for a bad index. The pool
 * sends calls that may go anywhere only to interpreters that can serve.
 * Thread safe. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_pool_check_interpreter(
    const manypy_pool* pool, int32_t interpreter);

/* Runs Python source (statements) in an interpreter's global namespace, which
 * persists for the pool's lifetime. `interpreter` is an index in
 * [0, manypy_pool_size) or MANYPY_ANY_INTERPRETER. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_pool_exec(
    manypy_pool* pool, int32_t interpreter, const char* source);

/* Runs the same source in every interpreter of the pool, in index order, and
 * stops at the first failure, whose message names the interpreter. Use it to
 * define functions or register module source everywhere. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_pool_exec_all(
    manypy_pool* pool, const char* source);

/* Evaluates one Python expression and returns its result as a value: None,
 * bool, int (fitting int64), float, str, bytes, a torch.Tensor, and lists,
 * tuples and str-keyed dicts of these; others fail with
 * MANYPY_ERR_UNSUPPORTED_TYPE. On success *out_value is owned by the caller. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_pool_eval(
    manypy_pool* pool, int32_t interpreter, const char* expression, manypy_value** out_value);

/* ------------------------------------------------------------------------ */
/* torch.package archives                                                   */
/* ------------------------------------------------------------------------ */

/* A torch.package archive loaded into a pool. Keeps its pool alive: the pool
 * handle may be destroyed first. Thread safe. */
typedef struct manypy_package manypy_package;

/* Loads a torch.package archive from a file. The file is read once into
 * private memory that every interpreter of the pool shares (tensor data is
 * held once), and never looked at again: truncating, overwriting or
 * replacing it afterwards changes nothing the package runs (docs/models.md,
 * "Memory"). Checks the archive at once, without running Python (its whole zip
 * structure, then libtorch's reading of it): MANYPY_ERR_INVALID_ARGUMENT (an
 * empty path), MANYPY_ERR_NOT_FOUND (no such file), MANYPY_ERR_BAD_ARCHIVE
 * (not a zip, truncated, inconsistent), MANYPY_ERR_NOT_A_PACKAGE (a zip but
 * no torch.package, e.g. a TorchScript archive),
 * MANYPY_ERR_UNSUPPORTED_VERSION, MANYPY_ERR_UNTRUSTED_ARCHIVE (the pool's
 * allow-list, see the pool options). Record checksums, and that each tensor
 * storage is stored uncompressed and exactly as long as its tensor, are
 * checked when an interpreter first opens the package or unpickles from it
 * (manypy_package_load_pickle: MANYPY_ERR_BAD_ARCHIVE, with the Python
 * error chained in the traceback). On success *out_package is owned by the
 * caller. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_package_load_file(
    manypy_pool* pool, const char* path, manypy_package** out_package);

/* The same from `size` bytes in memory, which are copied. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_package_load_bytes(
    manypy_pool* pool, const void* data, size_t size, manypy_package** out_package);

/* Frees the caller's handle. Objects loaded from the package keep it alive.
 * Accepts NULL. */
MANYPY_API void manypy_package_free(manypy_package* package);

/* The names of every record in the archive, as a list of strings (e.g.
 * "model/model.pkl", ".data/version"), read without running Python. The
 * caller owns *out_list. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_package_list_files(
    const manypy_package* package, manypy_value** out_list);

/* One record's bytes (text or binary) as a bytes value, read without running
 * Python. MANYPY_ERR_NO_SUCH_NAME if the archive has no such record. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_package_read_file(
    const manypy_package* package, const char* name, manypy_value** out_bytes);

/* ------------------------------------------------------------------------ */
/* Replicated objects                                                       */
/* ------------------------------------------------------------------------ */

/* An object (a model) unpickled from a package, replicated lazily into each
 * interpreter that serves a call on it. Its tensors' storages are the
 * archive's, shared by every replica: N interpreters of a model with W bytes
 * of weights hold about W bytes. (So an in-place change to a weight is seen
 * by every replica.) Keeps its package and pool alive. Thread safe: any
 * number of threads may call it at once. */
typedef struct manypy_object manypy_object;

/* Unpickles `package`.`name` (as torch.package's load_pickle(module, name))
 * in one interpreter now, so that errors surface here (a missing extern
 * module is MANYPY_ERR_MODULE_NOT_FOUND), and lazily in the others. On
 * success *out_object is owned by the caller. A record whose checksum fails
 * (a corrupt pickle or source file) is MANYPY_ERR_BAD_ARCHIVE. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_package_load_pickle(
    manypy_package* package, const char* module, const char* name, manypy_object** out_object);

/* Frees the handle and unloads the object. Accepts NULL. Calls on it
 * already running on other threads finish first: this waits for them (they
 * are not stopped; give them a deadline or a cancel token to bound the
 * wait). A call must not start with this handle concurrently with, or
 * after, this free. Then the replica in every interpreter is dropped; the
 * package and pool stay alive while other handles hold them. Asynchronous
 * calls and batchers hold the object too (manypy_object_call_async): while
 * any does, this returns at once, and the last of them unloads the object
 * when it completes (on manypy's completion thread if it completes on one
 * of manypy's threads). */
MANYPY_API void manypy_object_free(manypy_object* object);

/* A second handle to the same object (*out_object, owned by the caller,
 * freed with manypy_object_free): the object stays loaded until its last
 * handle is freed and its last call has completed. Cheap (no Python runs),
 * so a caller may take one per call. It is what a hot swap needs
 * (docs/deploy.md, "Model hot swap"): the server keeps the current version's
 * handle under a lock; each request shares it under the lock and calls
 * outside it; the swap replaces it under the lock and frees the old one,
 * which unloads once the requests holding it end. Thread safe. Since 0.3. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_object_share(
    const manypy_object* object, manypy_object** out_object);

/* A cancel token: created by the caller, cancelled from any thread, and
 * shared by any number of calls (through their call options). Cancelling
 * stops every call that uses it, running or waiting, with
 * MANYPY_ERR_CANCELLED, and makes every later call that uses it fail at
 * once. A token cannot be reset. Thread safe. */
typedef struct manypy_cancel_token manypy_cancel_token;

/* A new, uncancelled token owned by the caller. NULL only when memory is
 * exhausted. */
MANYPY_API manypy_cancel_token* manypy_cancel_token_new(void);

/* Cancels the token. Idempotent; any thread; accepts NULL. Returns once
 * every running call that uses the token has been asked to stop (they stop
 * soon after, on their own threads). */
MANYPY_API void manypy_cancel_token_cancel(manypy_cancel_token* token);

/* 1 if the token was cancelled, else 0 (also for NULL). */
MANYPY_API int manypy_cancel_token_is_cancelled(const manypy_cancel_token* token);

/* Frees the caller's handle. Accepts NULL. Call options and calls that use
 * the token keep it alive, so it may be freed at any time. */
MANYPY_API void manypy_cancel_token_free(manypy_cancel_token* token);

/* CLOCK_MONOTONIC now, in nanoseconds: the clock of deadlines. Any thread. */
MANYPY_API int64_t manypy_monotonic_ns(void);

/* Per-call options. Owned by the caller; read-only during a call, so one
 * options object may serve many threads at once. Setters are not thread
 * safe: set them before sharing. */
typedef struct manypy_call_options manypy_call_options;

/* Defaults: any interpreter, no deadline, no cancel token. NULL only when
 * memory is exhausted. */
MANYPY_API manypy_call_options* manypy_call_options_new(void);
MANYPY_API void manypy_call_options_free(manypy_call_options* options);
/* Pins calls to interpreter `index` of the pool, or MANYPY_ANY_INTERPRETER. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_call_options_set_interpreter(
    manypy_call_options* options, int32_t index);

/* Bounds each call made with these options to `timeout_ns` nanoseconds from
 * its start, waiting for an interpreter included. 0 removes the timeout;
 * negative is MANYPY_ERR_OUT_OF_RANGE. Replaces any deadline set with
 * manypy_call_options_set_deadline. What happens when it passes: see
 * "Deadlines and cancellation" below. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_call_options_set_timeout(
    manypy_call_options* options, int64_t timeout_ns);

/* Bounds calls made with these options by an absolute deadline on
 * CLOCK_MONOTONIC (manypy_monotonic_ns()), in nanoseconds. 0 removes it;
 * negative is MANYPY_ERR_OUT_OF_RANGE. A deadline already past fails calls
 * at once with MANYPY_ERR_DEADLINE_EXCEEDED. Replaces any timeout. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_call_options_set_deadline(
    manypy_call_options* options, int64_t deadline_ns);

/* Calls made with these options stop with MANYPY_ERR_CANCELLED when `token`
 * is cancelled. The options keep the token alive (the caller's handle may be
 * freed). NULL removes the token. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_call_options_set_cancel_token(
    manypy_call_options* options, manypy_cancel_token* token);

/* Sets the caller's context for calls made with these options: every
 * operator callback (manypy_add_op_callbacks) of every operator such a call
 * runs reports these ids. Both strings are copied; NULL means "". */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_call_options_set_context(
    manypy_call_options* options, const char* model_id, const char* request_id);

/* Calls the object. `method` NULL calls the object itself (for an nn.Module,
 * __call__, which runs forward with its hooks); otherwise the named method.
 * Runs under torch.no_grad(): serving is inference.
 * `args` is a list or tuple of positional arguments, or NULL for none;
 * `kwargs` a dict or NULL. Both are borrowed. `options` may be NULL. The
 * result is owned by the caller. A missing method is MANYPY_ERR_NO_SUCH_NAME;
 * a wrong number of arguments MANYPY_ERR_PYTHON (TypeError); a result that is
 * not representable MANYPY_ERR_UNSUPPORTED_TYPE. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_object_call(
    manypy_object* object, const char* method, const manypy_value* args, const manypy_value* kwargs,
    const manypy_call_options* options, manypy_value** out_result);

/* The attribute `name` of the object, converted to a value. `options` as
 * for manypy_object_call (a property runs Python code). */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_object_getattr(
    manypy_object* object, const char* name, const manypy_call_options* options,
    manypy_value** out_value);

/* Whether the object has the attribute `name`: *out_has is 1 or 0. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_object_hasattr(
    manypy_object* object, const char* name, int* out_has);

/* ------------------------------------------------------------------------ */
/* Asynchronous calls                                                       */
/* ------------------------------------------------------------------------ */

/* Receives the outcome of an asynchronous call, exactly once. Exactly one of
 * `result` (the call's value) and `status` (why it failed) is not NULL. The
 * callback owns it, and frees it (manypy_value_free, manypy_status_free)
 * whenever and on whichever thread it likes. `user_data` is the submitter's,
 * passed through untouched.
 *
 * Where it runs: never on the submitting thread, always on a thread of
 * manypy's:
 *  - the home thread of the interpreter that ran the call (each interpreter
 *    has one, for the life of the process);
 *  - manypy's completion thread, for a call that stopped while it was still
 *    waiting for its interpreter (its deadline passed, its token was
 *    cancelled): it completes with MANYPY_ERR_DEADLINE_EXCEEDED or
 *    MANYPY_ERR_CANCELLED without running;
 *  - a host worker thread (one per core, started on first use), for
 *    TorchScript (manypy_script_call_async).
 * While the callback runs, that thread serves nothing else: the calls
 * queued behind it on that interpreter wait. Return quickly, and hand long
 * work to a thread of your own.
 *
 * What it may call: any manypy function. It may submit further
 * asynchronous calls, and free handles, the one the call was made on
 * included. It should not wait: a synchronous call made here runs on this
 * thread (it cannot deadlock, but it holds up this interpreter's queue),
 * and waiting for the completion of another asynchronous call (on a
 * condition variable, a future) can deadlock, since that completion may be
 * due on this very thread. It must not unwind (no C++ exception, Rust
 * panic or longjmp leaves it). */
typedef void (*manypy_call_done_fn)(void* user_data, manypy_value* result, manypy_status* status);

/* Submits a call of the object, as manypy_object_call, and returns at once.
 *
 * NULL: the call was accepted, and `done` will run exactly once, perhaps
 * before this function returns (on another thread). A status (owned by the
 * caller): the call was refused and `done` never runs. Refusals are
 * immediate: NULL `object` or `done` (MANYPY_ERR_INVALID_ARGUMENT),
 * arguments that are not a list/tuple and a dict, a deadline already past
 * or a token already cancelled, a pinned interpreter out of range or
 * retired, and MANYPY_ERR_OVERLOADED when the pool's queue limit is
 * reached.
 *
 * `args`, `kwargs`, `method` and `options` are borrowed for this call only:
 * they are copied before it returns, except tensors, which are shared, not
 * copied (a tensor lent from a caller's buffer stays lent until the call
 * completes). `options`' deadline, timeout and cancel token bound the call
 * as they bound a synchronous one ("Deadlines and cancellation"): the wait
 * in the queue included, and a call whose deadline passes while it waits
 * completes with MANYPY_ERR_DEADLINE_EXCEEDED without running. A timeout
 * runs from submission.
 *
 * The call runs on its interpreter's home thread, in either thread mode.
 * Calls go to a free interpreter if there is one, else to the least loaded.
 *
 * Lifetimes: an accepted call holds its object, and so its package and
 * pool, until `done` has returned. manypy_object_free, manypy_package_free
 * and manypy_pool_destroy may be called at any time, also from `done`,
 * while calls are in flight: the handle goes at once, the calls still
 * queued run and complete as they would have, and the object, package and
 * pool go when the last of them completes. To drop queued calls instead,
 * cancel their token. Thread safe. Since 0.3. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_object_call_async(
    manypy_object* object, const char* method, const manypy_value* args, const manypy_value* kwargs,
    const manypy_call_options* options, manypy_call_done_fn done, void* user_data);

/* Runs Python source (statements), as manypy_pool_exec, with `options`
 * (borrowed; NULL: as manypy_pool_exec with MANYPY_ANY_INTERPRETER): the
 * interpreter is the options' (manypy_call_options_set_interpreter;
 * MANYPY_ERR_OUT_OF_RANGE outside the pool), the options' deadline,
 * timeout and cancel token bound it as they bound an object call (see
 * "Deadlines and cancellation" below: the wait for the interpreter
 * included, MANYPY_ERR_DEADLINE_EXCEEDED or MANYPY_ERR_CANCELLED when it
 * is stopped), and operator callbacks of what it runs report the options'
 * context. Thread safety as manypy_pool_exec. Since 0.3. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_pool_exec_with_options(
    manypy_pool* pool, const char* source, const manypy_call_options* options);

/* Evaluates one expression, as manypy_pool_eval, with `options` as for
 * manypy_pool_exec_with_options. Converting the result is part of the
 * bounded work. On success *out_value is owned by the caller. Since 0.3. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_pool_eval_with_options(
    manypy_pool* pool, const char* expression, const manypy_call_options* options,
    manypy_value** out_value);

/* Deadlines and cancellation, for manypy_object_call, manypy_object_getattr,
 * manypy_pool_exec_with_options, manypy_pool_eval_with_options and
 * manypy_script_call made with a timeout, a deadline or a cancel token:
 *
 *  - A deadline already past or a token already cancelled fails the call
 *    before anything runs.
 *  - The bound covers the whole call: waiting for an interpreter, making
 *    the object's replica in it (lazy replication runs the model's
 *    unpickling code), converting the arguments, the call, converting its
 *    result, freeing what it left, and building the text of its error.
 *  - A call waiting for its interpreter gives up at its deadline, or when
 *    its token is cancelled, without running: in HANDOFF mode it leaves the
 *    interpreter's queue; in DIRECT mode it waits for the interpreter's GIL,
 *    which running Python code hands over every few milliseconds (C code
 *    that holds the GIL does not), and returns as soon as it has it.
 *  - Python code that is running is stopped: the interpreter raises
 *    manypy.DeadlineExceeded (or manypy.Cancelled), a BaseException, once,
 *    in the call's thread, at the next line of the model's own code, so
 *    that the clean-up it unwinds through runs (finally blocks, __exit__:
 *    locks are released, torch.autocast is turned off). If the call has not
 *    returned a grace period later (manypy_pool_options_set_stop_grace,
 *    100 ms by default), the model is catching the stop or its clean-up
 *    hangs: the stop is then raised again at every line of any code, which
 *    ends the call but cuts clean-up short, and the interpreter is retired:
 *    it serves no other call for the rest of the process, the pool sends
 *    calls to its other interpreters, and manypy_pool_check_interpreter
 *    says why. Where Python sends no line events (inside a trace, profile
 *    or sys.monitoring callback) or the stop is swallowed again, it is also
 *    injected as an asynchronous exception, every few milliseconds until
 *    the call ends. While a call is being stopped, sys.settrace is refused
 *    (RuntimeError), and model code's sys.setswitchinterval is clamped to
 *    10 ms at all times, so that model code cannot outrun a stop (since
 *    0.4). What cannot be stopped finishes first: a torch operator already
 *    running, a blocking system call (time.sleep, I/O, a lock wait), C
 *    code holding the GIL. The status's traceback shows where the code was
 *    stopped; the stop's own exceptions, where Python cannot propagate
 *    them (a __del__, a weakref callback), are not printed to stderr.
 *  - A stopped call still running twice the grace period (and at least
 *    1 s) after its stop
 *    makes its interpreter lost (manypy_pool_stats.lost) until it ends:
 *    it serves no other call, and manypy_pool_check_interpreter says why.
 *    Its caller waits for it still, in every mode (docs/serving.md, "Lost
 *    interpreters"). Since 0.4.
 *  - After a stop, the interpreter checks what the call left behind before
 *    it serves again: a module whose import was stopped is dropped so that
 *    it is imported anew, logging's locks still held are released, and
 *    torch's autocast still on is turned off; what cannot be repaired (an
 *    import lock still held) retires it. State that the model changed on
 *    purpose before the stop stays changed.
 *  - TorchScript on the host stops before its next tensor operator.
 *
 * A call that finishes after its deadline passed or its token was cancelled
 * returns MANYPY_ERR_DEADLINE_EXCEEDED or MANYPY_ERR_CANCELLED (whichever
 * came first), never its result; the message says when the stop came and,
 * if the interpreter was retired, why. Calls without a deadline or token
 * pay nothing for this. */

/* ------------------------------------------------------------------------ */
/* TorchScript on the host: no Python, no interpreter                       */
/* ------------------------------------------------------------------------ */

/* A TorchScript module loaded with libtorch in the host process. Thread safe:
 * any number of threads may call it at once. */
typedef struct manypy_script_module manypy_script_module;

/* Loads a TorchScript archive (torch.jit.save). MANYPY_ERR_NOT_FOUND,
 * MANYPY_ERR_BAD_ARCHIVE, MANYPY_ERR_UNSUPPORTED_VERSION as for packages.
 * The file is read once, as for packages. These two check only the host
 * trust (manypy_set_host_archive_trust), if one is set: load TorchScript
 * only from archives you trust, or give a trust. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_script_load_file(
    const char* path, manypy_script_module** out_module);
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_script_load_bytes(
    const void* data, size_t size, manypy_script_module** out_module);
/* The same, refusing an archive that `trust` (borrowed; NULL: none) does
 * not trust with MANYPY_ERR_UNTRUSTED_ARCHIVE before libtorch reads any of
 * it (the host trust, if set, must accept it too): libtorch's TorchScript
 * frontend compiles an archive's code as it loads, and its compiler trusts
 * that code (docs/security.md). */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_script_load_file_trusted(
    const char* path, const manypy_archive_trust* trust, manypy_script_module** out_module);
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_script_load_bytes_trusted(
    const void* data, size_t size, const manypy_archive_trust* trust,
    manypy_script_module** out_module);
/* Frees the handle. Accepts NULL. Asynchronous calls in flight hold the
 * module, which goes when the last of them completes. */
MANYPY_API void manypy_script_free(manypy_script_module* module);

/* Calls `method` (NULL: forward) with the same value conventions as
 * manypy_object_call. Runs in inference mode. An error raised by the method
 * is MANYPY_ERR_PYTHON, with TorchScript's message. `options` (may be NULL)
 * gives the call its deadline, cancel token and the context its operator
 * callbacks report; its interpreter index is ignored (there is none). */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_script_call(
    manypy_script_module* module, const char* method, const manypy_value* args,
    const manypy_value* kwargs, const manypy_call_options* options, manypy_value** out_result);

/* Submits a call of the module, as manypy_script_call, and returns at once,
 * with the conventions of manypy_object_call_async; a method the module
 * does not have is refused at submission (MANYPY_ERR_NO_SUCH_NAME), since
 * the host knows its methods. The call runs on one of
 * the process's host worker threads (as many as the machine has cores,
 * started on first use), in submission order; TorchScript has no pool, so
 * no queue limit applies. The call holds its module until `done` has
 * returned: manypy_script_free may be called with calls in flight, which
 * still run. Thread safe. Since 0.3. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_script_call_async(
    manypy_script_module* module, const char* method, const manypy_value* args,
    const manypy_value* kwargs, const manypy_call_options* options, manypy_call_done_fn done,
    void* user_data);

/* ------------------------------------------------------------------------ */
/* AOTInductor packages on the host (.pt2): no Python, no interpreter        */
/* ------------------------------------------------------------------------ */

/* A model that torch.export captured and AOTInductor compiled to native code
 * (torch._inductor.aoti_compile_and_package writes the .pt2), run with
 * libtorch's own loader in the host process: PyTorch's successor to
 * TorchScript for models that need no Python. A handle of its own, not a
 * manypy_script_module: it has no methods, takes only the tensors its
 * example inputs had, and needs torch 2.6 or newer (docs/models.md).
 * Thread safe: any number of threads may call it at once; up to one call per
 * core runs at a time, more wait for a free copy of the model's buffers.
 * Since 0.3. */
typedef struct manypy_aoti_module manypy_aoti_module;

/* Loads a .pt2 package from a file (read once, as for packages) or from
 * bytes (copied). `trust` (borrowed; NULL: none) and the host trust
 * (manypy_set_host_archive_trust), if set, must both accept it, and are
 * checked before libtorch reads anything: a package holds a compiled
 * library, and loading it runs its code. Errors:
 *  - MANYPY_ERR_UNSUPPORTED_VERSION: this manypy was built against a torch
 *    without AOTInductor (the message names the torch needed), or the
 *    package was compiled for what this host is not: another device (CUDA),
 *    CPU architecture, instruction set (AVX-512 on an AVX2 CPU) or OS;
 *  - MANYPY_ERR_LOADER: its compiled library does not load (compiled
 *    against another torch, or a library it needs is missing);
 *  - MANYPY_ERR_NOT_A_PACKAGE: a PyTorch archive that is no AOTInductor
 *    package (TorchScript, a torch.package, an exported program without a
 *    compiled model);
 *  - MANYPY_ERR_BAD_ARCHIVE: a truncated or inconsistent package;
 *  - MANYPY_ERR_UNTRUSTED_ARCHIVE, MANYPY_ERR_NOT_FOUND. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_aoti_load_file(
    const char* path, const manypy_archive_trust* trust, manypy_aoti_module** out_module);
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_aoti_load_bytes(
    const void* data, size_t size, const manypy_archive_trust* trust,
    manypy_aoti_module** out_module);
/* Frees the handle. Accepts NULL. Asynchronous calls in flight hold the
 * module, which goes when the last of them completes. */
MANYPY_API void manypy_aoti_free(manypy_aoti_module* module);

/* Calls the model. `args` (a list or tuple; NULL: none) and `kwargs` (a
 * dict; NULL: none) have the structure of the example inputs it was
 * exported with, tensors at the leaves; the result has the structure it
 * returned (a tensor, or tuples, lists and string-keyed dicts of them).
 * Tensors are passed without copies when contiguous (others are copied
 * once); results are new tensors. Runs in inference mode. Errors:
 *  - MANYPY_ERR_INVALID_ARGUMENT: the wrong number of arguments, a missing
 *    or extra key (the message names it and the structure expected);
 *  - MANYPY_ERR_WRONG_KIND: a non-tensor where a tensor belongs;
 *  - MANYPY_ERR_BAD_TENSOR: a dtype, shape or device the model was not
 *    compiled for (AOTInductor's input checks, which manypy turns on);
 *  - MANYPY_ERR_PYTHON: the compiled model failed (its message);
 *  - MANYPY_ERR_DEADLINE_EXCEEDED, MANYPY_ERR_CANCELLED: `options` (may be
 *    NULL) give a deadline or token; they are checked before the compiled
 *    model starts and when it returns (a late result is dropped): compiled
 *    kernels cannot be stopped while they run.
 * Operator callbacks and the profiler see one operator per call,
 * "manypy::aoti_run", with the call's model and request ids and, if asked,
 * its input tensors, which stands for the compiled kernels: they do not go
 * through libtorch's dispatcher (the few view and copy operators the
 * runtime does dispatch, such as aten::as_strided, are reported too, with
 * the call's ids). */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_aoti_call(
    manypy_aoti_module* module, const manypy_value* args, const manypy_value* kwargs,
    const manypy_call_options* options, manypy_value** out_result);

/* Submits a call, as manypy_aoti_call, with the conventions of
 * manypy_script_call_async: it runs on a host worker thread; arguments that
 * do not fit the model are refused at submission; the call holds the
 * module until `done` has returned. Thread safe. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_aoti_call_async(
    manypy_aoti_module* module, const manypy_value* args, const manypy_value* kwargs,
    const manypy_call_options* options, manypy_call_done_fn done, void* user_data);

/* What AOTInductor recorded when it compiled the model, as a new dict of
 * strings owned by the caller (AOTI_DEVICE_KEY, AOTI_CPU_ISA, AOTI_MACHINE,
 * ...). Extra files are records: manypy_archive_read_file reads them,
 * manypy_archive_save_copy writes a copy with more. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_aoti_metadata(
    const manypy_aoti_module* module, manypy_value** out_dict);

/* The host trust: what every host load checks (manypy_script_load_* and
 * manypy_aoti_load_*, from files and bytes), so that a service can refuse,
 * with one call at start-up, every model it does not know. A load given a
 * trust of its own must satisfy both: code that loads a model can narrow
 * the policy, never widen it. A copy of `trust` is kept; NULL removes it.
 * Pools have their own (manypy_pool_options_set_archive_trust). Thread
 * safety: any thread; a load already past its check is not affected.
 * Since 0.3. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_set_host_archive_trust(
    const manypy_archive_trust* trust);

/* ------------------------------------------------------------------------ */
/* Dynamic batching                                                         */
/* ------------------------------------------------------------------------ */

/* A batcher combines concurrent calls of one method of an object into one
 * call, as TorchServe's and Triton's dynamic batching do:
 *
 *  - Requests are ordinary calls (manypy_batcher_call or _call_async) whose
 *    arguments hold tensors with the batch dimension: each request brings
 *    one or more rows along it (a batch-1 request's image is [1, 3, H, W]).
 *    Every tensor of a request must have the same number of rows.
 *  - Requests that can share a batch are concatenated along the batch
 *    dimension, tensor by tensor, and the method runs once on the batch.
 *    They can share one when their arguments have the same structure, every
 *    argument that is not a tensor is equal, and their tensors match in
 *    dtype and in every dimension but the batch one. Others wait for
 *    batches of their own.
 *  - A batch runs when it has `max_batch` rows, or `max_wait_us` after its
 *    first request came, whichever is first. But while as many of the
 *    batcher's batches run as the pool has interpreters, a batch that has
 *    waited that long goes on filling until one of them completes (as
 *    Triton's dynamic batcher waits for a free model instance): under load,
 *    batches grow instead of queuing. A request with more rows than
 *    max_batch runs alone.
 *  - Each tensor of the result (a tensor, or a list, tuple or dict of them,
 *    nested) is split back along the batch dimension: each request gets its
 *    rows, as views of one result tensor (nothing is copied). A result
 *    tensor whose size along the batch dimension is not the batch's rows
 *    fails every request of the batch with MANYPY_ERR_BAD_TENSOR. Values
 *    that are not tensors are given to each request as they are.
 *  - An error fails every request of its batch with that error.
 *  - A request's deadline, timeout and cancel token bound it: a request
 *    stopped while it waits for its batch is dropped at once, and completes
 *    with its stop's status; one stopped while its batch runs completes
 *    with it too (the batch runs on for the others, bound by the latest
 *    deadline among its requests). Its context (model and request ids) is given to
 *    operator callbacks: the first request's model id, and the request ids
 *    joined by ','. The call options' interpreter is ignored.
 *  - The pool's queue limit applies to requests as they come.
 *
 * The batch sizes formed (in rows) go into manypy_profiler_prometheus's
 * output, as the histogram manypy_batch_size{batcher}. Thread safe. */
typedef struct manypy_batcher manypy_batcher;

/* Options for manypy_batcher_new. Owned by the caller; not thread safe. */
typedef struct manypy_batcher_options manypy_batcher_options;

/* Defaults: max_batch 8, max_wait_us 2000, batch dimension 0, and the
 * method's name as the batcher's name. NULL only when out of memory. Since
 * 0.3 (as every batcher function). */
MANYPY_API manypy_batcher_options* manypy_batcher_options_new(void);
MANYPY_API void manypy_batcher_options_free(manypy_batcher_options* options);
/* The most rows in a batch, 1 to 65536 (MANYPY_ERR_OUT_OF_RANGE outside). */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_batcher_options_set_max_batch(
    manypy_batcher_options* options, size_t max_batch);
/* The longest a batch waits to fill after its first request, in
 * microseconds, 0 to 60,000,000 (0: a batch takes only what is already
 * waiting). */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_batcher_options_set_max_wait_us(
    manypy_batcher_options* options, int64_t max_wait_us);
/* The batch dimension, >= 0. Every tensor argument must have it. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_batcher_options_set_batch_dim(
    manypy_batcher_options* options, int32_t batch_dim);
/* The name in metrics (the `batcher` label). Copied. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_batcher_options_set_name(
    manypy_batcher_options* options, const char* name);

/* A batcher over `object`'s `method` (NULL: the object itself). `options`
 * is borrowed (NULL: defaults). The batcher holds the object: either may be
 * freed first. On success *out_batcher is owned by the caller. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_batcher_new(
    manypy_object* object, const char* method, const manypy_batcher_options* options,
    manypy_batcher** out_batcher);

/* Frees the handle. Accepts NULL. Requests still waiting for their batch to
 * fill are sent at once, and every accepted request completes as usual.
 * Must not race with calls on the same handle. */
MANYPY_API void manypy_batcher_free(manypy_batcher* batcher);

/* One request through the batcher, waiting for its result: arguments,
 * options and result as for manypy_object_call. Refused at once, as an
 * asynchronous call is, for arguments the batcher cannot split (no tensor,
 * tensors without the batch dimension or with different rows:
 * MANYPY_ERR_INVALID_ARGUMENT) and when the pool is overloaded. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_batcher_call(
    manypy_batcher* batcher, const manypy_value* args, const manypy_value* kwargs,
    const manypy_call_options* options, manypy_value** out_result);

/* The same, asynchronously, with the conventions of
 * manypy_object_call_async: `done` runs exactly once unless this returns a
 * status. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_batcher_call_async(
    manypy_batcher* batcher, const manypy_value* args, const manypy_value* kwargs,
    const manypy_call_options* options, manypy_call_done_fn done, void* user_data);

/* ------------------------------------------------------------------------ */
/* Operator callbacks                                                       */
/* ------------------------------------------------------------------------ */

/* One input of an operator (when inputs were asked for): never its data.
 * Fields are only ever appended: step through an array of them by
 * struct_size, not by sizeof (manypy_op_event_input does). */
typedef struct manypy_op_input {
  uint32_t struct_size; /* this library's sizeof(manypy_op_input) */
  /* MANYPY_VALUE_TENSOR, _INT64, _DOUBLE, _BOOL, _NONE, or -1 for others. */
  int32_t kind;
  DLDataType dtype; /* tensors: the element type ({MANYPY_DL_BOOL, 8, 1} for bool) */
  int32_t ndim;     /* tensors */
  const int64_t* shape;
} manypy_op_input;

/* One sampled operator. Every pointer is valid during the callback only.
 * Fields are only ever appended; struct_size says how many this library
 * fills. */
typedef struct manypy_op_event {
  uint32_t struct_size;
  const char* name; /* e.g. "aten::add" */
  int64_t sequence_number;
  uint64_t thread_id;   /* the OS thread id (gettid) running the operator */
  int32_t interpreter;  /* index in the process's interpreters; -1: the host */
  int64_t start_ns;     /* CLOCK_MONOTONIC */
  int64_t end_ns;       /* 0 in the enter callback */
  const char* model_id; /* the call's context, "" if none */
  const char* request_id;
  size_t num_inputs; /* 0 unless inputs were asked for */
  const manypy_op_input* inputs;
} manypy_op_event;

/* Input `index` (< event->num_inputs) of an event. */
static inline const manypy_op_input* manypy_op_event_input(
    const manypy_op_event* event, size_t index) {
  return (const manypy_op_input*)((const char*)event->inputs + index * event->inputs->struct_size);
}

typedef void (*manypy_op_callback_fn)(const manypy_op_event* event, void* user_data);

/* Registers callbacks around torch operators, sampled with probability
 * `sampling_probability` in (0, 1] (MANYPY_ERR_OUT_OF_RANGE outside it), in every interpreter of
 * the process (those started later too) and in the host's libtorch (TorchScript on the host).
 * `enter` and `exit` may be NULL. With `needs_inputs` (0 or 1), events carry each input's kind,
 * dtype and shape. Callbacks run on the thread running the operator, concurrently from many
 * threads; they must not call manypy and must not unwind. At most 16 registrations live at once
 * (MANYPY_ERR_RESOURCE_EXHAUSTED). free_user_data runs exactly once: when
 * the registration is removed, or at once if this call fails. On success
 * *out_id identifies the registration. Thread safety: any thread. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_add_op_callbacks(
    manypy_op_callback_fn enter, manypy_op_callback_fn exit, void* user_data,
    void (*free_user_data)(void*), double sampling_probability, int needs_inputs, uint64_t* out_id);

/* Removes a registration: when this returns, no callback of it runs or will
 * run, and its free_user_data has run. MANYPY_ERR_NO_SUCH_NAME for an
 * unknown id. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_remove_op_callbacks(uint64_t id);

/* ------------------------------------------------------------------------ */
/* The built-in sampled profiler                                            */
/* ------------------------------------------------------------------------ */

/* A profiler aggregating sampled operator events (exit callbacks through
 * manypy_add_op_callbacks) by model id and operator. Thread safe. */
typedef struct manypy_profiler manypy_profiler;

/* Starts profiling every interpreter and the host with the given sampling
 * probability in (0, 1] (MANYPY_ERR_OUT_OF_RANGE outside it). Uses one of
 * the 16 callback registrations. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_profiler_start(
    double sampling_probability, manypy_profiler** out_profiler);

/* Stops (no event is recorded after it returns) and frees. Accepts NULL. */
MANYPY_API void manypy_profiler_free(manypy_profiler* profiler);

/* One (model, operator) aggregate. Fields are only ever appended: step
 * through an array of them by struct_size, not by sizeof
 * (manypy_profile_entry_at does). */
typedef struct manypy_profile_entry {
  uint32_t struct_size; /* this library's sizeof(manypy_profile_entry) */
  const char* model_id; /* "" for operators run without a context */
  const char* op_name;
  uint64_t count; /* sampled calls */
  int64_t total_ns;
  int64_t p50_ns, p99_ns; /* over the latest 4096 samples of the pair */
} manypy_profile_entry;

/* The aggregates so far. *out_entries (an array of *out_count entries, with
 * their strings) is owned by the caller: free it with
 * manypy_profile_entries_free. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_profiler_snapshot(
    const manypy_profiler* profiler, manypy_profile_entry** out_entries, size_t* out_count);
MANYPY_API void manypy_profile_entries_free(manypy_profile_entry* entries, size_t count);

/* Entry `index` (< the snapshot's count) of a snapshot's array. */
static inline const manypy_profile_entry* manypy_profile_entry_at(
    const manypy_profile_entry* entries, size_t index) {
  return (const manypy_profile_entry*)((const char*)entries + index * entries->struct_size);
}

/* The aggregates in the Prometheus text exposition format (a summary,
 * manypy_operator_duration_seconds{model, operator, quantile}), as a string
 * value, for a service's /metrics endpoint. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_profiler_prometheus(
    const manypy_profiler* profiler, manypy_value** out_text);

/* The latest (up to 100,000) sampled events as Chrome trace-event JSON
 * (opens in Perfetto or chrome://tracing), as a string value. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_profiler_chrome_trace(
    const manypy_profiler* profiler, manypy_value** out_json);

/* ------------------------------------------------------------------------ */
/* API usage logging                                                        */
/* ------------------------------------------------------------------------ */

/* Called once per process for each distinct API usage key: torch's own
 * (e.g. "torch.python.import" from each interpreter's `import torch`,
 * "torch.script.load"), manypy's ("manypy.pool.create",
 * "manypy.package.load", "manypy.object.load", "manypy.script.load",
 * "manypy.aoti.load"), the
 * caller's (manypy_log_api_usage) and model code's
 * (torch._C._log_api_usage_once(key) in any interpreter). `key` is borrowed
 * for the call. May run on any thread, while the library holds a lock: it
 * must return quickly, must not call back into manypy, and must not unwind. */
typedef void (*manypy_api_usage_fn)(const char* key, void* user_data);

/* Installs `handler` for the process, replacing any earlier one (whose
 * free_user_data then runs). Before this returns, the new handler is called
 * on this thread with every key already seen, so a handler installed late
 * still sees each key once. `handler` NULL removes it. free_user_data, if
 * not NULL, runs exactly once, when the handler is replaced or removed.
 * It always returns NULL: nothing in it can fail. Thread safety: any
 * thread. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_set_api_usage_handler(
    manypy_api_usage_fn handler, void* user_data, void (*free_user_data)(void*));

/* Logs a key of the caller's (copied). A key already seen is ignored.
 * Thread safety: any thread. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_log_api_usage(const char* key);

/* ------------------------------------------------------------------------ */
/* Archive metadata                                                         */
/* ------------------------------------------------------------------------ */

/* The records of any PyTorch archive (TorchScript, torch.package, an
 * AOTInductor .pt2 package), e.g.
 * "extra/producer_info.json", read with libtorch's reader, without Python.
 * Errors as for manypy_package_load_file. The caller owns the result. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_archive_list_files(
    const char* path, manypy_value** out_list);

/* One record's bytes (extra files are "extra/<name>"). MANYPY_ERR_NO_SUCH_NAME
 * if absent. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_archive_read_file(
    const char* path, const char* name, manypy_value** out_bytes);

/* Writes a copy of the PyTorch archive at `path` (TorchScript, torch.package
 * or .pt2) to `new_path` (libtorch's writer), with `extra_files` (a dict of
 * name -> bytes or string, borrowed; NULL for none) stored as
 * "extra/<name>" (replacing records of those names), plus the export hook's
 * files: how a pipeline stamps metadata on a package it did not write
 * through manypy. The copy loads like the original; its digest differs (a
 * trust must list it anew). Errors as manypy_archive_list_files, and
 * MANYPY_ERR_NOT_FOUND for a `new_path` that cannot be written. Thread
 * safety: any thread. Since 0.3. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_archive_save_copy(
    const char* path, const char* new_path, const manypy_value* extra_files);

/* Saves a TorchScript module (torch.jit.save) to `path`, with `extra_files`
 * (a dict of name -> bytes or string, borrowed; NULL for none) stored as
 * "extra/<name>", plus the export hook's files. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_script_save_file(
    const manypy_script_module* module, const char* path, const manypy_value* extra_files);

/* Writes a copy of a loaded torch.package archive to `path` (libtorch's
 * writer) with `extra_files` (a dict of name -> bytes or string, borrowed;
 * NULL for none) stored as "extra/<name>", plus the export hook's files.
 * The copy loads like the original. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_package_save_file(
    const manypy_package* package, const char* path, const manypy_value* extra_files);

/* The process-wide export hook: returns a new dict value (name -> bytes or
 * string; ownership passes to manypy) of files to add to an archive being
 * written, or NULL for none. Called for every archive written in the
 * process: manypy_script_save_file, and torch.jit.save and torch.package's
 * PackageExporter in any interpreter (their files go to "extra/<name>").
 * Runs on the writing thread, under a lock; must not call manypy functions
 * other than the manypy_value ones, and must not unwind. */
typedef manypy_value* (*manypy_export_hook_fn)(void* user_data);

/* Installs the hook, replacing any earlier one (whose free_user_data runs
 * once no call of it is in progress). `hook` NULL removes it (and frees
 * `user_data` at once). free_user_data, if not NULL, runs exactly once: when
 * the hook is replaced or removed, or before this returns if it fails
 * (MANYPY_ERR_RESOURCE_EXHAUSTED). Thread safety: any thread. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_set_export_hook(
    manypy_export_hook_fn hook, void* user_data, void (*free_user_data)(void*));

/* ------------------------------------------------------------------------ */
/* Custom operators                                                         */
/* ------------------------------------------------------------------------ */

/* Loads a custom operator library (a shared library registering operators
 * with TORCH_LIBRARY, as torch.ops.load_library takes) into the host's
 * libtorch, for TorchScript on the host, and into every interpreter of the
 * process, present and future, so packaged models can call
 * torch.ops.<namespace>.<op>. MANYPY_ERR_NOT_FOUND if there is no such file;
 * MANYPY_ERR_LOADER with the loader's (or Python's) message if it does not
 * load. A library is never unloaded. Thread safety: any thread. */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_load_operator_library(const char* path);

/* Intra-op threads of the host's libtorch (torch.set_num_threads), used by
 * TorchScript calls and by AOTInductor packages' compiled kernels (their
 * OpenMP teams), >= 1 (MANYPY_ERR_OUT_OF_RANGE below). Applies to
 * threads that have not yet run an operator. Interpreters have their own
 * setting (manypy_pool_options). */
MANYPY_API MANYPY_NODISCARD manypy_status* manypy_script_set_intra_op_threads(int threads);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MANYPY_H */
