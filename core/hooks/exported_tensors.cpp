// Result tensors handed to the host (core/interp/results.c, step 2): each
// one becomes the host's alone before the call returns.
//
// A tensor exported with torch's to_dlpack keeps the exported at::Tensor
// alive, not its memory: the model may still hold that tensor, or another
// view of the same storage, and later resize it (resize_, an out= argument
// larger than it), point it elsewhere (set_), or free it, and the host's
// pointer would dangle. So once the call has dropped its own references,
// a tensor whose storage nothing else in the interpreter can reach crosses
// as it is (zero-copy), and any other is copied.
#include "exported_tensors.h"

#include <ATen/DLConvertor.h>
#include <ATen/core/Tensor.h>

namespace manypy::hooks {

namespace {

// The at::Tensor behind a DLManagedTensor from torch's exporter, or nullptr.
// torch (ATen/DLConvertor.cpp, 1.13 to 2.x) allocates
//   struct ATenDLMTensor { at::Tensor handle; DLManagedTensor tensor; };
// and points manager_ctx at it. That struct is not in torch's headers, so
// its shape is checked before it is trusted: the DLManagedTensor sits right
// after one at::Tensor, and that tensor addresses the same data.
const at::Tensor* exported_handle(const DLManagedTensor* managed) {
  const char* ctx = static_cast<const char*>(managed->manager_ctx);
  if (ctx == nullptr || reinterpret_cast<const char*>(managed) != ctx + sizeof(at::Tensor)) {
    return nullptr;
  }
  const auto* handle = reinterpret_cast<const at::Tensor*>(ctx);
  if (!handle->defined() || !handle->has_storage() ||
      static_cast<const char*>(handle->data_ptr()) !=
          static_cast<const char*>(managed->dl_tensor.data) + managed->dl_tensor.byte_offset) {
    return nullptr;
  }
  return handle;
}

// What a tensor's or storage's Python object has to do with it: how many of
// its C++ references that object holds (0 or 1), and whether anything in
// Python holds the object.
struct PythonHold {
  size_t references = 0;
  bool held_by_python = false;
};

template <typename Impl>
PythonHold python_hold(const Impl& impl) {
#if __cplusplus >= 202002L
  if constexpr (requires { impl.pyobj_slot()->has_unique_reference(); }) {
    // torch 2.x ("PyObject preservation" in c10/util/intrusive_ptr.h): a
    // Python object, while it exists, holds one reference, and is held once
    // by the C++ side while other C++ references exist. Held only that
    // once, nothing in Python can reach it.
    if (impl.pyobj_slot()->load_pyobj() == nullptr) return {};
    return {1, !impl.pyobj_slot()->has_unique_reference()};
  }
#endif
  // torch 1.13: a Python object that Python still holds holds a reference
  // of its own (counted in use_count); one that Python dropped while C++
  // held the tensor is kept by the tensor and holds none.
  (void)impl;
  return {};
}

// Whether nothing but `handle` can reach its storage: no other reference to
// the tensor itself (a live Python object, a module's attribute), none to
// the tensors it is a view of (each view holds its base; torch 1.13 chains
// views of views), and no other tensor over the same storage.
bool exclusive(const at::Tensor& handle) {
  size_t holders = 0;
  for (const at::TensorBase* t = &handle;; t = &t->_base()) {
    const PythonHold python = python_hold(*t->unsafeGetTensorImpl());
    if (python.held_by_python || t->use_count() != 1 + python.references) return false;
    ++holders;
    if (!t->is_view()) break;
  }
  const PythonHold python = python_hold(*handle.storage().unsafeGetStorageImpl());
  return !python.held_by_python && handle.storage().use_count() == holders + python.references;
}

}  // namespace

int own_exported_tensor(DLManagedTensor** managed) noexcept {
  try {
    DLManagedTensor* exported = *managed;
    const at::Tensor* handle = exported_handle(exported);
    // torch's to_dlpack exports a conjugated or negated view (x.conj(),
    // x.conj().imag) as its memory, which holds the values before the
    // conjugation: the host would read 1+2j for 1-2j. Such a tensor crosses
    // as a copy with the values it stands for.
    const bool lazy = handle != nullptr && (handle->is_conj() || handle->is_neg());
    if (handle != nullptr && !lazy && exclusive(*handle)) return 0;
    // A copy, through DLPack when the exporter's layout is unknown (the
    // imported tensor then owns `exported` and releases it with itself).
    at::Tensor source = handle != nullptr ? *handle : at::fromDLPack(exported);
    at::Tensor values = lazy ? source.resolve_conj().resolve_neg() : source;
    DLManagedTensor* copy =
        at::toDLPack(values.is_same(source) ? source.clone() : values.contiguous());
    source = at::Tensor();
    if (handle != nullptr) exported->deleter(exported);
    *managed = copy;
    return 0;
  } catch (...) {
    return -1;
  }
}

}  // namespace manypy::hooks
