/* What the files of libmanypy_interp.so share. Nothing here is exported:
 * the library's only exported symbol is manypy_interp_get_api. */
#ifndef MANYPY_INTERP_INTERNAL_H
#define MANYPY_INTERP_INTERNAL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "interp_api.h"

/* The module _manypy_runtime (runtime.py), once started. */
extern PyObject* mpi_runtime;
/* The host's services (mpi_start_options.host). */
extern const mpi_host_api* mpi_host;
/* libmanypy_hooks.so's table, once loaded. */
struct manypy_hooks_api;
extern const struct manypy_hooks_api* mpi_hooks;

/* Takes this interpreter's GIL on the calling thread / gives it back. */
void mpi_enter(void);
void mpi_leave(void);

/* Whether this process is a child that model code forked (interp.c), and
 * the way such a child ends instead of returning into the host's code. */
int mpi_in_forked_child(void);
void mpi_exit_forked_child(int code);

/* Sends an error to the sink. */
void mpi_report(const mpi_sink* sink, int code, const char* type, const char* message,
                const char* traceback);
/* A Python exception described for a sink: type name, one-line message and
 * traceback (PyMem copies; NULL when absent). Describing runs str() of the
 * exception, which may be the model's code: calls capture their error while
 * their stop still applies, and report it once they are over. */
typedef struct mpi_error {
  int captured;
  int code;
  char *type, *message, *traceback;
} mpi_error;
/* Takes the pending exception (none: MPI_ERR_INTERNAL) into `e`. */
void mpi_error_capture(mpi_error* e);
/* Reports `e` (with `forced_code` if >= 0 and `forced_message` if not NULL)
 * and clears it; returns the code reported. */
int mpi_error_report(mpi_error* e, const mpi_sink* sink, int forced_code,
                     const char* forced_message);
void mpi_error_clear(mpi_error* e);

/* Turns the pending Python exception into a sink error; returns its code. */
int mpi_report_python_error(const mpi_sink* sink);
/* The same with the code chosen by the caller. */
int mpi_report_python_error_as(const mpi_sink* sink, int code);
/* The same with the code and the one-line message chosen by the caller; the
 * exception still gives the type and the traceback. */
int mpi_report_python_error_with(const mpi_sink* sink, int code, const char* message);

/* Stopping calls early (stop.c). mpi_init_stops runs once the runtime is
 * loaded. Around a call that may stop, with the GIL held: mpi_call_begin
 * (MPI_OK, or the stop already set, reported), then everything the call
 * runs, its result prepared or its error captured, then mpi_call_end (0, or
 * the stop to report with mpi_report_stop, which also says what became of
 * the error captured, if any). */
int mpi_init_stops(void);
int mpi_call_begin(mpi_call_control* control, const mpi_sink* sink);
int mpi_call_end(mpi_call_control* control);
int mpi_report_stop(int stop, mpi_error* error, const mpi_sink* sink);
/* Captures the pending error of a call that may have been stopped: the
 * model's own exceptions are described under the stop (their str() is the
 * model's code), the stop's exception with the stop held back. */
void mpi_capture_call_error(mpi_error* error);
void mpi_interrupt(mpi_call_control* control);

/* torch's objects that conversions use, looked up once torch is imported
 * (mpi_init_tensors), before any model code ran (convert.c). */
typedef struct mpi_torch_refs {
  PyTypeObject* tensor_type;    /* torch.Tensor */
  PyTypeObject* parameter_type; /* torch.nn.Parameter */
  PyObject *to_dlpack, *from_dlpack; /* torch._C._to_dlpack, _from_dlpack */
  PyObject *view, *detach;      /* torch's C methods TensorBase.view, .detach */
  PyObject* dtype_of;           /* TensorBase.dtype, a descriptor */
  PyObject *bool_dtype, *uint8_dtype;
  /* Whether this torch's DLPack speaks bool; torch 1.13's does not, and
   * bool tensors cross it as uint8 views instead. */
  int bool_native;
} mpi_torch_refs;
extern mpi_torch_refs mpi_torch;

/* Builds a Python object from an argument tree; NULL with a Python exception
 * set on failure. Either way every tensor in `value` has been taken care of
 * (consumed, or its deleter run). */
PyObject* mpi_to_python(const mpi_value* value);
/* Runs the deleters of every tensor in `value` (an argument that will not be
 * converted). */
void mpi_release_tensors(const mpi_value* value);
/* Results for the host (results.c, which says why in three steps). */
typedef struct mpi_result mpi_result;
/* Walks `obj` (borrowed) with exact type checks and snapshots of its
 * containers, running no Python code of the model's, and exports its
 * tensors. A failure (an unsupported type, say) is kept and sent in place
 * of the value. NULL only when out of memory, with an exception set. */
mpi_result* mpi_result_prepare(PyObject* obj);
/* Once the caller has dropped the result and everything else the call
 * held: makes each tensor the host's alone, zero-copy when nothing in the
 * interpreter can reach its storage any more, else a copy. */
int mpi_result_own_tensors(mpi_result* r);
/* Sends the value (or the failure) to the sink and frees `r`; returns
 * MPI_OK or the error code sent. */
int mpi_result_send(mpi_result* r, const mpi_sink* sink);
/* Frees `r` unsent, releasing its tensors. Accepts NULL. */
void mpi_result_discard(mpi_result* r);
/* All three steps for a result nothing else holds: takes `result`'s
 * reference. */
int mpi_deliver(PyObject* result, const mpi_sink* sink);

/* Makes PackageExporter add the host's export files (exports.c). */
int mpi_install_export_files(const mpi_sink* sink);

/* Looks up torch's DLPack functions once torch is imported. */
int mpi_init_tensors(void);

#endif
