/* Python exceptions and other failures, as sink errors. */
#include <string.h>

#include "interp_internal.h"

void mpi_report(const mpi_sink* sink, int code, const char* type, const char* message,
                const char* traceback) {
  /* The sink is the host's code: a forked child ends instead (interp.c). */
  if (mpi_in_forked_child()) mpi_exit_forked_child(1);
  if (sink != NULL && sink->error != NULL) {
    sink->error(sink->ctx, code, type ? type : "", message ? message : "",
                traceback ? traceback : "");
  }
}

static int contains(const char* haystack, const char* needle) {
  return haystack != NULL && strstr(haystack, needle) != NULL;
}

/* The code for an exception: SyntaxError and ModuleNotFoundError have their
 * own; a loader failure for want of static TLS becomes MPI_ERR_STATIC_TLS so
 * the host can name the fix. */
static int code_for(PyObject* type, const char* message) {
  if (contains(message, "static TLS")) return MPI_ERR_STATIC_TLS;
  if (PyErr_GivenExceptionMatches(type, PyExc_SyntaxError)) return MPI_ERR_SYNTAX;
  if (PyErr_GivenExceptionMatches(type, PyExc_ModuleNotFoundError)) {
    return MPI_ERR_MODULE_NOT_FOUND;
  }
  const char* name = ((PyTypeObject*)type)->tp_name;
  if (strcmp(name, "BadZipFile") == 0 || strcmp(name, "ArchiveError") == 0) {
    return MPI_ERR_BAD_ARCHIVE;
  }
  return MPI_ERR_PYTHON;
}

int mpi_report_python_error_with(const mpi_sink* sink, int forced_code,
                                 const char* forced_message) {
  PyObject *type = NULL, *value = NULL, *tb = NULL;
  PyErr_Fetch(&type, &value, &tb);
  if (type == NULL) {
    mpi_report(sink, MPI_ERR_INTERNAL, "", "Python reported failure without an exception", "");
    return MPI_ERR_INTERNAL;
  }
  PyErr_NormalizeException(&type, &value, &tb);
  if (tb != NULL) PyException_SetTraceback(value, tb);
  int code;
  PyObject* described = mpi_runtime
      ? PyObject_CallMethod(mpi_runtime, "describe_exception", "O", value)
      : NULL;
  const char *name = NULL, *message = NULL, *trace = NULL;
  if (described != NULL && PyArg_ParseTuple(described, "sss", &name, &message, &trace)) {
    code = forced_code >= 0 ? forced_code : code_for(type, message);
    mpi_report(sink, code, name, forced_message ? forced_message : message, trace);
  } else {
    /* The describer itself failed (or the runtime is not loaded yet): fall
     * back to str() of the exception. */
    PyErr_Clear();
    PyObject* text = PyObject_Str(value);
    const char* utf8 = text ? PyUnicode_AsUTF8(text) : NULL;
    code = forced_code >= 0 ? forced_code : code_for(type, utf8);
    mpi_report(sink, code, ((PyTypeObject*)type)->tp_name,
               forced_message ? forced_message : utf8 ? utf8 : "(unprintable exception)", "");
    Py_XDECREF(text);
    PyErr_Clear();
  }
  Py_XDECREF(described);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  return code;
}

int mpi_report_python_error_as(const mpi_sink* sink, int code) {
  return mpi_report_python_error_with(sink, code, NULL);
}

int mpi_report_python_error(const mpi_sink* sink) { return mpi_report_python_error_as(sink, -1); }
