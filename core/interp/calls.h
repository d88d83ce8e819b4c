/* calls.c: what every call into model code shares, whatever it runs (an
 * object's method, or source from the pool's exec and eval). Nothing here
 * is exported: the library's only exported symbol is manypy_interp_get_api. */
#ifndef MANYPY_INTERP_CALLS_H
#define MANYPY_INTERP_CALLS_H

#include "results.h"
#include "stop.h"

/* Pushes the caller's context (either id may be NULL; both NULL: none),
 * which operator callbacks of everything the call runs report; returns
 * what mpi_context_pop needs to undo it. */
int mpi_context_push(const char* model_id, const char* request_id);
void mpi_context_pop(int pushed);

/* What a call into model code produced, held until the call is over: what
 * reaches the host is decided only then (stop.c). */
typedef struct mpi_outcome {
  mpi_result* result;
  mpi_error error;
} mpi_outcome;
/* Takes what the call returned (a new reference, or NULL with an exception
 * pending): its result prepared (if `want` it), or its error described.
 * Both run under the call's stop. */
void mpi_outcome_take(mpi_outcome* o, PyObject* returned, int want);
/* Once the caller has dropped everything else the call held: makes the
 * result's tensors the host's, ends the call (mpi_call_end), and reports
 * the stop, the result or the error; returns the code reported. */
int mpi_outcome_finish(mpi_outcome* o, mpi_call_control* control, const mpi_sink* sink);

#endif
