/* stop.c: stopping calls early. Nothing here is exported: the library's only
 * exported symbol is manypy_interp_get_api. */
#ifndef MANYPY_INTERP_STOP_H
#define MANYPY_INTERP_STOP_H

#include "errors.h"

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
/* The stop again, where the trace cannot raise it (stop.c); 1 while the
 * call still runs in the interpreter. */
int mpi_escalate(mpi_call_control* control);

#endif
