/*
 * libmanypy_interp.so: the library manypy loads first into each interpreter's
 * link-map namespace. It links only libpython and libc, so that nothing that
 * creates pthread keys in a constructor is loaded before the host has fenced
 * the namespace's keys into their band (docs/isolation.md).
 *
 * Every entry here runs on a host thread that the host side has prepared for
 * this namespace (ctype tables, key blocks). Each entry takes this
 * interpreter's GIL for itself and releases it before returning.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <limits.h>
#include <signal.h>
#include <string.h>

#include "interp_api.h"

#define EXPORT __attribute__((visibility("default")))

extern const char manypy_runtime_py[]; /* runtime.py, generated at build */

static PyObject* g_runtime;          /* module _manypy_runtime */
/* Bumped by every lease_begin. torch keeps its intra-op thread count per
 * thread (OpenMP's nthreads ICV, applied once per thread), so each thread
 * re-applies the lease's count when it sees a new generation. */
static int g_threads_generation;
static _Thread_local int t_threads_generation = -1;
static PyObject* g_globals;          /* the current lease's globals dict */
static PyThreadState* g_main_thread; /* the thread that ran start() */

/* ---- GIL entry ---------------------------------------------------------- */

/* Acquire this interpreter's GIL on the calling thread. The first entry of a
 * thread creates its thread state through PyGILState_Ensure, so that
 * PyGILState_GetThisThreadState (which pybind11 and torch rely on) knows it;
 * the state is kept, with its gilstate counter at 1, until thread_exit. */
static void enter(void) {
  PyThreadState* ts = PyGILState_GetThisThreadState();
  if (ts != NULL) {
    PyEval_RestoreThread(ts);
  } else {
    (void)PyGILState_Ensure();
  }
  if (t_threads_generation != g_threads_generation && g_runtime != NULL) {
    PyObject* r = PyObject_CallMethod(g_runtime, "apply_intra_op_threads", NULL);
    if (r == NULL) PyErr_Clear(); /* torch not imported: nothing to apply */
    Py_XDECREF(r);
    t_threads_generation = g_threads_generation;
  }
}

static void leave(void) { (void)PyEval_SaveThread(); }


/* ---- errors ------------------------------------------------------------- */

static void report(const mpi_sink* sink, int code, const char* type, const char* message,
                   const char* tb) {
  if (sink != NULL && sink->error != NULL) sink->error(sink->ctx, code, type, message, tb);
}

static int contains(const char* haystack, const char* needle) {
  return haystack != NULL && strstr(haystack, needle) != NULL;
}

/* Turns the pending Python exception into a sink error and returns its code.
 * SyntaxError becomes MPI_ERR_SYNTAX; a loader failure for want of static TLS
 * becomes MPI_ERR_STATIC_TLS so the host can name the fix. */
static int report_python_error(const mpi_sink* sink) {
  PyObject *type = NULL, *value = NULL, *tb = NULL;
  PyErr_Fetch(&type, &value, &tb);
  if (type == NULL) {
    report(sink, MPI_ERR_INTERNAL, "", "Python reported failure without an exception", "");
    return MPI_ERR_INTERNAL;
  }
  PyErr_NormalizeException(&type, &value, &tb);
  if (tb != NULL) PyException_SetTraceback(value, tb);
  int code = PyErr_GivenExceptionMatches(type, PyExc_SyntaxError) ? MPI_ERR_SYNTAX
                                                                  : MPI_ERR_PYTHON;
  PyObject* described =
      g_runtime ? PyObject_CallMethod(g_runtime, "describe_exception", "O", value) : NULL;
  const char *name = NULL, *message = NULL, *trace = NULL;
  if (described != NULL && PyArg_ParseTuple(described, "sss", &name, &message, &trace)) {
    if (contains(message, "static TLS")) code = MPI_ERR_STATIC_TLS;
    report(sink, code, name, message, trace);
  } else {
    /* The describer itself failed (or the runtime is not loaded yet): fall
     * back to str() of the exception, which cannot fail in practice. */
    PyErr_Clear();
    PyObject* text = PyObject_Str(value);
    const char* utf8 = text ? PyUnicode_AsUTF8(text) : NULL;
    if (contains(utf8, "static TLS")) code = MPI_ERR_STATIC_TLS;
    report(sink, code, ((PyTypeObject*)type)->tp_name, utf8 ? utf8 : "(unprintable exception)",
           "");
    Py_XDECREF(text);
    PyErr_Clear();
  }
  Py_XDECREF(described);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  return code;
}

/* ---- start -------------------------------------------------------------- */

static int load_runtime(const mpi_sink* sink) {
  PyObject* code = Py_CompileString(manypy_runtime_py, "<manypy runtime>", Py_file_input);
  if (code == NULL) return report_python_error(sink);
  PyObject* module = PyImport_ExecCodeModule("_manypy_runtime", code);
  Py_DECREF(code);
  if (module == NULL) return report_python_error(sink);
  g_runtime = module;
  return MPI_OK;
}

/* Importing Python's signal module installs a C handler for SIGINT when the
 * process has the default one, even with install_signal_handlers = 0. Import
 * it now, under the host's process-wide lock (interpreters start in parallel
 * and would otherwise see each other's handler), and put back exactly what
 * the host had. */
static int leave_signals_to_host(const mpi_start_options* options, const mpi_sink* sink) {
  options->process_lock(1);
  struct sigaction host_sigint;
  sigaction(SIGINT, NULL, &host_sigint);
  PyObject* r = PyObject_CallMethod(g_runtime, "leave_signals_to_host", "i",
                                    host_sigint.sa_handler == SIG_DFL);
  int rc = r != NULL ? MPI_OK : report_python_error(sink);
  Py_XDECREF(r);
  sigaction(SIGINT, &host_sigint, NULL);
  options->process_lock(0);
  return rc;
}

static int start(const mpi_start_options* options, const mpi_sink* sink) {
  if (Py_IsInitialized()) {
    report(sink, MPI_ERR_INTERNAL, "", "interpreter already started", "");
    return MPI_ERR_INTERNAL;
  }
  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  /* The host (a JVM, the Go runtime) owns the process's signals. */
  config.install_signal_handlers = 0;
  config.parse_argv = 0;
  /* Unbuffered stdio, so model output is never lost in a buffer that no
   * interpreter shutdown will flush. */
  config.buffered_stdio = 0;
  PyStatus status = PyStatus_Ok();
  if (options->python_home != NULL && options->python_home[0] != '\0') {
    status = PyConfig_SetBytesString(&config, &config.home, options->python_home);
  }
  if (!PyStatus_Exception(status)) status = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(status)) {
    char message[512];
    snprintf(message, sizeof message, "Python failed to start: %s%s%s",
             status.func ? status.func : "", status.func ? ": " : "",
             status.err_msg ? status.err_msg : "unknown error");
    report(sink, MPI_ERR_LOADER, "", message, "");
    return MPI_ERR_LOADER;
  }
  g_main_thread = PyThreadState_Get();

  int rc = load_runtime(sink);
  if (rc == MPI_OK) {
    PyObject* r = PyObject_CallMethod(g_runtime, "forbid_global_dlopen", NULL);
    if (r == NULL) rc = report_python_error(sink);
    Py_XDECREF(r);
  }
  if (rc == MPI_OK) rc = leave_signals_to_host(options, sink);
  if (rc == MPI_OK && options->import_torch) {
    PyObject* torch = PyImport_ImportModule("torch");
    if (torch == NULL) rc = report_python_error(sink);
    Py_XDECREF(torch);
  }

  leave();
  return rc;
}

/* ---- leases ------------------------------------------------------------- */

static int lease_begin(const mpi_lease_options* options, const mpi_sink* sink) {
  enter();
  int rc = MPI_OK;
  PyObject* paths = PyList_New(0);
  for (size_t i = 0; paths != NULL && i < options->extra_sys_path_count; i++) {
    PyObject* p = PyUnicode_DecodeFSDefault(options->extra_sys_path[i]);
    if (p == NULL || PyList_Append(paths, p) != 0) Py_CLEAR(paths);
    Py_XDECREF(p);
  }
  PyObject* globals = paths ? PyObject_CallMethod(g_runtime, "lease_begin", "Oi", paths,
                                                  options->intra_op_threads)
                            : NULL;
  Py_XDECREF(paths);
  if (globals == NULL) {
    rc = report_python_error(sink);
  } else {
    Py_XSETREF(g_globals, globals);
    g_threads_generation++;
    t_threads_generation = g_threads_generation; /* lease_begin applied it here */
  }
  leave();
  return rc;
}

static int lease_end(const mpi_sink* sink) {
  enter();
  int rc = MPI_OK;
  PyObject* r = PyObject_CallMethod(g_runtime, "lease_end", "O",
                                    g_globals ? g_globals : Py_None);
  if (r == NULL) rc = report_python_error(sink);
  Py_XDECREF(r);
  Py_CLEAR(g_globals);
  leave();
  return rc;
}

/* ---- code --------------------------------------------------------------- */

/* Code runs only inside a lease, whose globals lease_begin made. */
static int require_lease(const mpi_sink* sink) {
  if (g_globals != NULL) return MPI_OK;
  report(sink, MPI_ERR_INTERNAL, "", "no lease: the interpreter is not in a pool", "");
  return MPI_ERR_INTERNAL;
}

static int exec_source(const char* source, const mpi_sink* sink) {
  enter();
  int rc = require_lease(sink);
  if (rc != MPI_OK) {
    leave();
    return rc;
  }
  PyObject* code = Py_CompileString(source, "<manypy>", Py_file_input);
  PyObject* result = code ? PyEval_EvalCode(code, g_globals, g_globals) : NULL;
  if (result == NULL) rc = report_python_error(sink);
  Py_XDECREF(result);
  Py_XDECREF(code);
  leave();
  return rc;
}

/* Converts a Python result to an mpi_value for the sink. */
static int deliver_value(PyObject* obj, const mpi_sink* sink) {
  mpi_value v;
  memset(&v, 0, sizeof v);
  if (obj == Py_None) {
    v.kind = MPI_VALUE_NONE;
  } else if (PyBool_Check(obj)) {
    v.kind = MPI_VALUE_BOOL;
    v.i = obj == Py_True;
  } else if (PyLong_Check(obj)) {
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (overflow != 0) {
      report(sink, MPI_ERR_OUT_OF_RANGE, "", "integer result does not fit in int64", "");
      return MPI_ERR_OUT_OF_RANGE;
    }
    if (x == -1 && PyErr_Occurred()) return report_python_error(sink);
    v.kind = MPI_VALUE_INT64;
    v.i = x;
  } else if (PyFloat_Check(obj)) {
    v.kind = MPI_VALUE_DOUBLE;
    v.d = PyFloat_AsDouble(obj);
  } else if (PyUnicode_Check(obj)) {
    Py_ssize_t len = 0;
    const char* s = PyUnicode_AsUTF8AndSize(obj, &len);
    if (s == NULL) return report_python_error(sink);
    v.kind = MPI_VALUE_STRING;
    v.s = s;
    v.len = (size_t)len;
  } else {
    char message[256];
    snprintf(message, sizeof message,
             "result of type '%.100s' is not supported (expected None, bool, int, float "
             "or str)",
             Py_TYPE(obj)->tp_name);
    report(sink, MPI_ERR_UNSUPPORTED_TYPE, "", message, "");
    return MPI_ERR_UNSUPPORTED_TYPE;
  }
  if (sink != NULL && sink->value != NULL) sink->value(sink->ctx, &v);
  return MPI_OK;
}

static int eval_expression(const char* expression, const mpi_sink* sink) {
  enter();
  int rc = require_lease(sink);
  if (rc != MPI_OK) {
    leave();
    return rc;
  }
  PyObject* code = Py_CompileString(expression, "<manypy>", Py_eval_input);
  PyObject* result = code ? PyEval_EvalCode(code, g_globals, g_globals) : NULL;
  rc = result ? deliver_value(result, sink) : report_python_error(sink);
  Py_XDECREF(result);
  Py_XDECREF(code);
  leave();
  return rc;
}

/* ---- threads ------------------------------------------------------------ */

static void thread_exit(void) {
  PyThreadState* ts = PyGILState_GetThisThreadState();
  if (ts == NULL || ts == g_main_thread) return;
  PyEval_RestoreThread(ts);
  /* The counter is 1 (set by the first PyGILState_Ensure): this clears and
   * deletes the thread state and releases the GIL. */
  PyGILState_Release(PyGILState_UNLOCKED);
}

/* ---- the table ---------------------------------------------------------- */

static const manypy_interp_api kApi = {
    MANYPY_INTERP_API_VERSION,
    sizeof(manypy_interp_api),
    start,
    lease_begin,
    lease_end,
    exec_source,
    eval_expression,
    thread_exit,
};

EXPORT const manypy_interp_api* manypy_interp_get_api(uint32_t version) {
  return version == MANYPY_INTERP_API_VERSION ? &kApi : NULL;
}
