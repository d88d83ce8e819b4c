/* Stopping a call early: deadlines and cancel tokens, on the interpreter side
 * (docs/threads.md, "Deadlines and cancellation").
 *
 * The host sets control->stop from any thread and then, from a thread of
 * its own, calls mpi_interrupt, which takes this interpreter's GIL and
 * installs a trace function on the call's thread. The trace function raises
 * the stop (manypy.DeadlineExceeded or manypy.Cancelled, BaseExceptions)
 * once, at the next line of the model's own code, so that the clean-up the
 * stop unwinds through runs: finally blocks, __exit__ (a lock released,
 * autocast turned off, a half-done import undone by importlib). Code of the
 * interpreter's own installation (the standard library, torch) is not
 * interrupted in the middle, unless the call stays there for the grace
 * period. If the call has not returned a grace period after the raise, the
 * model is catching the stop or its clean-up hangs: the trace function then
 * raises the stop at every line of any code ("escalates"), which ends the
 * call but cuts clean-up short.
 *
 * When a call that was stopped ends (mpi_call_end, on its own thread, under
 * the same GIL), the trace goes, and the interpreter checks what a stop can
 * leave behind (runtime.after_stop: half-initialised modules, import locks,
 * logging's locks, torch's autocast state), repairing what it can. A call
 * whose clean-up was cut short, or that left what cannot be repaired, tells
 * the host to retire the interpreter (control->retire): its state can no
 * longer be trusted. */
#include "stop.h"

#include <string.h>
#include <time.h>

static PyObject* g_deadline_exceeded; /* runtime.DeadlineExceeded */
static PyObject* g_cancelled;         /* runtime.Cancelled */
static PyObject* g_installation;      /* runtime.installation_roots(): a tuple of str */

int mpi_init_stops(void) {
  g_deadline_exceeded = PyObject_GetAttrString(mpi_runtime, "DeadlineExceeded");
  g_cancelled = PyObject_GetAttrString(mpi_runtime, "Cancelled");
  g_installation = PyObject_CallMethod(mpi_runtime, "installation_roots", NULL);
  return g_deadline_exceeded && g_cancelled && g_installation && PyTuple_Check(g_installation) ? 0
                                                                                               : -1;
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Sequentially consistent, as the host's store of the stop and its flag
 * CallStop::in_interpreter are: either mpi_call_begin sees a stop set at the
 * last moment, or the host's watchdog sees the call in the interpreter and
 * interrupts it (call_stop.h). */
static int stop_of(const mpi_call_control* control) {
  return __atomic_load_n(&control->stop, __ATOMIC_SEQ_CST);
}

/* The stop, after setting it if the deadline has passed at `now` (read
 * only when there is a deadline: 0 reads the clock then). */
static int check_at(mpi_call_control* control, int64_t now) {
  if (stop_of(control) == 0 && control->deadline_ns != INT64_MAX &&
      (now != 0 ? now : now_ns()) >= control->deadline_ns) {
    int none = 0;
    __atomic_compare_exchange_n(&control->stop, &none, MPI_ERR_DEADLINE_EXCEEDED, 0,
                                __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  }
  return stop_of(control);
}

static int check(mpi_call_control* control) { return check_at(control, 0); }

static PyObject* exception_for(int stop) {
  return stop == MPI_ERR_CANCELLED ? g_cancelled : g_deadline_exceeded;
}

static const char* what_for(int stop) {
  return stop == MPI_ERR_CANCELLED ? "cancelled" : "deadline exceeded";
}

/* Whether `frame` runs the model's code: anything but the interpreter's own
 * installation (its sys.path at start) and Python's frozen modules. */
static int runs_model_code(PyFrameObject* frame) {
  PyCodeObject* code = PyFrame_GetCode(frame);
  PyObject* file = code ? code->co_filename : NULL;
  int model = 1;
  if (file != NULL && PyUnicode_Check(file)) {
    for (Py_ssize_t k = 0; model && k < PyTuple_GET_SIZE(g_installation); k++) {
      PyObject* root = PyTuple_GET_ITEM(g_installation, k);
      if (PyUnicode_Tailmatch(file, root, 0, PY_SSIZE_T_MAX, -1) == 1) model = 0;
    }
    PyErr_Clear();
  }
  Py_XDECREF(code);
  return model;
}

/* Set while this thread describes the stop's own exception: its text is
 * ours, and describing its traceback runs only the standard library. */
static _Thread_local int t_holding_back;

void mpi_capture_call_error(mpi_error* error) {
  int ours = PyErr_ExceptionMatches(g_deadline_exceeded) || PyErr_ExceptionMatches(g_cancelled);
  t_holding_back = ours;
  mpi_error_capture(error);
  t_holding_back = 0;
}

/* The trace function of a stopped call; `capsule` holds its control. */
static int stop_trace(PyObject* capsule, PyFrameObject* frame, int what, PyObject* arg) {
  (void)arg;
  if ((what != PyTrace_LINE && what != PyTrace_CALL && what != PyTrace_OPCODE) || t_holding_back) {
    return 0;
  }
  mpi_call_control* control = PyCapsule_GetPointer(capsule, NULL);
  if (control == NULL) return -1;
  const int64_t now = now_ns();
  if (control->raised_ns == 0) {
    if (control->first_event_ns == 0) control->first_event_ns = now;
    if (!runs_model_code(frame) && now - control->first_event_ns < control->grace_ns) return 0;
    control->raised_ns = now;
  } else if (now - control->raised_ns >= control->grace_ns) {
    control->escalated = 1;
  } else {
    return 0; /* clean-up runs */
  }
  PyErr_SetNone(exception_for(stop_of(control)));
  return -1;
}

int mpi_call_begin(mpi_call_control* control, const mpi_sink* sink) {
  if (control == NULL) return MPI_OK;
  const int64_t now = now_ns();
  if (control->began_ns == 0) control->began_ns = now;
  int stop = check_at(control, now);
  if (stop != 0) {
    char message[128];
    snprintf(message, sizeof message, "%s before the call started running", what_for(stop));
    mpi_report(sink, stop, "", message, "");
    return stop;
  }
  control->running = PyThreadState_Get();
  control->thread_ident = PyThread_get_thread_ident();
  control->interrupted = 0;
  control->first_event_ns = control->raised_ns = 0;
  control->escalated = control->retire = 0;
  control->retire_reason[0] = '\0';
  return MPI_OK;
}

/* After a stop was raised: what the call left behind, checked and repaired
 * where possible, decides whether the interpreter may serve again. */
static void verify_after_stop(mpi_call_control* control) {
  PyObject* problems = PyObject_CallMethod(mpi_runtime, "after_stop", NULL);
  const char* text = problems && PyUnicode_Check(problems) ? PyUnicode_AsUTF8(problems) : NULL;
  if (text == NULL) {
    PyErr_Clear();
    text = "the check of its state after the stop failed";
  }
  if (control->escalated) {
    snprintf(control->retire_reason, sizeof control->retire_reason,
             "a stopped call did not return within its %lld ms grace period, so its clean-up "
             "was cut short%s%s",
             (long long)(control->grace_ns / 1000000), text[0] ? "; " : "", text);
    control->retire = 1;
  } else if (text[0] != '\0') {
    snprintf(control->retire_reason, sizeof control->retire_reason,
             "a stopped call left state behind: %s", text);
    control->retire = 1;
  }
  Py_XDECREF(problems);
}

int mpi_call_end(mpi_call_control* control) {
  if (control == NULL) return 0;
  control->running = NULL;
  if (control->interrupted) {
    /* The pending exception, if any, is kept for the caller. */
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyEval_SetTrace(NULL, NULL);
    if (control->raised_ns != 0) verify_after_stop(control);
    PyErr_Restore(type, value, tb);
  }
  /* A call that finished after its deadline is stopped too: its result is
   * not returned, even if the watchdog has not woken yet. */
  return check(control);
}

int mpi_report_stop(int stop, mpi_error* error, const mpi_sink* sink) {
  char message[512];
  if (error == NULL || !error->captured) {
    snprintf(message, sizeof message, "%s: the call finished after it and its result was dropped",
             what_for(stop));
    mpi_report(sink, stop, "", message, "");
    return stop;
  }
  const char* stop_type =
      stop == MPI_ERR_CANCELLED ? "manypy.Cancelled" : "manypy.DeadlineExceeded";
  if (error->type != NULL && strcmp(error->type, stop_type) == 0) {
    snprintf(message, sizeof message,
             "%s: the call's Python code was stopped (the traceback shows where)", what_for(stop));
  } else {
    snprintf(message, sizeof message, "%s: the call failed after it: %.400s", what_for(stop),
             error->message ? error->message : "");
  }
  return mpi_error_report(error, sink, stop, message);
}

#if PY_VERSION_HEX < 0x030C0000
/* Python 3.11 sends no line event for a jump to the same instruction, which
 * is all a one-line `while True: pass` does: such a loop would never see the
 * stop. Opcode events of the frames running now reach it. (3.12 reports
 * every backward jump as a line, and keeps opcode tracing per code object,
 * beyond this call: not there.) */
static void trace_opcodes_of(PyThreadState* ts) {
  PyFrameObject* frame = PyThreadState_GetFrame(ts);
  while (frame != NULL) {
    if (PyObject_SetAttrString((PyObject*)frame, "f_trace_opcodes", Py_True) != 0) PyErr_Clear();
    PyFrameObject* back = PyFrame_GetBack(frame);
    Py_DECREF(frame);
    frame = back;
  }
}
#endif

void mpi_interrupt(mpi_call_control* control) {
  mpi_enter();
  if (control->running != NULL && stop_of(control) != 0 && !control->interrupted) {
    control->interrupted = 1;
    PyObject* capsule = PyCapsule_New(control, NULL, NULL);
    /* CPython's own function for setting another thread's trace (3.12's
     * PyEval_SetTraceAllThreads is built on it); private API, so the one
     * Python-version-specific line of this file. It keeps its own
     * reference to the capsule until the trace is removed. */
    if (capsule == NULL ||
        _PyEval_SetTrace((PyThreadState*)control->running, stop_trace, capsule) != 0) {
      PyErr_Clear(); /* out of memory, or an audit hook refused: not stopped */
      control->interrupted = 0;
    }
#if PY_VERSION_HEX < 0x030C0000
    if (control->interrupted) trace_opcodes_of((PyThreadState*)control->running);
#endif
    Py_XDECREF(capsule);
  }
  mpi_leave();
}
