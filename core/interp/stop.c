/* Stopping a call early: deadlines and cancel tokens, on the interpreter side.
 *
 * The host sets control->stop from any thread and then, from a thread of
 * its own, calls mpi_interrupt, which takes this interpreter's GIL. Under the
 * GIL it raises the stop in the call's thread as an asynchronous exception
 * (checked at the next bytecode boundary), and installs a trace function on
 * that thread that raises it again at every line and call, so that model
 * code that catches it cannot keep the call alive. The call's own thread
 * undoes both when the call ends (mpi_call_end), under the same GIL, so an
 * interrupt never reaches a later call. */
#include "interp_internal.h"

static PyObject* g_deadline_exceeded; /* runtime.DeadlineExceeded */
static PyObject* g_cancelled;         /* runtime.Cancelled */

int mpi_init_stops(void) {
  g_deadline_exceeded = PyObject_GetAttrString(mpi_runtime, "DeadlineExceeded");
  g_cancelled = PyObject_GetAttrString(mpi_runtime, "Cancelled");
  return g_deadline_exceeded && g_cancelled ? 0 : -1;
}

/* Sequentially consistent, as the host's store of the stop and its flag
 * CallStop::in_interpreter are: either mpi_call_begin sees a stop set at the
 * last moment, or the host's watchdog sees the call in the interpreter and
 * interrupts it (call_stop.h). */
static int stop_of(const mpi_call_control* control) {
  return __atomic_load_n(&control->stop, __ATOMIC_SEQ_CST);
}

static PyObject* exception_for(int stop) {
  return stop == MPI_ERR_CANCELLED ? g_cancelled : g_deadline_exceeded;
}

static const char* what_for(int stop) {
  return stop == MPI_ERR_CANCELLED ? "cancelled" : "deadline exceeded";
}

/* The trace function of a stopped call: every line and every call raises
 * the stop again. `exc` is the exception type. */
static int raise_stop(PyObject* exc, PyFrameObject* frame, int what, PyObject* arg) {
  (void)frame;
  (void)arg;
  if (what != PyTrace_LINE && what != PyTrace_CALL) return 0;
  PyErr_SetNone(exc);
  return -1;
}

int mpi_call_begin(mpi_call_control* control, const mpi_sink* sink) {
  if (control == NULL) return MPI_OK;
  int stop = stop_of(control);
  if (stop != 0) {
    char message[128];
    snprintf(message, sizeof message, "%s before the call started running", what_for(stop));
    mpi_report(sink, stop, "", message, "");
    return stop;
  }
  control->running = PyThreadState_Get();
  control->thread_ident = PyThread_get_thread_ident();
  control->interrupted = 0;
  return MPI_OK;
}

int mpi_call_end(mpi_call_control* control) {
  if (control == NULL) return 0;
  control->running = NULL;
  if (control->interrupted) {
    /* An asynchronous exception not yet raised must not fire in whatever
     * this thread runs next. The pending exception, if any, is kept. */
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyThreadState_SetAsyncExc(control->thread_ident, NULL);
    PyEval_SetTrace(NULL, NULL);
    PyErr_Clear();
    PyErr_Restore(type, value, tb);
  }
  return stop_of(control);
}

int mpi_report_stop(int stop, const mpi_sink* sink) {
  char message[160];
  if (!PyErr_Occurred()) {
    snprintf(message, sizeof message, "%s: the call finished after it and its result was dropped",
             what_for(stop));
    mpi_report(sink, stop, "", message, "");
    return stop;
  }
  snprintf(message, sizeof message,
           "%s: the call's Python code was stopped (the traceback shows where)", what_for(stop));
  return mpi_report_python_error_with(sink, stop, message);
}

void mpi_interrupt(mpi_call_control* control) {
  mpi_enter();
  int stop = stop_of(control);
  if (control->running != NULL && stop != 0) {
    PyObject* exc = exception_for(stop);
    control->interrupted = 1;
    PyThreadState_SetAsyncExc(control->thread_ident, exc);
    /* CPython's own function for setting another thread's trace (3.12's
     * PyEval_SetTraceAllThreads is built on it); private API, so the one
     * Python-version-specific line of this file. */
    if (_PyEval_SetTrace((PyThreadState*)control->running, raise_stop, exc) != 0) {
      PyErr_Clear(); /* an audit hook refused: the asynchronous exception still fires */
    }
  }
  mpi_leave();
}
