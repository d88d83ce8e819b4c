/*
 * Deep recursion ends in RecursionError, never in a stack overflow that
 * kills the host process (issue 36: `sys.setrecursionlimit(10**6)`, then a
 * recursion through C such as `list(map(f, ...))` 300,000 deep, was a
 * SIGSEGV in both thread modes).
 *
 * CPython counts recursion; it does not measure the stack. 3.11 counts
 * Python frames and C recursion together against sys.getrecursionlimit(),
 * which model code may raise as far as it likes; 3.12 and 3.13 count C
 * recursion against a fixed limit (1500, 10000) whatever the thread's
 * stack. A level of recursion through C takes up to
 * MPI_STACK_BYTES_PER_LEVEL bytes of the thread's stack (measured:
 * docs/threads.md, "Deep recursion"), so a thread may go only as many
 * levels deeper as the stack left below the point where it enters the
 * interpreter can hold, keeping MPI_STACK_RESERVE for what runs past the
 * limit (the error's handling, which CPython lets go 50 levels further,
 * and C++ frames of torch that count no level).
 *
 * Each entry (mpi_enter) takes off the thread's remaining count what its
 * stack cannot hold, and its exit (mpi_leave) gives it back: the thread
 * then raises RecursionError there, with a traceback, as it would at the
 * recursion limit. On 3.11, sys.setrecursionlimit resets the count of every
 * thread of the interpreter, so it is replaced by one that takes it off
 * again for every thread still inside the interpreter.
 *
 * Not covered: threads that model code starts itself (threading.Thread),
 * which never enter through mpi_enter; Python 3.14 measures the stack
 * itself.
 */
#include "stack_guard.h"

#include <stdint.h>

#include "errors.h"

#ifndef MPI_STACK_BYTES_PER_LEVEL /* defined otherwise only to measure */
#if PY_VERSION_HEX >= 0x030C0000
/* 3.12 counts only C recursion, so a counted level holds more of the stack
 * (sorted with a key: 2,496 bytes). */
#define MPI_STACK_BYTES_PER_LEVEL 3072
#else
#define MPI_STACK_BYTES_PER_LEVEL 2048
#endif
#endif
#ifndef MPI_STACK_RESERVE
#define MPI_STACK_RESERVE (128 * 1024)
#endif

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030E0000
#define MPI_STACK_GUARD 1
#if PY_VERSION_HEX >= 0x030C0000
#define MPI_REMAINING(ts) ((ts)->c_recursion_remaining)
#else
#define MPI_REMAINING(ts) ((ts)->recursion_remaining)
#endif
#endif

#ifdef MPI_STACK_GUARD

/* ---- the guards of the threads inside the interpreter ------------------- */

/* One per thread inside the interpreter (between mpi_enter and mpi_leave),
 * in a table under the GIL. Not thread-local storage: a namespace's comes
 * out of the process's static TLS, which limits how many interpreters a
 * process holds (docs/isolation.md), and the stack's bounds come from the
 * host's cache (mpi_host_api.stack_room) for the same reason. */
typedef struct guard {
  PyThreadState* ts;
  int entries; /* mpi_enter nesting on this thread */
  long cap;    /* 3.11: the deepest the thread may be; 3.12: the most it may count */
  long taken;  /* what is taken off the thread's remaining count now */
} guard;

static guard* g_inside; /* PyMem_RawMalloc'd */
static size_t g_count, g_capacity;

static guard* find(PyThreadState* ts) {
  for (size_t i = 0; i < g_count; ++i) {
    if (g_inside[i].ts == ts) return &g_inside[i];
  }
  return NULL;
}

/* Takes off `g->ts`'s remaining count what its stack cannot hold. */
static void apply(guard* g) {
#if PY_VERSION_HEX >= 0x030C0000
  /* The count is C recursion alone, and nothing else resets it. */
  long want = (long)MPI_REMAINING(g->ts) + g->taken - g->cap;
#else
  /* The depth is recursion_limit - recursion_remaining - taken; the thread
   * may reach min(limit, cap). */
  long want = (long)g->ts->recursion_limit - g->cap;
#endif
  if (want < 0) want = 0;
  MPI_REMAINING(g->ts) -= (int)(want - g->taken);
  g->taken = want;
}

void mpi_stack_guard_enter(void) {
  PyThreadState* ts = PyThreadState_Get();
  guard* g = find(ts);
  if (g != NULL) {
    g->entries++;
    return;
  }
  size_t room =
      mpi_host != NULL && mpi_host->stack_room != NULL ? mpi_host->stack_room() : SIZE_MAX;
  if (room == SIZE_MAX) return; /* unknown: CPython's own limits */
  if (g_count == g_capacity) {
    size_t capacity = g_capacity ? 2 * g_capacity : 16;
    guard* grown = PyMem_RawRealloc(g_inside, capacity * sizeof *grown);
    if (grown == NULL) return; /* out of memory: CPython's own limits */
    g_inside = grown;
    g_capacity = capacity;
  }
  long levels =
      room > MPI_STACK_RESERVE ? (long)((room - MPI_STACK_RESERVE) / MPI_STACK_BYTES_PER_LEVEL) : 0;
  g = &g_inside[g_count++];
  g->ts = ts;
  g->entries = 1;
  g->taken = 0;
#if PY_VERSION_HEX >= 0x030C0000
  g->cap = levels;
#else
  g->cap = (long)ts->recursion_limit - (long)MPI_REMAINING(ts) + levels;
#endif
  apply(g);
}

void mpi_stack_guard_leave(void) {
  guard* g = find(PyThreadState_Get());
  if (g == NULL || --g->entries > 0) return;
  MPI_REMAINING(g->ts) += (int)g->taken;
  *g = g_inside[--g_count];
}

#if PY_VERSION_HEX < 0x030C0000

/* Whether `ts` is still one of the interpreter's thread states: in a child
 * that model code forked, the other threads' states are gone. */
static int alive(PyThreadState* ts) {
  PyInterpreterState* interp = PyThreadState_GetInterpreter(PyThreadState_Get());
  for (PyThreadState* t = PyInterpreterState_ThreadHead(interp); t != NULL;
       t = PyThreadState_Next(t)) {
    if (t == ts) return 1;
  }
  return 0;
}

static PyObject* g_setrecursionlimit; /* sys's own */

/* sys.setrecursionlimit(limit), in C so that no other thread runs between
 * its parts. sys's own sets every thread's remaining count from the depth
 * it reads off it, and refuses a limit below the calling thread's depth: so
 * this thread's count is given back first (or the depth it read would
 * include what was taken), and every thread inside has it taken off again
 * after, whether the limit changed or was refused. */
static PyObject* setrecursionlimit(PyObject* self, PyObject* limit) {
  (void)self;
  guard* me = find(PyThreadState_Get());
  if (me != NULL) {
    MPI_REMAINING(me->ts) += (int)me->taken;
    me->taken = 0;
  }
  PyObject* r = PyObject_CallOneArg(g_setrecursionlimit, limit);
  for (size_t i = 0; i < g_count;) {
    if (!alive(g_inside[i].ts)) {
      g_inside[i] = g_inside[--g_count]; /* a thread of the parent of this forked child */
      continue;
    }
    apply(&g_inside[i]);
    ++i;
  }
  return r;
}

static PyMethodDef kSetRecursionLimit = {
    "setrecursionlimit", setrecursionlimit, METH_O,
    "setrecursionlimit($module, limit, /)\n--\n\nSet the maximum depth of the Python "
    "interpreter stack to n (manypy: each thread stops sooner if its stack cannot hold "
    "that many levels)."};

int mpi_install_stack_guard(const mpi_sink* sink) {
  PyObject* sys = PyImport_ImportModule("sys");
  PyObject* fn = PyCFunction_New(&kSetRecursionLimit, NULL);
  int rc = MPI_OK;
  if (sys == NULL || fn == NULL) {
    rc = mpi_report_python_error(sink);
  } else if (g_setrecursionlimit == NULL) {
    g_setrecursionlimit = PyObject_GetAttrString(sys, "setrecursionlimit");
    if (g_setrecursionlimit == NULL || PyObject_SetAttrString(sys, "setrecursionlimit", fn) != 0) {
      rc = mpi_report_python_error(sink);
    }
  }
  Py_XDECREF(fn);
  Py_XDECREF(sys);
  return rc;
}

#else

int mpi_install_stack_guard(const mpi_sink* sink) {
  (void)sink;
  return MPI_OK; /* sys.setrecursionlimit does not touch the C count */
}

#endif

#else /* a Python this guard does not know: its own limits */

void mpi_stack_guard_enter(void) {}
void mpi_stack_guard_leave(void) {}
int mpi_install_stack_guard(const mpi_sink* sink) {
  (void)sink;
  return MPI_OK;
}

#endif
