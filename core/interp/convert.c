/* Arguments, from the host's mpi_value trees to Python objects (results go
 * the other way in results.c), and the torch objects both use. Tensors
 * cross as DLPack, never copied. */
#include "convert.h"

#include <string.h>

mpi_torch_refs mpi_torch;

/* Whether this torch's DLPack speaks bool (kDLBool). torch 1.13's does not:
 * bool tensors then cross as uint8 and are viewed as bool on the other side,
 * zero-copy both ways. */
static int probe_bool_dlpack(PyObject* torch) {
  PyObject* zeros = PyObject_GetAttrString(torch, "zeros");
  PyObject* t = zeros ? PyObject_CallFunction(zeros, "(i)", 1) : NULL;
  PyObject* b = t ? PyObject_CallMethod(t, "to", "O", mpi_torch.bool_dtype) : NULL;
  PyObject* capsule = b ? PyObject_CallOneArg(mpi_torch.to_dlpack, b) : NULL;
  if (capsule != NULL) {
    DLManagedTensor* m = (DLManagedTensor*)PyCapsule_GetPointer(capsule, "dltensor");
    mpi_torch.bool_native = m != NULL && m->dl_tensor.dtype.code == MPI_DL_BOOL;
  }
  int ok = b != NULL; /* a refusal by _to_dlpack is an answer, not a failure */
  PyErr_Clear();
  Py_XDECREF(capsule); /* its destructor runs the deleter */
  Py_XDECREF(b);
  Py_XDECREF(t);
  Py_XDECREF(zeros);
  return ok ? 0 : -1;
}

/* An attribute of torch's C tensor type (TensorBase; _TensorBase in torch
 * 1.13) from its own dict: torch's C function, whatever a model later does
 * to torch.Tensor. */
static PyObject* tensor_base_attr(PyObject* c, const char* name) {
  PyObject* base = PyObject_GetAttrString(c, "TensorBase");
  if (base == NULL) {
    PyErr_Clear();
    base = PyObject_GetAttrString(c, "_TensorBase");
  }
  PyObject* dict = base ? PyObject_GetAttrString(base, "__dict__") : NULL;
  PyObject* attr = dict ? PyMapping_GetItemString(dict, name) : NULL;
  Py_XDECREF(dict);
  Py_XDECREF(base);
  return attr;
}

int mpi_init_tensors(void) {
  if (mpi_torch.tensor_type != NULL) return 0;
  PyObject* torch = PyImport_ImportModule("torch");
  if (torch == NULL) return -1;
  PyObject* c = PyObject_GetAttrString(torch, "_C");
  PyObject* nn = PyObject_GetAttrString(torch, "nn");
  PyObject* tensor_type = PyObject_GetAttrString(torch, "Tensor");
  PyObject* parameter_type = nn ? PyObject_GetAttrString(nn, "Parameter") : NULL;
  PyObject* dtype = c ? tensor_base_attr(c, "dtype") : NULL;
  mpi_torch.to_dlpack = c ? PyObject_GetAttrString(c, "_to_dlpack") : NULL;
  mpi_torch.from_dlpack = c ? PyObject_GetAttrString(c, "_from_dlpack") : NULL;
  mpi_torch.view = c ? tensor_base_attr(c, "view") : NULL;
  mpi_torch.detach = c ? tensor_base_attr(c, "detach") : NULL;
  /* Called through its type's tp_descr_get, as attribute lookup would. */
  mpi_torch.dtype_of = dtype && Py_TYPE(dtype)->tp_descr_get ? Py_NewRef(dtype) : NULL;
  mpi_torch.bool_dtype = PyObject_GetAttrString(torch, "bool");
  mpi_torch.uint8_dtype = PyObject_GetAttrString(torch, "uint8");
  int rc = tensor_type && PyType_Check(tensor_type) && parameter_type &&
                   PyType_Check(parameter_type) && mpi_torch.to_dlpack && mpi_torch.from_dlpack &&
                   mpi_torch.view && mpi_torch.detach && mpi_torch.dtype_of &&
                   mpi_torch.bool_dtype && mpi_torch.uint8_dtype
               ? 0
               : -1;
  if (rc == 0) {
    mpi_torch.parameter_type = (PyTypeObject*)parameter_type;
    rc = probe_bool_dlpack(torch);
    mpi_torch.tensor_type = (PyTypeObject*)tensor_type; /* last: marks it done */
  } else {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "torch lacks what manypy needs");
    Py_XDECREF(tensor_type);
    Py_XDECREF(parameter_type);
  }
  Py_XDECREF(dtype);
  Py_XDECREF(nn);
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
  int bool_as_uint8 = !mpi_torch.bool_native && tensor->dl_tensor.dtype.code == MPI_DL_BOOL;
  if (bool_as_uint8) tensor->dl_tensor.dtype.code = kDLUInt;
  PyObject* capsule = PyCapsule_New(tensor, "dltensor", mpi_capsule_destructor);
  if (capsule == NULL) {
    tensor->deleter(tensor);
    return NULL;
  }
  PyObject* result =
      mpi_torch.from_dlpack
          ? PyObject_CallOneArg(mpi_torch.from_dlpack, capsule)
          : (PyErr_SetString(PyExc_RuntimeError, "tensors need torch, which is not imported"),
             NULL);
  Py_DECREF(capsule); /* runs the deleter if torch did not take the tensor */
  if (bool_as_uint8 && result != NULL) {
    Py_SETREF(result,
              PyObject_CallFunctionObjArgs(mpi_torch.view, result, mpi_torch.bool_dtype, NULL));
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
    case MPI_VALUE_NONE:
      Py_RETURN_NONE;
    case MPI_VALUE_BOOL:
      return PyBool_FromLong(value->i != 0);
    case MPI_VALUE_INT64:
      return PyLong_FromLongLong(value->i);
    case MPI_VALUE_DOUBLE:
      return PyFloat_FromDouble(value->d);
    case MPI_VALUE_STRING:
      return PyUnicode_DecodeUTF8(value->s, (Py_ssize_t)value->len, "strict");
    case MPI_VALUE_BYTES:
      return PyBytes_FromStringAndSize(value->s, (Py_ssize_t)value->len);
    case MPI_VALUE_TENSOR:
      return tensor_to_python(value->tensor);
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
