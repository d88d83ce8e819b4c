/* stack_guard.c: deep recursion ends in RecursionError, never in a stack
 * overflow that kills the host. Nothing here is exported: the library's
 * only exported symbol is manypy_interp_get_api. */
#ifndef MANYPY_INTERP_STACK_GUARD_H
#define MANYPY_INTERP_STACK_GUARD_H

#include "state.h"

/* With the GIL held, on the thread that entered (mpi_enter) or is about to
 * leave (mpi_leave): limits how deep this thread may recurse from here to
 * what its stack can hold, and puts the limit back. */
void mpi_stack_guard_enter(void);
void mpi_stack_guard_leave(void);

/* At start, with the GIL held: keeps sys.setrecursionlimit from lifting the
 * limits of the threads inside the interpreter (on Python 3.11). */
int mpi_install_stack_guard(const mpi_sink* sink);

#endif
