/* The host's export hook, as seen from Python: PackageExporter.close adds
 * the host's files to every torch.package written in this interpreter
 * (runtime.py: add_export_files_to_packages). torch.jit.save gets them from
 * libmanypy_hooks.so instead. */
#include "exports.h"

#include "errors.h"

static void add_to_list(void* ctx, const char* name, const void* data, size_t size) {
  PyObject* item = Py_BuildValue("(sy#)", name, (const char*)data, (Py_ssize_t)size);
  if (item == NULL || PyList_Append((PyObject*)ctx, item) != 0) PyErr_Clear();
  Py_XDECREF(item);
}

/* _manypy_export_files() -> [(name, bytes), ...] */
static PyObject* export_files(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  PyObject* list = PyList_New(0);
  /* In a forked child the host's hook (host code) does not run. */
  if (list != NULL && mpi_host != NULL && !mpi_in_forked_child()) {
    mpi_host->export_files(add_to_list, list);
  }
  return list;
}

static PyMethodDef kExportFiles = {"_manypy_export_files", export_files, METH_NOARGS,
                                   "The files the host adds to every archive written."};

int mpi_install_export_files(const mpi_sink* sink) {
  PyObject* fn = PyCFunction_New(&kExportFiles, NULL);
  PyObject* r =
      fn ? PyObject_CallMethod(mpi_runtime, "add_export_files_to_packages", "O", fn) : NULL;
  int rc = r ? MPI_OK : mpi_report_python_error(sink);
  Py_XDECREF(r);
  Py_XDECREF(fn);
  return rc;
}
