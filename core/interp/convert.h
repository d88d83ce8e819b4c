/* convert.c: arguments from the host, and the torch objects conversions use.
 * Nothing here is exported: the library's only exported symbol is
 * manypy_interp_get_api. */
#ifndef MANYPY_INTERP_CONVERT_H
#define MANYPY_INTERP_CONVERT_H

#include "state.h"

/* torch's objects that conversions use, looked up once torch is imported
 * (mpi_init_tensors), before any model code ran (convert.c). */
typedef struct mpi_torch_refs {
  PyTypeObject* tensor_type;         /* torch.Tensor */
  PyTypeObject* parameter_type;      /* torch.nn.Parameter */
  PyObject *to_dlpack, *from_dlpack; /* torch._C._to_dlpack, _from_dlpack */
  PyObject *view, *detach;           /* torch's C methods TensorBase.view, .detach */
  PyObject* dtype_of;                /* TensorBase.dtype, a descriptor */
  PyObject *bool_dtype, *uint8_dtype;
  /* Whether this torch's DLPack speaks bool; torch 1.13's does not, and
   * bool tensors cross it as uint8 views instead. */
  int bool_native;
} mpi_torch_refs;
extern mpi_torch_refs mpi_torch;

/* Builds a Python object from an argument tree; NULL with a Python exception
 * set on failure. Either way every tensor in `value` has been taken care of
 * (consumed, or its deleter run). */
PyObject* mpi_to_python(const mpi_value* value);
/* Runs the deleters of every tensor in `value` (an argument that will not be
 * converted). */
void mpi_release_tensors(const mpi_value* value);
/* Looks up torch's DLPack functions once torch is imported. */
int mpi_init_tensors(void);

#endif
