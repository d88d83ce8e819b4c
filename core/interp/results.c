/* Results on their way to the host, prepared so that the model cannot touch
 * them any more (docs/security.md, "Results").
 *
 * A result is Python objects that the model made and may still hold. The
 * host reads it as a value tree, with its tensors' memory lent zero-copy,
 * for as long as it likes. Three things could go wrong, and each did:
 *  - Python code running while the result is converted (a tensor
 *    subclass's methods, a property named __class__) could change the
 *    containers being walked, or pass a non-tensor off as one.
 *  - Python code running after the call (the model's own, on a later call,
 *    or a __del__ when the result is freed) could reallocate the storage of
 *    a tensor the host was lent (resize_, set_, an out= argument).
 *  - Converting could take as long as that code liked, outside any deadline.
 * So a result is prepared in three steps, all under the call's stop:
 *  1. mpi_result_prepare walks it once, with exact type checks and on
 *     snapshots of its containers, running no Python code of the model's,
 *     and records the value tree as a list of events (begin, key, value,
 *     end), each tensor exported through DLPack;
 *  2. the caller drops the result, the call's arguments and whatever else it
 *     held, then mpi_result_own_tensors makes every tensor the host's alone:
 *     zero-copy when nothing in the interpreter can reach its storage any
 *     more, a copy otherwise (hooks: own_exported_tensor);
 *  3. once the call is over, mpi_result_send replays the events to the host,
 *     or mpi_result_discard drops them. */
#include "results.h"

#include <stddef.h>
#include <string.h>

#include "convert.h"
#include "errors.h"
#include "hooks_api.h"

enum { EVENT_VALUE, EVENT_BEGIN, EVENT_KEY, EVENT_END };

typedef struct event {
  int op;
  int bool_as_uint8; /* a tensor exported as a uint8 view of a bool tensor */
  mpi_value value;   /* VALUE: the value; BEGIN: kind and count; KEY: s, len */
} event;

/* Most results are a tensor or a few values: their events fit here, and a
 * result costs one allocation. */
#define INLINE_EVENTS 4

struct mpi_result {
  event* events; /* inline_events, or PyMem when more were needed */
  size_t count, capacity;
  /* Python objects whose memory events point into (str, bytes): immutable,
   * and kept alive until the result is sent or discarded. NULL until one is
   * kept. */
  PyObject* keep;
  /* The first failure: a code and message of ours (PyMem), or a Python
   * exception. */
  int error_code;
  char* error_message;
  PyObject *error_type, *error_value, *error_traceback;
  event inline_events[INLINE_EVENTS]; /* last: not zeroed */
};

static event* add_event(mpi_result* r, int op) {
  if (r->count == r->capacity) {
    size_t capacity = 2 * r->capacity;
    event* grown = r->events == r->inline_events
                       ? PyMem_Malloc(capacity * sizeof(event))
                       : PyMem_Realloc(r->events, capacity * sizeof(event));
    if (grown == NULL) return NULL;
    if (r->events == r->inline_events) memcpy(grown, r->inline_events, sizeof r->inline_events);
    r->events = grown;
    r->capacity = capacity;
  }
  event* e = &r->events[r->count++];
  memset(e, 0, sizeof *e);
  e->op = op;
  return e;
}

static int fail(mpi_result* r, int code, const char* message) {
  if (r->error_code == MPI_OK) {
    r->error_code = code;
    size_t n = strlen(message) + 1;
    if ((r->error_message = PyMem_Malloc(n)) != NULL) memcpy(r->error_message, message, n);
  }
  return -1;
}

/* Fails with the pending Python exception (reported with `code`, or the
 * exception's own code for -1). */
static int fail_with_exception(mpi_result* r, int code) {
  if (r->error_code == MPI_OK) {
    r->error_code = code;
    PyErr_Fetch(&r->error_type, &r->error_value, &r->error_traceback);
  } else {
    PyErr_Clear();
  }
  return -1;
}

static int fail_out_of_memory(mpi_result* r) {
  PyErr_NoMemory();
  return fail_with_exception(r, MPI_ERR_RESOURCE_EXHAUSTED);
}

static int unsupported(mpi_result* r, const char* what, PyObject* obj, const char* why) {
  char message[512];
  snprintf(message, sizeof message,
           "%s of type '%.100s' is not supported%s (expected None, bool, int, float, str, "
           "bytes, torch.Tensor, or a list, tuple or str-keyed dict of these)",
           what, Py_TYPE(obj)->tp_name, why);
  return fail(r, MPI_ERR_UNSUPPORTED_TYPE, message);
}

static int keep(mpi_result* r, PyObject* obj) {
  if (r->keep == NULL && (r->keep = PyList_New(0)) == NULL) return -1;
  return PyList_Append(r->keep, obj);
}

/* ---- tensors ------------------------------------------------------------- */

/* 1 if `tensor` (an exact torch.Tensor or Parameter) is bool and this
 * torch's DLPack cannot say so: it then crosses as a uint8 view. 0 if not,
 * -1 with an exception set. */
static int crosses_as_uint8(PyObject* tensor) {
  if (mpi_torch.bool_native) return 0;
  PyObject* dtype = Py_TYPE(mpi_torch.dtype_of)
                        ->tp_descr_get(mpi_torch.dtype_of, tensor, (PyObject*)Py_TYPE(tensor));
  if (dtype == NULL) return -1;
  int is_bool = dtype == mpi_torch.bool_dtype;
  Py_DECREF(dtype);
  return is_bool;
}

static int prepare_tensor(mpi_result* r, PyObject* tensor, const char* what) {
  /* Exact types only: a subclass's methods (its __torch_function__ runs for
   * nearly anything torch does to it) are the model's code. Parameters
   * disable __torch_function__ and are common results (a weight). */
  if (Py_TYPE(tensor) != mpi_torch.tensor_type && Py_TYPE(tensor) != mpi_torch.parameter_type) {
    return unsupported(r, what, tensor,
                       ": it is a subclass of torch.Tensor, whose methods would run while it "
                       "is converted; return a plain tensor (t.as_subclass(torch.Tensor))");
  }
  /* A bool tensor crosses torch 1.13's DLPack, which has no bool, as a
   * uint8 view. It is asked first: torch 1.13's to_dlpack allocates its
   * record of the export, holding the tensor, before it refuses bool, and
   * never frees it, so each refused bool result leaked its memory. Anything
   * else to_dlpack refuses (a tensor that requires grad, on some versions)
   * crosses as a detached view. torch's own C methods are called, looked up
   * before any model ran, so a patched torch.Tensor.view does not run. */
  int as_uint8 = crosses_as_uint8(tensor);
  if (as_uint8 < 0) return fail_with_exception(r, MPI_ERR_BAD_TENSOR);
  PyObject* exported =
      as_uint8 ? PyObject_CallFunctionObjArgs(mpi_torch.view, tensor, mpi_torch.uint8_dtype, NULL)
               : Py_NewRef(tensor);
  PyObject* capsule = exported ? PyObject_CallOneArg(mpi_torch.to_dlpack, exported) : NULL;
  if (capsule == NULL && exported != NULL && !as_uint8) {
    PyErr_Clear();
    Py_SETREF(exported, PyObject_CallOneArg(mpi_torch.detach, tensor));
    capsule = exported ? PyObject_CallOneArg(mpi_torch.to_dlpack, exported) : NULL;
  }
  Py_XDECREF(exported);
  if (capsule == NULL) return fail_with_exception(r, MPI_ERR_BAD_TENSOR);
  DLManagedTensor* managed = (DLManagedTensor*)PyCapsule_GetPointer(capsule, "dltensor");
  PyCapsule_SetName(capsule, "used_dltensor"); /* the result owns it now */
  Py_DECREF(capsule);
  event* e = add_event(r, EVENT_VALUE);
  if (e == NULL) {
    managed->deleter(managed);
    return fail_out_of_memory(r);
  }
  e->value.kind = MPI_VALUE_TENSOR;
  e->value.tensor = managed;
  e->bool_as_uint8 = as_uint8;
  return 0;
}

/* ---- the walk -------------------------------------------------------------- */

static int prepare(mpi_result* r, PyObject* obj, int depth);

static int too_deep(mpi_result* r, int depth) {
  if (depth < MPI_MAX_DEPTH) return 0;
  char message[96];
  snprintf(message, sizeof message, "result is nested more than %d deep", MPI_MAX_DEPTH);
  return fail(r, MPI_ERR_UNSUPPORTED_TYPE, message);
}

/* A list or tuple, from a snapshot of its items: PyList_AsTuple copies a
 * list's item pointers (and references) at once, so nothing that happens to
 * the list later can reach the walk. */
static int prepare_sequence(mpi_result* r, PyObject* obj, int depth) {
  if (too_deep(r, depth)) return -1;
  const int is_tuple = PyTuple_Check(obj);
  PyObject* items = is_tuple ? Py_NewRef(obj) : PyList_AsTuple(obj);
  if (items == NULL) return fail_with_exception(r, MPI_ERR_RESOURCE_EXHAUSTED);
  const Py_ssize_t n = PyTuple_GET_SIZE(items);
  event* e = add_event(r, EVENT_BEGIN);
  int rc = e ? 0 : fail_out_of_memory(r);
  if (e != NULL) {
    e->value.kind = is_tuple ? MPI_VALUE_TUPLE : MPI_VALUE_LIST;
    e->value.count = (size_t)n;
  }
  for (Py_ssize_t k = 0; rc == 0 && k < n; k++) {
    rc = prepare(r, PyTuple_GET_ITEM(items, k), depth + 1);
  }
  if (rc == 0 && add_event(r, EVENT_END) == NULL) rc = fail_out_of_memory(r);
  Py_DECREF(items); /* the items' own references go: the caller may now free them */
  return rc;
}

/* A dict, from a snapshot of its (key, value) pairs, taken with
 * PyDict_Next, which runs no Python code (a subclass's methods are not
 * called). Keys must be str. */
static int prepare_dict(mpi_result* r, PyObject* obj, int depth) {
  if (too_deep(r, depth)) return -1;
  PyObject* pairs = PyList_New(0);
  if (pairs == NULL) return fail_with_exception(r, MPI_ERR_RESOURCE_EXHAUSTED);
  Py_ssize_t pos = 0;
  PyObject *key, *item;
  int rc = 0;
  while (rc == 0 && PyDict_Next(obj, &pos, &key, &item)) {
    PyObject* pair = PyTuple_Pack(2, key, item);
    if (pair == NULL || PyList_Append(pairs, pair) != 0) {
      rc = fail_with_exception(r, MPI_ERR_RESOURCE_EXHAUSTED);
    }
    Py_XDECREF(pair);
  }
  const Py_ssize_t n = PyList_GET_SIZE(pairs);
  event* e = rc == 0 ? add_event(r, EVENT_BEGIN) : NULL;
  if (rc == 0 && e == NULL) rc = fail_out_of_memory(r);
  if (e != NULL) {
    e->value.kind = MPI_VALUE_DICT;
    e->value.count = (size_t)n;
  }
  for (Py_ssize_t k = 0; rc == 0 && k < n; k++) {
    PyObject* pair = PyList_GET_ITEM(pairs, k);
    key = PyTuple_GET_ITEM(pair, 0);
    if (!PyUnicode_Check(key)) {
      rc = unsupported(r, "a dict key", key, "");
      break;
    }
    Py_ssize_t len = 0;
    const char* utf8 = PyUnicode_AsUTF8AndSize(key, &len);
    e = utf8 ? add_event(r, EVENT_KEY) : NULL;
    if (utf8 == NULL) {
      rc = fail_with_exception(r, -1);
    } else if (e == NULL || keep(r, key) != 0) {
      rc = fail_out_of_memory(r);
    } else {
      e->value.s = utf8;
      e->value.len = (size_t)len;
      rc = prepare(r, PyTuple_GET_ITEM(pair, 1), depth + 1);
    }
  }
  if (rc == 0 && add_event(r, EVENT_END) == NULL) rc = fail_out_of_memory(r);
  Py_DECREF(pairs);
  return rc;
}

/* A scalar, a string or bytes: the checks read type flags (subclasses of
 * int, float, str and bytes keep their value in the base object, read
 * without calling any of their methods). */
static int prepare_leaf(mpi_result* r, PyObject* obj, mpi_value* v) {
  if (obj == Py_None) {
    v->kind = MPI_VALUE_NONE;
  } else if (PyBool_Check(obj)) {
    v->kind = MPI_VALUE_BOOL;
    v->i = obj == Py_True;
  } else if (PyLong_Check(obj)) {
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (overflow != 0) return fail(r, MPI_ERR_OUT_OF_RANGE, "integer result does not fit in int64");
    if (x == -1 && PyErr_Occurred()) return fail_with_exception(r, -1);
    v->kind = MPI_VALUE_INT64;
    v->i = x;
  } else if (PyFloat_Check(obj)) {
    v->kind = MPI_VALUE_DOUBLE;
    v->d = PyFloat_AS_DOUBLE(obj);
  } else if (PyUnicode_Check(obj)) {
    Py_ssize_t len = 0;
    v->s = PyUnicode_AsUTF8AndSize(obj, &len);
    if (v->s == NULL) return fail_with_exception(r, -1);
    if (keep(r, obj) != 0) return fail_out_of_memory(r);
    v->kind = MPI_VALUE_STRING;
    v->len = (size_t)len;
  } else if (PyBytes_Check(obj) || PyByteArray_Check(obj)) {
    /* A bytearray can change size later: copied into bytes now. */
    PyObject* bytes = PyBytes_Check(obj) ? Py_NewRef(obj)
                                         : PyBytes_FromStringAndSize(PyByteArray_AS_STRING(obj),
                                                                     PyByteArray_GET_SIZE(obj));
    if (bytes == NULL || keep(r, bytes) != 0) {
      Py_XDECREF(bytes);
      return fail_out_of_memory(r);
    }
    v->kind = MPI_VALUE_BYTES;
    v->s = PyBytes_AS_STRING(bytes);
    v->len = (size_t)PyBytes_GET_SIZE(bytes);
    Py_DECREF(bytes); /* kept */
  } else {
    return 1; /* not a leaf */
  }
  return 0;
}

static int prepare(mpi_result* r, PyObject* obj, int depth) {
  const char* what = depth == 0 ? "result" : "an item";
  mpi_value v;
  memset(&v, 0, sizeof v);
  int leaf = prepare_leaf(r, obj, &v);
  if (leaf < 0) return -1;
  if (leaf == 0) {
    event* e = add_event(r, EVENT_VALUE);
    if (e == NULL) return fail_out_of_memory(r);
    e->value = v;
    return 0;
  }
  /* PyObject_TypeCheck reads the type's real bases: a __class__ that claims
   * torch.Tensor fools isinstance, and then libtorch, but not this. */
  if (PyObject_TypeCheck(obj, mpi_torch.tensor_type)) return prepare_tensor(r, obj, what);
  if (PyTuple_Check(obj) || PyList_Check(obj)) return prepare_sequence(r, obj, depth);
  if (PyDict_Check(obj)) return prepare_dict(r, obj, depth);
  return unsupported(r, what, obj, "");
}

/* ---- the result's life ------------------------------------------------------ */

mpi_result* mpi_result_prepare(PyObject* obj) {
  /* Small enough for Python's own allocator; the inline events need no
   * zeroes. */
  mpi_result* r = PyMem_Malloc(sizeof *r);
  if (r == NULL) return NULL;
  memset(r, 0, offsetof(mpi_result, inline_events));
  r->events = r->inline_events;
  r->capacity = INLINE_EVENTS;
  if (prepare(r, obj, 0) != 0) {
    /* Only the error is sent: drop the tensors exported before it. */
    for (size_t k = 0; k < r->count; k++) {
      if (r->events[k].op == EVENT_VALUE && r->events[k].value.kind == MPI_VALUE_TENSOR) {
        r->events[k].value.tensor->deleter(r->events[k].value.tensor);
      }
    }
    r->count = 0;
  }
  return r;
}

int mpi_result_own_tensors(mpi_result* r) {
  if (mpi_hooks == NULL) return 0; /* no libtorch of ours here: lent as exported */
  for (size_t k = 0; k < r->count; k++) {
    event* e = &r->events[k];
    if (e->op != EVENT_VALUE || e->value.kind != MPI_VALUE_TENSOR) continue;
    if (mpi_hooks->own_exported_tensor(&e->value.tensor) != 0) {
      /* The tensor stays the interpreter's: drop everything. */
      return fail(r, MPI_ERR_RESOURCE_EXHAUSTED, "cannot copy a result tensor");
    }
  }
  return 0;
}

static void release_result(mpi_result* r) {
  for (size_t k = 0; k < r->count; k++) {
    event* e = &r->events[k];
    if (e->op == EVENT_VALUE && e->value.kind == MPI_VALUE_TENSOR && e->value.tensor != NULL) {
      e->value.tensor->deleter(e->value.tensor);
    }
  }
  Py_XDECREF(r->keep);
  Py_XDECREF(r->error_type);
  Py_XDECREF(r->error_value);
  Py_XDECREF(r->error_traceback);
  PyMem_Free(r->error_message);
  if (r->events != r->inline_events) PyMem_Free(r->events);
  PyMem_Free(r);
}

void mpi_result_discard(mpi_result* r) {
  if (r != NULL) release_result(r);
}

int mpi_result_send(mpi_result* r, const mpi_sink* sink) {
  if (mpi_in_forked_child()) mpi_exit_forked_child(0); /* the sink is the host's code */
  int rc = r->error_code;
  if (rc != MPI_OK) {
    if (r->error_type != NULL) {
      PyErr_Restore(r->error_type, r->error_value, r->error_traceback);
      r->error_type = r->error_value = r->error_traceback = NULL;
      rc = mpi_report_python_error_as(sink, rc);
    } else {
      mpi_report(sink, rc, "", r->error_message ? r->error_message : "out of memory", "");
    }
  } else {
    for (size_t k = 0; k < r->count; k++) {
      event* e = &r->events[k];
      switch (e->op) {
        case EVENT_VALUE:
          if (e->bool_as_uint8) e->value.tensor->dl_tensor.dtype.code = MPI_DL_BOOL;
          sink->value(sink->ctx, &e->value);
          e->value.tensor = NULL; /* the host's now */
          break;
        case EVENT_BEGIN:
          sink->begin(sink->ctx, e->value.kind, e->value.count);
          break;
        case EVENT_KEY:
          sink->key(sink->ctx, e->value.s, e->value.len);
          break;
        case EVENT_END:
          sink->end(sink->ctx);
          break;
      }
    }
  }
  release_result(r);
  return rc;
}
