/* results.c: results on their way to the host. Nothing here is exported: the
 * library's only exported symbol is manypy_interp_get_api. */
#ifndef MANYPY_INTERP_RESULTS_H
#define MANYPY_INTERP_RESULTS_H

#include "state.h"

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

#endif
