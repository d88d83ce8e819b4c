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
/* Turns the pending Python exception into a sink error; returns its code. */
int mpi_report_python_error(const mpi_sink* sink);
/* The same with the code chosen by the caller. */
int mpi_report_python_error_as(const mpi_sink* sink, int code);
/* The same with the code and the one-line message chosen by the caller; the
 * exception still gives the type and the traceback. */
int mpi_report_python_error_with(const mpi_sink* sink, int code, const char* message);

/* Stopping calls early (stop.c). mpi_init_stops runs once the runtime is
 * loaded. Around a call that may stop, with the GIL held: mpi_call_begin
 * (MPI_OK, or the stop already set, reported), then mpi_call_end right after
 * the Python code returns (0, or the stop to report with mpi_report_stop,
 * which also consumes the pending exception). */
int mpi_init_stops(void);
int mpi_call_begin(mpi_call_control* control, const mpi_sink* sink);
int mpi_call_end(mpi_call_control* control);
int mpi_report_stop(int stop, const mpi_sink* sink);
void mpi_interrupt(mpi_call_control* control);

/* Builds a Python object from an argument tree; NULL with a Python exception
 * set on failure. Either way every tensor in `value` has been taken care of
 * (consumed, or its deleter run). */
PyObject* mpi_to_python(const mpi_value* value);
/* Runs the deleters of every tensor in `value` (an argument that will not be
 * converted). */
void mpi_release_tensors(const mpi_value* value);
/* Streams a Python result into the sink. Returns MPI_OK or an error code
 * (reported to the sink). */
int mpi_deliver(PyObject* result, const mpi_sink* sink);

/* Makes PackageExporter add the host's export files (exports.c). */
int mpi_install_export_files(const mpi_sink* sink);

/* Looks up torch's DLPack functions once torch is imported. */
int mpi_init_tensors(void);

#endif
