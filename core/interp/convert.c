/* Values between the host's mpi_value trees and Python objects. Tensors
 * cross as DLPack, never copied. */
#include <string.h>

#include "interp_internal.h"

static PyObject* g_tensor_type; /* torch.Tensor */
static PyObject* g_to_dlpack;   /* torch._C._to_dlpack */
static PyObject* g_from_dlpack; /* torch._C._from_dlpack */
static PyObject* g_bool;        /* torch.bool */
static PyObject* g_uint8;       /* torch.uint8 */
/* Whether this torch's DLPack speaks bool (kDLBool). torch 1.13's does not:
 * bool tensors then cross as uint8 and are viewed as bool on the other side,
 * zero-copy both ways. The only place that knows the difference. */
static int g_bool_native;

static int probe_bool_dlpack(PyObject* torch) {
  PyObject* zeros = PyObject_GetAttrString(torch, "zeros");
  PyObject* t = zeros ? PyObject_CallFunction(zeros, "(i)", 1) : NULL;
  PyObject* b = t ? PyObject_CallMethod(t, "to", "O", g_bool) : NULL;
  PyObject* capsule = b ? PyObject_CallOneArg(g_to_dlpack, b) : NULL;
  if (capsule != NULL) {
    DLManagedTensor* m = (DLManagedTensor*)PyCapsule_GetPointer(capsule, "dltensor");
    g_bool_native = m != NULL && m->dl_tensor.dtype.code == MPI_DL_BOOL;
  }
  int ok = b != NULL; /* a refusal by _to_dlpack is an answer, not a failure */
  PyErr_Clear();
  Py_XDECREF(capsule); /* its destructor runs the deleter */
  Py_XDECREF(b);
  Py_XDECREF(t);
  Py_XDECREF(zeros);
  return ok ? 0 : -1;
}

int mpi_init_tensors(void) {
  PyObject* torch = PyImport_ImportModule("torch");
  if (torch == NULL) return -1;
  PyObject* c = PyObject_GetAttrString(torch, "_C");
  g_tensor_type = PyObject_GetAttrString(torch, "Tensor");
  g_to_dlpack = c ? PyObject_GetAttrString(c, "_to_dlpack") : NULL;
  g_from_dlpack = c ? PyObject_GetAttrString(c, "_from_dlpack") : NULL;
  g_bool = PyObject_GetAttrString(torch, "bool");
  g_uint8 = PyObject_GetAttrString(torch, "uint8");
  int rc = g_tensor_type && g_to_dlpack && g_from_dlpack && g_bool && g_uint8 ? 0 : -1;
  if (rc == 0) rc = probe_bool_dlpack(torch);
  Py_XDECREF(c);
  Py_DECREF(torch);
  return rc;
}

/* The destructor of a "dltensor" capsule: runs the tensor's deleter unless
 * torch consumed the capsule (and renamed it "used_dltensor"). */
void mpi_capsule_destructor(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    DLManagedTensor* t = (DLManagedTensor*)PyCapsule_GetPointer(capsule, "dltensor");
    if (t != NULL && t->deleter != NULL) t->deleter(t);
  }
}

void mpi_release_tensors(const mpi_value* value) {
  if (value == NULL) return;
  if (value->kind == MPI_VALUE_TENSOR) {
    if (value->tensor != NULL && value->tensor->deleter != NULL) {
      value->tensor->deleter(value->tensor);
    }
  } else if (value->kind == MPI_VALUE_LIST || value->kind == MPI_VALUE_TUPLE ||
             value->kind == MPI_VALUE_DICT) {
    for (size_t k = 0; k < value->count; k++) mpi_release_tensors(&value->items[k]);
  }
}

static PyObject* tensor_to_python(DLManagedTensor* tensor) {
  /* The DLManagedTensor is ours (a fresh one per call): its dtype may be
   * rewritten. */
  int bool_as_uint8 = !g_bool_native && tensor->dl_tensor.dtype.code == MPI_DL_BOOL;
  if (bool_as_uint8) tensor->dl_tensor.dtype.code = kDLUInt;
  PyObject* capsule = PyCapsule_New(tensor, "dltensor", mpi_capsule_destructor);
  if (capsule == NULL) {
    tensor->deleter(tensor);
    return NULL;
  }
  PyObject* result = g_from_dlpack
      ? PyObject_CallOneArg(g_from_dlpack, capsule)
      : (PyErr_SetString(PyExc_RuntimeError, "tensors need torch, which is not imported"), NULL);
  Py_DECREF(capsule); /* runs the deleter if torch did not take the tensor */
  if (bool_as_uint8 && result != NULL) {
    Py_SETREF(result, PyObject_CallMethod(result, "view", "O", g_bool));
  }
  return result;
}

/* Converts items[first..count) into `container` (a list or dict); on failure
 * releases what was not converted. */
static int fill(PyObject* container, const mpi_value* value) {
  for (size_t k = 0; k < value->count; k++) {
    PyObject* item = mpi_to_python(&value->items[k]);
    int rc = -1;
    if (item != NULL) {
      if (value->kind == MPI_VALUE_DICT) {
        PyObject* key = PyUnicode_DecodeUTF8(
            value->keys[k],
            (Py_ssize_t)(value->key_lengths ? value->key_lengths[k] : strlen(value->keys[k])),
            "strict");
        rc = key ? PyDict_SetItem(container, key, item) : -1;
        Py_XDECREF(key);
      } else {
        PyList_SET_ITEM(container, (Py_ssize_t)k, item);
        item = NULL; /* stolen */
        rc = 0;
      }
      Py_XDECREF(item);
    }
    if (rc != 0) {
      for (size_t rest = k + 1; rest < value->count; rest++) {
        mpi_release_tensors(&value->items[rest]);
      }
      return -1;
    }
  }
  return 0;
}

PyObject* mpi_to_python(const mpi_value* value) {
  switch (value->kind) {
    case MPI_VALUE_NONE: Py_RETURN_NONE;
    case MPI_VALUE_BOOL: return PyBool_FromLong(value->i != 0);
    case MPI_VALUE_INT64: return PyLong_FromLongLong(value->i);
    case MPI_VALUE_DOUBLE: return PyFloat_FromDouble(value->d);
    case MPI_VALUE_STRING: return PyUnicode_DecodeUTF8(value->s, (Py_ssize_t)value->len, "strict");
    case MPI_VALUE_BYTES: return PyBytes_FromStringAndSize(value->s, (Py_ssize_t)value->len);
    case MPI_VALUE_TENSOR: return tensor_to_python(value->tensor);
    case MPI_VALUE_LIST:
    case MPI_VALUE_TUPLE: {
      PyObject* list = PyList_New((Py_ssize_t)value->count);
      if (list == NULL) {
        mpi_release_tensors(value);
        return NULL;
      }
      if (fill(list, value) != 0) {
        Py_DECREF(list);
        return NULL;
      }
      if (value->kind == MPI_VALUE_LIST) return list;
      PyObject* tuple = PyList_AsTuple(list);
      Py_DECREF(list);
      return tuple;
    }
    case MPI_VALUE_DICT: {
      PyObject* dict = PyDict_New();
      if (dict == NULL) {
        mpi_release_tensors(value);
        return NULL;
      }
      if (fill(dict, value) != 0) {
        Py_DECREF(dict);
        return NULL;
      }
      return dict;
    }
    default:
      PyErr_Format(PyExc_ValueError, "unknown value kind %d", value->kind);
      return NULL;
  }
}

/* ---- results ------------------------------------------------------------ */

static int unsupported(const mpi_sink* sink, const char* what, PyObject* obj) {
  char message[256];
  snprintf(message, sizeof message,
           "%s of type '%.100s' is not supported (expected None, bool, int, float, str, "
           "bytes, torch.Tensor, or a list, tuple or str-keyed dict of these)",
           what, Py_TYPE(obj)->tp_name);
  mpi_report(sink, MPI_ERR_UNSUPPORTED_TYPE, "", message, "");
  return MPI_ERR_UNSUPPORTED_TYPE;
}

/* 1 if `tensor` is bool and this torch's DLPack cannot say so (see
 * g_bool_native): it then crosses as a uint8 view. 0 if not, -1 with an
 * exception set. */
static int crosses_as_uint8(PyObject* tensor) {
  if (g_bool_native) return 0;
  PyObject* dtype = PyObject_GetAttrString(tensor, "dtype");
  if (dtype == NULL) return -1;
  int is_bool = dtype == g_bool;
  Py_DECREF(dtype);
  return is_bool;
}

static int deliver_tensor(PyObject* tensor, const mpi_sink* sink) {
  /* Most results export as they are. Only on a refusal does it pay to ask
   * why: a bool tensor (torch 1.13's DLPack has no bool) crosses as a uint8
   * view; a tensor that requires grad (a parameter, say; calls run under
   * no_grad, so results rarely do) as a detached view. */
  int as_uint8 = 0;
  PyObject* capsule = PyObject_CallOneArg(g_to_dlpack, tensor);
  if (capsule == NULL) {
    PyErr_Clear();
    as_uint8 = crosses_as_uint8(tensor);
    PyObject* view = as_uint8 == 1   ? PyObject_CallMethod(tensor, "view", "O", g_uint8)
                     : as_uint8 == 0 ? PyObject_CallMethod(tensor, "detach", NULL)
                                     : NULL;
    capsule = view ? PyObject_CallOneArg(g_to_dlpack, view) : NULL;
    Py_XDECREF(view);
  }
  if (capsule == NULL) return mpi_report_python_error_as(sink, MPI_ERR_BAD_TENSOR);
  DLManagedTensor* managed = (DLManagedTensor*)PyCapsule_GetPointer(capsule, "dltensor");
  PyCapsule_SetName(capsule, "used_dltensor"); /* the host owns it now */
  Py_DECREF(capsule);
  if (as_uint8) managed->dl_tensor.dtype.code = MPI_DL_BOOL;
  mpi_value v;
  memset(&v, 0, sizeof v);
  v.kind = MPI_VALUE_TENSOR;
  v.tensor = managed;
  sink->value(sink->ctx, &v);
  return MPI_OK;
}

/* `depth`: the containers around `obj`. */
static int too_deep(int depth, const mpi_sink* sink) {
  if (depth < MPI_MAX_DEPTH) return 0;
  char message[96];
  snprintf(message, sizeof message, "result is nested more than %d deep", MPI_MAX_DEPTH);
  mpi_report(sink, MPI_ERR_UNSUPPORTED_TYPE, "", message, "");
  return 1;
}

static int deliver(PyObject* obj, const mpi_sink* sink, int depth) {
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
      mpi_report(sink, MPI_ERR_OUT_OF_RANGE, "", "integer result does not fit in int64", "");
      return MPI_ERR_OUT_OF_RANGE;
    }
    if (x == -1 && PyErr_Occurred()) return mpi_report_python_error(sink);
    v.kind = MPI_VALUE_INT64;
    v.i = x;
  } else if (PyFloat_Check(obj)) {
    v.kind = MPI_VALUE_DOUBLE;
    v.d = PyFloat_AsDouble(obj);
  } else if (PyUnicode_Check(obj)) {
    Py_ssize_t len = 0;
    v.s = PyUnicode_AsUTF8AndSize(obj, &len);
    if (v.s == NULL) return mpi_report_python_error(sink);
    v.kind = MPI_VALUE_STRING;
    v.len = (size_t)len;
  } else if (PyBytes_Check(obj)) {
    v.kind = MPI_VALUE_BYTES;
    v.s = PyBytes_AS_STRING(obj);
    v.len = (size_t)PyBytes_GET_SIZE(obj);
  } else if (PyByteArray_Check(obj)) {
    v.kind = MPI_VALUE_BYTES;
    v.s = PyByteArray_AS_STRING(obj);
    v.len = (size_t)PyByteArray_GET_SIZE(obj);
  } else if (g_tensor_type != NULL && PyObject_IsInstance(obj, g_tensor_type) == 1) {
    return deliver_tensor(obj, sink);
  } else if (PyTuple_Check(obj) || PyList_Check(obj)) {
    if (too_deep(depth, sink)) return MPI_ERR_UNSUPPORTED_TYPE;
    int is_tuple = PyTuple_Check(obj);
    Py_ssize_t n = is_tuple ? PyTuple_GET_SIZE(obj) : PyList_GET_SIZE(obj);
    sink->begin(sink->ctx, is_tuple ? MPI_VALUE_TUPLE : MPI_VALUE_LIST, (size_t)n);
    for (Py_ssize_t k = 0; k < n; k++) {
      /* A list may change under us only if Python code runs here; it cannot. */
      PyObject* item = is_tuple ? PyTuple_GET_ITEM(obj, k) : PyList_GET_ITEM(obj, k);
      int rc = deliver(item, sink, depth + 1);
      if (rc != MPI_OK) return rc;
    }
    sink->end(sink->ctx);
    return MPI_OK;
  } else if (PyDict_Check(obj)) {
    if (too_deep(depth, sink)) return MPI_ERR_UNSUPPORTED_TYPE;
    sink->begin(sink->ctx, MPI_VALUE_DICT, (size_t)PyDict_GET_SIZE(obj));
    Py_ssize_t pos = 0;
    PyObject *key, *item;
    while (PyDict_Next(obj, &pos, &key, &item)) {
      if (!PyUnicode_Check(key)) return unsupported(sink, "a dict key", key);
      Py_ssize_t len = 0;
      const char* k = PyUnicode_AsUTF8AndSize(key, &len);
      if (k == NULL) return mpi_report_python_error(sink);
      sink->key(sink->ctx, k, (size_t)len);
      int rc = deliver(item, sink, depth + 1);
      if (rc != MPI_OK) return rc;
    }
    sink->end(sink->ctx);
    return MPI_OK;
  } else {
    return unsupported(sink, depth == 0 ? "result" : "an item", obj);
  }
  sink->value(sink->ctx, &v);
  return MPI_OK;
}

int mpi_deliver(PyObject* result, const mpi_sink* sink) {
  if (mpi_in_forked_child()) mpi_exit_forked_child(0); /* the sink is the host's code */
  return deliver(result, sink, 0);
}
