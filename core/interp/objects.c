/* Packages and replicated objects inside one interpreter. The registry of
 * importers and objects is in runtime.py (_packages, _objects); the hot path,
 * a call on an object, is here in C. */
#include <string.h>

#include "calls.h"
#include "convert.h"

void mpi_capsule_destructor(PyObject* capsule); /* convert.c */

static PyObject* g_objects;          /* runtime._objects */
static PyObject* g_archive_error;    /* runtime.ArchiveError */
static PyObject* g_set_grad_enabled; /* torch._C._set_grad_enabled */
static PyObject* g_is_grad_enabled;  /* torch.is_grad_enabled */

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
  if (g_archive_error == NULL)
    g_archive_error = PyObject_GetAttrString(mpi_runtime, "ArchiveError");
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

/* Runs `method(args...)` of the runtime module, bounded by `control`, and
 * reports only its failure (or the stop). */
static int call_runtime(mpi_call_control* control, const mpi_sink* sink, const char* method,
                        const char* format, ...) {
  int rc = mpi_call_begin(control, sink);
  if (rc != MPI_OK) return rc;
  va_list va;
  va_start(va, format);
  PyObject* fn = PyObject_GetAttrString(mpi_runtime, method);
  PyObject* args = fn ? Py_VaBuildValue(format, va) : NULL;
  va_end(va);
  mpi_outcome o;
  mpi_outcome_take(&o, args ? PyObject_CallObject(fn, args) : NULL, 0);
  Py_XDECREF(args);
  Py_XDECREF(fn);
  return mpi_outcome_finish(&o, control, sink);
}

int mpi_package_open(uint64_t package_id, const void* data, size_t size, mpi_call_control* control,
                     const mpi_sink* sink) {
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
    rc = fetch ? call_runtime(control, sink, "package_open", "(KOO)",
                              (unsigned long long)package_id, view, fetch)
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
  (void)call_runtime(NULL, NULL, "package_close", "(K)", (unsigned long long)package_id);
  mpi_leave();
}

int mpi_object_load(uint64_t object_id, uint64_t package_id, const char* module, const char* name,
                    mpi_call_control* control, const mpi_sink* sink) {
  mpi_enter();
  int rc = call_runtime(control, sink, "object_load", "(KKss)", (unsigned long long)object_id,
                        (unsigned long long)package_id, module, name);
  mpi_leave();
  return rc;
}

void mpi_object_drop(uint64_t object_id) {
  mpi_enter();
  (void)call_runtime(NULL, NULL, "object_drop", "(K)", (unsigned long long)object_id);
  mpi_leave();
}

/* A new reference to object `object_id`; NULL with an exception pending,
 * or (a bug of the host's) without one when the object is not loaded here. */
static PyObject* find_object(uint64_t object_id) {
  PyObject* key = PyLong_FromUnsignedLongLong(object_id);
  PyObject* obj = key && g_objects ? PyDict_GetItemWithError(g_objects, key) : NULL;
  Py_XDECREF(key);
  return Py_XNewRef(obj);
}

static void report_not_loaded(const mpi_sink* sink) {
  PyErr_Clear();
  mpi_report(sink, MPI_ERR_INTERNAL, "", "object is not loaded in this interpreter", "");
}

/* A missing attribute is MPI_ERR_NO_SUCH_NAME. */
static void attribute_error_is_no_such_name(mpi_error* e) {
  if (e->captured && e->type != NULL && strcmp(e->type, "AttributeError") == 0) {
    e->code = MPI_ERR_NO_SUCH_NAME;
  }
}

/* The object to call: the replica itself, or its attribute `name`. NULL
 * with an exception pending. */
static PyObject* call_target(PyObject* obj, const char* name) {
  return name != NULL ? PyObject_GetAttrString(obj, name) : Py_NewRef(obj);
}

/* The Python arguments of a call: a tuple and a dict (or NULL). Every
 * tensor in `args` and `kwargs` is taken care of, whatever happens. */
static int convert_arguments(const mpi_value* args, const mpi_value* kwargs, PyObject** py_args,
                             PyObject** py_kwargs) {
  *py_args = *py_kwargs = NULL;
  if (args != NULL) {
    PyObject* converted = mpi_to_python(args);
    *py_args = converted ? PySequence_Tuple(converted) : NULL;
    Py_XDECREF(converted);
  } else {
    *py_args = PyTuple_New(0);
  }
  if (*py_args == NULL) {
    mpi_release_tensors(kwargs);
    return -1;
  }
  if (kwargs != NULL && (*py_kwargs = mpi_to_python(kwargs)) == NULL) return -1;
  return 0;
}

/* Runs target(*args, **kwargs) as serving does: without autograd (the
 * caller's grad mode put back afterwards), with the caller's model and
 * request ids seen by the operator callbacks of everything it runs. */
static PyObject* serve(PyObject* target, PyObject* args, PyObject* kwargs, const char* model_id,
                       const char* request_id) {
  PyObject* was_enabled = PyObject_CallNoArgs(g_is_grad_enabled);
  Py_XDECREF(PyObject_CallOneArg(g_set_grad_enabled, Py_False));
  int pushed = mpi_context_push(model_id, request_id);
  PyObject* result = PyObject_Call(target, args, kwargs);
  mpi_context_pop(pushed);
  if (was_enabled != NULL) {
    PyObject *exc_type, *exc_value, *exc_tb;
    PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
    Py_XDECREF(PyObject_CallOneArg(g_set_grad_enabled, was_enabled));
    PyErr_Restore(exc_type, exc_value, exc_tb);
    Py_DECREF(was_enabled);
  }
  return result;
}

int mpi_object_call(uint64_t object_id, const char* method, const mpi_value* args,
                    const mpi_value* kwargs, const char* model_id, const char* request_id,
                    mpi_call_control* control, const mpi_sink* sink) {
  mpi_enter();
  PyObject* obj = find_object(object_id);
  int rc = obj != NULL ? mpi_call_begin(control, sink) : MPI_ERR_INTERNAL;
  if (rc != MPI_OK) {
    /* stopped before it started, or nothing to call: nothing runs */
    if (obj == NULL) report_not_loaded(sink);
    mpi_release_tensors(args);
    mpi_release_tensors(kwargs);
    mpi_leave();
    return rc;
  }
  /* Everything from here to mpi_outcome_finish runs under the call's stop:
   * finding the method, converting the arguments, the call, preparing its
   * result or describing its error, and freeing what it left. */
  PyObject *py_args = NULL, *py_kwargs = NULL, *returned = NULL;
  PyObject* target = call_target(obj, method);
  Py_DECREF(obj);
  if (target == NULL) {
    mpi_release_tensors(args);
    mpi_release_tensors(kwargs);
  } else if (convert_arguments(args, kwargs, &py_args, &py_kwargs) == 0) {
    returned = serve(target, py_args, py_kwargs, model_id, request_id);
  }
  mpi_outcome o;
  mpi_outcome_take(&o, returned, 1);
  if (method != NULL && target == NULL) attribute_error_is_no_such_name(&o.error);
  Py_XDECREF(py_kwargs);
  Py_XDECREF(py_args);
  Py_XDECREF(target);
  rc = mpi_outcome_finish(&o, control, sink);
  mpi_leave();
  return rc;
}

int mpi_object_getattr(uint64_t object_id, const char* name, mpi_call_control* control,
                       const mpi_sink* sink) {
  mpi_enter();
  PyObject* obj = find_object(object_id);
  int rc = obj != NULL ? mpi_call_begin(control, sink) : MPI_ERR_INTERNAL;
  if (obj == NULL) {
    report_not_loaded(sink);
  } else if (rc == MPI_OK) {
    /* A property runs Python code: under the stop, as a call. */
    mpi_outcome o;
    mpi_outcome_take(&o, call_target(obj, name), 1);
    attribute_error_is_no_such_name(&o.error);
    rc = mpi_outcome_finish(&o, control, sink);
  }
  Py_XDECREF(obj);
  mpi_leave();
  return rc;
}

int mpi_object_hasattr(uint64_t object_id, const char* name, int* out_has, const mpi_sink* sink) {
  mpi_enter();
  int rc = MPI_OK;
  PyObject* obj = find_object(object_id);
  if (obj == NULL) {
    rc = MPI_ERR_INTERNAL;
    report_not_loaded(sink);
  } else {
    *out_has = PyObject_HasAttrString(obj, name);
  }
  Py_XDECREF(obj);
  mpi_leave();
  return rc;
}
