/* Packages and replicated objects inside one interpreter. The registry of
 * importers and objects is in runtime.py (_packages, _objects); the hot path,
 * a call on an object, is here in C. */
#include <string.h>

#include "hooks_api.h"
#include "interp_internal.h"

void mpi_capsule_destructor(PyObject* capsule); /* convert.c */

static PyObject* g_objects;           /* runtime._objects */
static PyObject* g_archive_error;     /* runtime.ArchiveError */
static PyObject* g_set_grad_enabled;  /* torch._C._set_grad_enabled */
static PyObject* g_is_grad_enabled;   /* torch.is_grad_enabled */

/* _manypy_host_record(package_id, name, nbytes) -> "dltensor" capsule over
 * the host's copy of a package record. */
static PyObject* host_record(PyObject* self, PyObject* args) {
  (void)self;
  unsigned long long package_id = 0, nbytes = 0;
  const char* name = NULL;
  if (!PyArg_ParseTuple(args, "KsK", &package_id, &name, &nbytes)) return NULL;
  if (mpi_in_forked_child()) {
    PyErr_SetString(PyExc_RuntimeError,
                    "a process forked by model code cannot read the host's archives");
    return NULL;
  }
  char error[512] = "";
  DLManagedTensor* tensor = NULL;
  int rc = mpi_host->package_record(package_id, name, nbytes, &tensor, error, sizeof error);
  if (rc != MPI_OK) {
    /* A storage the archive lacks, or gets wrong, is the archive's fault. */
    int archive_fault = rc == MPI_ERR_BAD_ARCHIVE || rc == MPI_ERR_NO_SUCH_NAME;
    PyErr_SetString(archive_fault && g_archive_error ? g_archive_error : PyExc_RuntimeError, error);
    return NULL;
  }
  return PyCapsule_New(tensor, "dltensor", mpi_capsule_destructor);
}

static PyMethodDef kHostRecord = {"_manypy_host_record", host_record, METH_VARARGS,
                                  "A package record from the host, as a DLPack capsule."};

static int lookups_ready(void) {
  if (g_objects != NULL) return 0;
  g_objects = PyObject_GetAttrString(mpi_runtime, "_objects");
  if (g_archive_error == NULL) g_archive_error = PyObject_GetAttrString(mpi_runtime, "ArchiveError");
  PyObject* torch = PyImport_ImportModule("torch");
  PyObject* c = torch ? PyObject_GetAttrString(torch, "_C") : NULL;
  g_set_grad_enabled = c ? PyObject_GetAttrString(c, "_set_grad_enabled") : NULL;
  g_is_grad_enabled = torch ? PyObject_GetAttrString(torch, "is_grad_enabled") : NULL;
  Py_XDECREF(c);
  Py_XDECREF(torch);
  if (g_objects && g_set_grad_enabled && g_is_grad_enabled && mpi_init_tensors() == 0) return 0;
  Py_CLEAR(g_objects);
  return -1;
}

/* Runs `method(args...)` of the runtime module with the GIL held. */
static int call_runtime(const mpi_sink* sink, const char* method, const char* format, ...) {
  va_list va;
  va_start(va, format);
  PyObject* fn = PyObject_GetAttrString(mpi_runtime, method);
  PyObject* args = fn ? Py_VaBuildValue(format, va) : NULL;
  va_end(va);
  PyObject* result = args ? PyObject_CallObject(fn, args) : NULL;
  int rc = result ? MPI_OK : mpi_report_python_error(sink);
  Py_XDECREF(result);
  Py_XDECREF(args);
  Py_XDECREF(fn);
  return rc;
}

int mpi_package_open(uint64_t package_id, const void* data, size_t size, const mpi_sink* sink) {
  mpi_enter();
  int rc = MPI_OK;
  if (lookups_ready() != 0) {
    rc = mpi_report_python_error(sink);
  } else {
    PyObject* view = PyMemoryView_FromMemory((char*)data, (Py_ssize_t)size, PyBUF_READ);
    PyObject* host_fn = PyCFunction_New(&kHostRecord, NULL);
    PyObject* functools = PyImport_ImportModule("functools");
    PyObject* fetch = view && host_fn && functools
        ? PyObject_CallMethod(functools, "partial", "OK", host_fn,
                              (unsigned long long)package_id)
        : NULL;
    rc = fetch ? call_runtime(sink, "package_open", "(KOO)", (unsigned long long)package_id,
                              view, fetch)
               : mpi_report_python_error(sink);
    Py_XDECREF(fetch);
    Py_XDECREF(functools);
    Py_XDECREF(host_fn);
    Py_XDECREF(view);
  }
  mpi_leave();
  return rc;
}

void mpi_package_close(uint64_t package_id) {
  mpi_enter();
  if (call_runtime(NULL, "package_close", "(K)", (unsigned long long)package_id) != MPI_OK) {
    PyErr_Clear();
  }
  mpi_leave();
}

int mpi_object_load(uint64_t object_id, uint64_t package_id, const char* module,
                    const char* name, const mpi_sink* sink) {
  mpi_enter();
  int rc = call_runtime(sink, "object_load", "(KKss)", (unsigned long long)object_id,
                        (unsigned long long)package_id, module, name);
  mpi_leave();
  return rc;
}

void mpi_object_drop(uint64_t object_id) {
  mpi_enter();
  if (call_runtime(NULL, "object_drop", "(K)", (unsigned long long)object_id) != MPI_OK) {
    PyErr_Clear();
  }
  mpi_leave();
}

/* A new reference to object `object_id`, or NULL with the sink told. */
static PyObject* find_object(uint64_t object_id, const mpi_sink* sink) {
  PyObject* key = PyLong_FromUnsignedLongLong(object_id);
  PyObject* obj = key && g_objects ? PyDict_GetItemWithError(g_objects, key) : NULL;
  Py_XDECREF(key);
  if (obj == NULL) {
    if (PyErr_Occurred()) {
      mpi_report_python_error(sink);
    } else {
      mpi_report(sink, MPI_ERR_INTERNAL, "", "object is not loaded in this interpreter", "");
    }
    return NULL;
  }
  Py_INCREF(obj);
  return obj;
}

/* Reports a failed getattr: a missing attribute is MPI_ERR_NO_SUCH_NAME. */
static int report_attribute_error(const mpi_sink* sink) {
  return mpi_report_python_error_as(
      sink, PyErr_ExceptionMatches(PyExc_AttributeError) ? MPI_ERR_NO_SUCH_NAME : -1);
}

/* getattr that reports its failure. */
static PyObject* get_attribute(PyObject* obj, const char* name, const mpi_sink* sink, int* rc) {
  PyObject* attr = PyObject_GetAttrString(obj, name);
  if (attr == NULL) *rc = report_attribute_error(sink);
  return attr;
}

int mpi_object_call(uint64_t object_id, const char* method, const mpi_value* args,
                    const mpi_value* kwargs, const char* model_id, const char* request_id,
                    mpi_call_control* control, const mpi_sink* sink) {
  mpi_enter();
  int rc = mpi_call_begin(control, sink);
  PyObject *obj = NULL, *target = NULL, *py_args = NULL, *py_kwargs = NULL, *result = NULL;
  obj = rc == MPI_OK ? find_object(object_id, sink) : NULL;
  if (rc != MPI_OK) {
    /* stopped before it started: nothing runs */
  } else if (obj == NULL) {
    rc = MPI_ERR_INTERNAL;
  } else if (method != NULL) {
    target = get_attribute(obj, method, sink, &rc);
  } else {
    target = obj;
    Py_INCREF(target);
  }
  if (target == NULL) {
    mpi_release_tensors(args);
    mpi_release_tensors(kwargs);
    (void)mpi_call_end(control);
    goto done;
  }
  if (args != NULL) {
    PyObject* converted = mpi_to_python(args);
    py_args = converted ? PySequence_Tuple(converted) : NULL;
    Py_XDECREF(converted);
  } else {
    py_args = PyTuple_New(0);
  }
  if (py_args == NULL) {
    mpi_release_tensors(kwargs);
    (void)mpi_call_end(control);
    rc = mpi_report_python_error(sink);
    goto done;
  }
  if (kwargs != NULL && (py_kwargs = mpi_to_python(kwargs)) == NULL) {
    (void)mpi_call_end(control);
    rc = mpi_report_python_error(sink);
    goto done;
  }
  /* Serving is inference: run without autograd, and put the caller's mode
   * back afterwards. */
  PyObject* was_enabled = PyObject_CallNoArgs(g_is_grad_enabled);
  PyObject* off = PyObject_CallOneArg(g_set_grad_enabled, Py_False);
  Py_XDECREF(off);
  /* The caller's model and request ids reach the operator callbacks of
   * everything this call runs. */
  int with_context = mpi_hooks != NULL && (model_id != NULL || request_id != NULL);
  if (with_context) mpi_hooks->push_context(model_id, request_id);
  result = PyObject_Call(target, py_args, py_kwargs);
  int stop = mpi_call_end(control);
  if (with_context) mpi_hooks->pop_context();
  if (was_enabled != NULL) {
    PyObject *exc_type, *exc_value, *exc_tb;
    PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
    PyObject* restored = PyObject_CallOneArg(g_set_grad_enabled, was_enabled);
    Py_XDECREF(restored);
    PyErr_Restore(exc_type, exc_value, exc_tb);
    Py_DECREF(was_enabled);
  }
  if (stop != 0) {
    Py_CLEAR(result);
    rc = mpi_report_stop(stop, sink);
  } else {
    rc = result ? mpi_deliver(result, sink) : mpi_report_python_error(sink);
  }
done:
  Py_XDECREF(result);
  Py_XDECREF(py_kwargs);
  Py_XDECREF(py_args);
  Py_XDECREF(target);
  Py_XDECREF(obj);
  mpi_leave();
  return rc;
}

int mpi_object_getattr(uint64_t object_id, const char* name, mpi_call_control* control,
                       const mpi_sink* sink) {
  mpi_enter();
  int rc = mpi_call_begin(control, sink);
  if (rc != MPI_OK) {
    mpi_leave();
    return rc;
  }
  PyObject* obj = find_object(object_id, sink);
  PyObject* attr = NULL;
  if (obj == NULL) {
    rc = MPI_ERR_INTERNAL;
    (void)mpi_call_end(control);
  } else {
    /* A property runs Python code, which a stop interrupts; a failure is
     * then reported as the stop, not as get_attribute's error. */
    attr = PyObject_GetAttrString(obj, name);
    int stop = mpi_call_end(control);
    if (stop != 0) {
      Py_CLEAR(attr);
      rc = mpi_report_stop(stop, sink);
    } else if (attr == NULL) {
      rc = report_attribute_error(sink);
    }
  }
  if (attr != NULL) rc = mpi_deliver(attr, sink);
  Py_XDECREF(attr);
  Py_XDECREF(obj);
  mpi_leave();
  return rc;
}

int mpi_object_hasattr(uint64_t object_id, const char* name, int* out_has,
                       const mpi_sink* sink) {
  mpi_enter();
  int rc = MPI_OK;
  PyObject* obj = find_object(object_id, sink);
  if (obj == NULL) {
    rc = MPI_ERR_INTERNAL;
  } else {
    *out_has = PyObject_HasAttrString(obj, name);
  }
  Py_XDECREF(obj);
  mpi_leave();
  return rc;
}
