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

#include <pthread.h>
#include <stdint.h>

#include "errors.h"

#ifndef MPI_STACK_BYTES_PER_LEVEL /* defined otherwise only to measure */
#define MPI_STACK_BYTES_PER_LEVEL 2048
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

/* ---- the stack ---------------------------------------------------------- */

/* The lowest usable address of the calling thread's stack (stacks grow
 * down), read once per thread: glibc reads /proc/self/maps for the main
 * thread. */
static _Thread_local const char* t_stack_low;
static _Thread_local int t_stack_known; /* 0: not read yet; 1: read; -1: unreadable */

/* Bytes between here and the end of the calling thread's stack, or
 * SIZE_MAX when its bounds cannot be read. */
static size_t stack_room(void) {
  if (t_stack_known == 0) {
    t_stack_known = -1;
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      void* low = NULL;
      size_t size = 0;
      if (pthread_attr_getstack(&attr, &low, &size) == 0 && low != NULL) {
        t_stack_low = (const char*)low;
        t_stack_known = 1;
      }
      pthread_attr_destroy(&attr);
    }
  }
  char here;
  if (t_stack_known != 1 || &here < t_stack_low) return SIZE_MAX;
  return (size_t)(&here - t_stack_low);
}

#ifdef MPI_STACK_GUARD

/* ---- the guards of the threads inside the interpreter ------------------- */

/* One per thread (each namespace has its own copy of this library, so one
 * per thread and interpreter), linked while the thread is inside, under the
 * GIL. */
typedef struct guard {
  PyThreadState* ts;
  int entries; /* mpi_enter nesting on this thread */
  long cap;    /* 3.11: the deepest the thread may be; 3.12: the most it may count */
  long taken;  /* what is taken off the thread's remaining count now */
  struct guard* next;
} guard;

static _Thread_local guard t_guard;
static guard* g_inside;

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
  guard* g = &t_guard;
  if (g->entries++ > 0) return;
  size_t room = stack_room();
  if (room == SIZE_MAX) return; /* unknown: CPython's own limits */
  long levels =
      room > MPI_STACK_RESERVE ? (long)((room - MPI_STACK_RESERVE) / MPI_STACK_BYTES_PER_LEVEL) : 0;
  g->ts = PyThreadState_Get();
  g->taken = 0;
#if PY_VERSION_HEX >= 0x030C0000
  g->cap = levels;
#else
  g->cap = (long)g->ts->recursion_limit - (long)MPI_REMAINING(g->ts) + levels;
#endif
  apply(g);
  g->next = g_inside;
  g_inside = g;
}

void mpi_stack_guard_leave(void) {
  guard* g = &t_guard;
  if (g->entries == 0 || --g->entries > 0 || g->ts == NULL) return;
  MPI_REMAINING(g->ts) += (int)g->taken;
  for (guard** p = &g_inside; *p != NULL; p = &(*p)->next) {
    if (*p == g) {
      *p = g->next;
      break;
    }
  }
  g->ts = NULL;
  g->taken = 0;
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
  guard* me = &t_guard;
  if (me->ts != NULL) {
    MPI_REMAINING(me->ts) += (int)me->taken;
    me->taken = 0;
  }
  PyObject* r = PyObject_CallOneArg(g_setrecursionlimit, limit);
  for (guard** p = &g_inside; *p != NULL;) {
    guard* g = *p;
    if (!alive(g->ts)) {
      *p = g->next; /* a thread of the parent of this forked child */
      continue;
    }
    apply(g);
    p = &g->next;
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

void mpi_stack_guard_enter(void) { (void)stack_room; }
void mpi_stack_guard_leave(void) {}
int mpi_install_stack_guard(const mpi_sink* sink) {
  (void)sink;
  return MPI_OK;
}

#endif
