// Result tensors made the host's alone before they cross (exported_tensors.cpp).
#pragma once

#include <dlpack/dlpack.h>

namespace manypy::hooks {

// `*managed` came from torch's to_dlpack in this namespace, and the call
// that made it has dropped its own references. Leaves it as it is when
// nothing else in the interpreter can reach its storage; otherwise replaces
// it with a copy (and releases it). 0, or -1 when the copy failed (then
// `*managed` is unchanged).
int own_exported_tensor(DLManagedTensor** managed) noexcept;

}  // namespace manypy::hooks
