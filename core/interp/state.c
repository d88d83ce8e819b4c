/*
 * What every file of libmanypy_interp.so shares: the runtime module, the
 * host's and the hooks' tables, entering and leaving this interpreter's GIL,
 * and whether this process is a child that model code forked. interp.c
 * sets them up as the interpreter starts; every other file only reads them.
 */
#include "state.h"

#include <signal.h>
#include <unistd.h>

#include "stack_guard.h"

PyObject* mpi_runtime; /* module _manypy_runtime */
const mpi_host_api* mpi_host;
const struct manypy_hooks_api* mpi_hooks;

/* Bumped by every lease_begin. torch keeps its intra-op thread count per
 * thread (OpenMP's nthreads ICV, applied once per thread), and grad mode,
 * autocast, modes and flush-denormal too, so each thread puts its torch
 * settings back to their defaults and applies the lease's count when it
 * sees a new generation (runtime.py, apply_lease_to_thread). */
static int g_threads_generation;
static _Thread_local int t_threads_generation = -1;
static volatile sig_atomic_t g_forked_child; /* see "forked children" */

void mpi_new_threads_generation(void) {
  g_threads_generation++;
  t_threads_generation = g_threads_generation;
}

/* ---- GIL entry ---------------------------------------------------------- */

/* Acquire this interpreter's GIL on the calling thread. The first entry of a
 * thread creates its thread state through PyGILState_Ensure, so that
 * PyGILState_GetThisThreadState (which pybind11 and torch rely on) knows it;
 * the state is kept, with its gilstate counter at 1, until thread_exit. */
void mpi_enter(void) {
  PyThreadState* ts = PyGILState_GetThisThreadState();
  if (ts != NULL) {
    PyEval_RestoreThread(ts);
  } else {
    (void)PyGILState_Ensure();
  }
  mpi_stack_guard_enter(); /* before any Python runs on this thread */
  if (t_threads_generation != g_threads_generation && mpi_runtime != NULL) {
    PyObject* r = PyObject_CallMethod(mpi_runtime, "apply_lease_to_thread", NULL);
    if (r == NULL) PyErr_Clear(); /* torch not imported: nothing to apply */
    Py_XDECREF(r);
    t_threads_generation = g_threads_generation;
  }
}

void mpi_leave(void) {
  mpi_stack_guard_leave();
  /* A child that model code forked returns here only when its Python code
   * returned without an error (an error went through mpi_report): it must
   * not go on into the host's code. */
  if (g_forked_child) mpi_exit_forked_child(0);
  (void)PyEval_SaveThread();
}

/* ---- forked children ---------------------------------------------------- */

/* g_forked_child is set in a child that model code forked (os.fork,
 * multiprocessing, a DataLoader's workers) by this namespace's libc, which
 * runs the handlers registered through it (pthread_atfork, at start)
 * whenever Python forks. */

void mpi_note_forked_child(void) { g_forked_child = 1; }

int mpi_in_forked_child(void) { return g_forked_child; }

/* The child is a copy of the whole host, with one thread. Returning from a
 * call would run the host program a second time from that point, and the
 * host's code would run in a process whose other threads vanished mid-way
 * (their locks, the host libc's malloc included, may be held for good).
 * So the child ends here, as a Python program ends: 0, or 1 after an
 * error. */
void mpi_exit_forked_child(int code) { _exit(code); }
