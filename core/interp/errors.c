/* Python exceptions and other failures, as sink errors. */
#include "errors.h"

#include <string.h>

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

static char* copy_text(const char* text) {
  size_t n = strlen(text) + 1;
  char* copy = PyMem_Malloc(n);
  if (copy != NULL) memcpy(copy, text, n);
  return copy;
}

void mpi_error_capture(mpi_error* e) {
  memset(e, 0, sizeof *e);
  PyObject *type = NULL, *value = NULL, *tb = NULL;
  PyErr_Fetch(&type, &value, &tb);
  e->captured = 1;
  if (type == NULL) {
    e->code = MPI_ERR_INTERNAL;
    e->message = copy_text("Python reported failure without an exception");
    return;
  }
  PyErr_NormalizeException(&type, &value, &tb);
  if (tb != NULL) PyException_SetTraceback(value, tb);
  /* describe_exception runs str() of the exception: the model's code, for
   * its own exception types; callers capture while their stop applies. */
  PyObject* described =
      mpi_runtime ? PyObject_CallMethod(mpi_runtime, "describe_exception", "O", value) : NULL;
  const char *name = NULL, *message = NULL, *trace = NULL;
  if (described != NULL && PyArg_ParseTuple(described, "sss", &name, &message, &trace)) {
    e->code = code_for(type, message);
    e->type = copy_text(name);
    e->message = copy_text(message);
    e->traceback = copy_text(trace);
  } else {
    /* The describer itself failed (or the runtime is not loaded yet): the
     * type's name, which runs no code of the model's. */
    PyErr_Clear();
    e->code = code_for(type, NULL);
    e->type = copy_text(((PyTypeObject*)type)->tp_name);
    e->message = copy_text("(the exception could not be described)");
  }
  Py_XDECREF(described);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
}

int mpi_error_report(mpi_error* e, const mpi_sink* sink, int forced_code,
                     const char* forced_message) {
  int code = forced_code >= 0 ? forced_code : e->code;
  mpi_report(sink, code, e->type, forced_message ? forced_message : e->message, e->traceback);
  mpi_error_clear(e);
  return code;
}

void mpi_error_clear(mpi_error* e) {
  PyMem_Free(e->type);
  PyMem_Free(e->message);
  PyMem_Free(e->traceback);
  memset(e, 0, sizeof *e);
}

int mpi_report_python_error_with(const mpi_sink* sink, int forced_code,
                                 const char* forced_message) {
  mpi_error e;
  mpi_error_capture(&e);
  return mpi_error_report(&e, sink, forced_code, forced_message);
}

int mpi_report_python_error_as(const mpi_sink* sink, int code) {
  return mpi_report_python_error_with(sink, code, NULL);
}

int mpi_report_python_error(const mpi_sink* sink) { return mpi_report_python_error_as(sink, -1); }
