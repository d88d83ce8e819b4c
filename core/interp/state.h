/* state.c: what every file of libmanypy_interp.so shares. Nothing here is
 * exported: the library's only exported symbol is manypy_interp_get_api. */
#ifndef MANYPY_INTERP_STATE_H
#define MANYPY_INTERP_STATE_H

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

/* Each thread puts torch's per-thread settings back to their defaults and
 * applies the lease's intra-op thread count at its next mpi_enter
 * (lease_begin; the calling thread counts as done). */
void mpi_new_threads_generation(void);

/* Whether this process is a child that model code forked, noted by the
 * pthread_atfork child handler; and the way such a child ends instead of
 * returning into the host's code. */
void mpi_note_forked_child(void);
int mpi_in_forked_child(void);
void mpi_exit_forked_child(int code);

#endif
