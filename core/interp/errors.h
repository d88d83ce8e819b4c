/* errors.c: Python exceptions and other failures, as sink errors. Nothing
 * here is exported: the library's only exported symbol is
 * manypy_interp_get_api. */
#ifndef MANYPY_INTERP_ERRORS_H
#define MANYPY_INTERP_ERRORS_H

#include "state.h"

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

#endif
