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
 * longer be trusted.
 *
 * Model code may not defeat this (issue 36):
 * - While a call of this interpreter is being stopped, an audit hook (which
 *   Python code cannot remove) refuses sys.settrace, and so everything
 *   built on it (threading.settrace_all_threads, a Python trace function's
 *   own removal as it raises): a model that removes the trace function in
 *   a loop gets RuntimeError each time, and the trace escalates as above.
 *   sys.setprofile is not refused: a profile function cannot remove the
 *   trace (and CPython removes one that raises, which must work).
 * - The trace cannot act where Python sends it no events: inside a trace,
 *   profile or sys.monitoring callback (CPython suppresses tracing there),
 *   or once the trace is gone (a model's audit hook, C code). For those the
 *   host calls mpi_escalate, from a grace period after the interrupt on,
 *   every few milliseconds until the call ends: it puts the trace and the
 *   frames' line events back (a frame whose f_trace_lines the model turned
 *   off), and injects the stop as an asynchronous exception
 *   (PyThreadState_SetAsyncExc), which the eval loop raises at its next
 *   check of the eval breaker (every backward jump and call), in any code,
 *   callbacks included. Each injection the model swallows is followed by
 *   another. */
#include "stop.h"

#include <string.h>
#include <time.h>

static PyObject* g_deadline_exceeded; /* runtime.DeadlineExceeded */
static PyObject* g_cancelled;         /* runtime.Cancelled */
static PyObject* g_installation;      /* runtime.installation_roots(): a tuple of str */

/* Calls of this interpreter being stopped now (interrupted, not ended);
 * under the GIL. While it is not 0, the audit hook refuses model code's
 * changes to trace functions. */
static int g_stopping;
/* Set while manypy itself changes a trace function, under the GIL. Not
 * thread-local: a namespace's thread-local storage comes out of the
 * process's static TLS, which bounds the interpreters a process can hold
 * (docs/isolation.md); the GIL, held from setting it to clearing it, keeps
 * other threads of this interpreter from seeing it. */
static int g_own_trace;

/* The audit hook: refuses sys.settrace (every way to set a thread's trace
 * function ends in this event) while a call is being stopped. Any other
 * event passes at the cost of a comparison or two. */
static int stop_audit(const char* event, PyObject* args, void* data) {
  (void)args;
  (void)data;
  if (g_stopping == 0 || g_own_trace || strcmp(event, "sys.settrace") != 0) return 0;
  PyErr_SetString(PyExc_RuntimeError,
                  "sys.settrace() refused: manypy is stopping a call in this interpreter, and its "
                  "trace function is what stops it (docs/threads.md, \"What model code cannot do "
                  "to a stop\")");
  return -1;
}

/* sys.unraisablehook while the interpreter lives. A stop is raised in
 * whatever code the call runs, and where Python cannot propagate an
 * exception (a __del__, a weakref callback such as importlib's module-lock
 * callbacks, a gc callback) it reports it through this hook, whose default
 * prints "Exception ignored in: ..." and a traceback to the host's stderr:
 * a dozen for a deadline that fired during `import torchvision` (issue 36).
 * The call's status already says it was stopped, and where, so the stop's
 * own exceptions are dropped; every other one goes to the hook found at
 * start (Python's default). In C, so that no stop, escalated or injected,
 * can be raised in the hook itself (Python would then print that). Model
 * code that sets its own hook gets them all. */
static PyObject* g_previous_unraisablehook;

static PyObject* quiet_unraisablehook(PyObject* self, PyObject* unraisable) {
  (void)self;
  PyObject* kind = PyObject_GetAttrString(unraisable, "exc_type");
  if (kind == NULL) return NULL;
  const int ours = PyType_Check(kind) &&
                   (PyType_IsSubtype((PyTypeObject*)kind, (PyTypeObject*)g_deadline_exceeded) ||
                    PyType_IsSubtype((PyTypeObject*)kind, (PyTypeObject*)g_cancelled));
  Py_DECREF(kind);
  if (ours) Py_RETURN_NONE;
  return PyObject_CallOneArg(g_previous_unraisablehook, unraisable);
}

static PyMethodDef kQuietUnraisableHook = {
    "unraisablehook", quiet_unraisablehook, METH_O,
    "manypy's: drops the exceptions of stops (manypy.DeadlineExceeded, manypy.Cancelled), and "
    "reports every other unraisable exception as sys.__unraisablehook__ does."};

static int quiet_stops(void) {
  g_previous_unraisablehook = PySys_GetObject("unraisablehook"); /* borrowed */
  if (g_previous_unraisablehook == NULL) return -1;
  Py_INCREF(g_previous_unraisablehook);
  PyObject* hook = PyCFunction_New(&kQuietUnraisableHook, NULL);
  const int rc = hook != NULL ? PySys_SetObject("unraisablehook", hook) : -1;
  Py_XDECREF(hook);
  return rc;
}

int mpi_init_stops(void) {
  g_deadline_exceeded = PyObject_GetAttrString(mpi_runtime, "DeadlineExceeded");
  g_cancelled = PyObject_GetAttrString(mpi_runtime, "Cancelled");
  g_installation = PyObject_CallMethod(mpi_runtime, "installation_roots", NULL);
  if (!(g_deadline_exceeded && g_cancelled && g_installation && PyTuple_Check(g_installation))) {
    return -1;
  }
  if (quiet_stops() != 0) return -1;
  /* Before any model code runs: no hook of a model's can refuse it. */
  return PySys_AddAuditHook(stop_audit, NULL) == 0 && !PyErr_Occurred() ? 0 : -1;
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
  } else if (control->escalated || now - control->raised_ns >= control->grace_ns) {
    control->escalated = 1; /* or mpi_escalate found the trace stuck: both now raise */
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
    g_own_trace = 1;
    PyEval_SetTrace(NULL, NULL);
    g_own_trace = 0;
    g_stopping--;
    /* An injection (mpi_escalate) the call ended before raising must not
     * hit the thread's next call. Dropped here rather than with
     * PyThreadState_SetAsyncExc(id, NULL), which signals the eval breaker
     * with nothing to clear it: a call that came later on this interpreter
     * then got no trace events at all. (An injection means the stop
     * escalated, so the interpreter is being retired anyway.) */
    PyThreadState* ts = PyThreadState_Get();
    if (ts->async_exc != NULL) Py_CLEAR(ts->async_exc);
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

/* Line events (and, on Python 3.11, opcode events) for every frame the
 * thread runs now, whatever the model set: a frame's f_trace_lines turned
 * off sends the trace nothing. Python 3.11 also sends no line event for a
 * jump to the same instruction, which is all a one-line `while True: pass`
 * does: opcode events reach it. (3.12 reports every backward jump as a
 * line, and keeps opcode tracing per code object, beyond this call: not
 * there.) */
static void trace_frames_of(PyThreadState* ts) {
  PyFrameObject* frame = PyThreadState_GetFrame(ts);
  while (frame != NULL) {
    if (PyObject_SetAttrString((PyObject*)frame, "f_trace_lines", Py_True) != 0) PyErr_Clear();
#if PY_VERSION_HEX < 0x030C0000
    if (PyObject_SetAttrString((PyObject*)frame, "f_trace_opcodes", Py_True) != 0) PyErr_Clear();
#endif
    PyFrameObject* back = PyFrame_GetBack(frame);
    Py_DECREF(frame);
    frame = back;
  }
}

/* Makes stop_trace the trace function of the call's thread; 0 if it could
 * not (out of memory, or an audit hook of the model's refused). */
static int set_stop_trace(mpi_call_control* control) {
  PyObject* capsule = PyCapsule_New(control, NULL, NULL);
  /* CPython's own function for setting another thread's trace (3.12's
   * PyEval_SetTraceAllThreads is built on it); private API, so the one
   * Python-version-specific line of this file. It keeps its own
   * reference to the capsule until the trace is removed. */
  g_own_trace = 1;
  int ok = capsule != NULL &&
           _PyEval_SetTrace((PyThreadState*)control->running, stop_trace, capsule) == 0;
  g_own_trace = 0;
  if (!ok) PyErr_Clear();
  Py_XDECREF(capsule);
  return ok;
}

void mpi_interrupt(mpi_call_control* control) {
  mpi_enter();
  if (control->running != NULL && stop_of(control) != 0 && !control->interrupted) {
    control->interrupted = 1;
    g_stopping++;
    set_stop_trace(control); /* if it cannot, mpi_escalate injects the stop */
    trace_frames_of((PyThreadState*)control->running);
  }
  mpi_leave();
}

int mpi_escalate(mpi_call_control* control) {
  mpi_enter();
  const int running = control->running != NULL && control->interrupted;
  if (running) {
    PyThreadState* ts = (PyThreadState*)control->running;
    const int64_t now = now_ns();
    /* The trace was taken away (only a model's audit hook or C code can):
     * put back. */
    const int removed = ts->c_tracefunc != stop_trace;
    if (removed) set_stop_trace(control);
    trace_frames_of(ts);
    /* Inside a trace, profile or monitoring callback: no events reach the
     * trace. Otherwise the trace is at work (and escalates by itself), or
     * the call runs C code (a torch operator) and the trace raises the
     * stop cleanly once it returns: an injection then would also land
     * where the trace holds back, such as while the call's error is
     * described. */
    const int in_callback = ts->tracing != 0;
    if (removed || in_callback) {
      control->escalated = 1;
      if (control->raised_ns == 0) control->raised_ns = now;
      PyThreadState_SetAsyncExc(control->thread_ident, exception_for(stop_of(control)));
    }
  }
  mpi_leave();
  return running;
}
