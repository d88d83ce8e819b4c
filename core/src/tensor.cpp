#include "tensor.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "error.h"

namespace manypy {

namespace {

constexpr int32_t kMaxDims = 64;

// The DLManagedTensor manypy makes for a buffer: owns copies of shape and
// strides, and either the data (copied) or the caller's release callback.
struct BufferContext {
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  void* owned_data = nullptr;  // copied: ours to free
  void (*release)(void*) = nullptr;
  void* release_ctx = nullptr;
  DLManagedTensor managed{};
};

void delete_buffer_tensor(DLManagedTensor* managed) {
  auto* ctx = static_cast<BufferContext*>(managed->manager_ctx);
  if (ctx->release) ctx->release(ctx->release_ctx);
  std::free(ctx->owned_data);
  delete ctx;
}

// The DLManagedTensor handed to each consumer by Tensor::share.
struct ShareContext {
  std::shared_ptr<Tensor> tensor;
  DLManagedTensor managed{};
};

void delete_share(DLManagedTensor* managed) {
  delete static_cast<ShareContext*>(managed->manager_ctx);
}

const char* code_name(uint8_t code) {
  switch (code) {
    case kDLInt:
      return "int";
    case kDLUInt:
      return "uint";
    case kDLFloat:
      return "float";
    case kDLBfloat:
      return "bfloat";
    case kDLComplex:
      return "complex";
    case kDLBoolCode:
      return "bool";
    default:
      return "code";
  }
}

// Byte offsets (relative to data) of the lowest and highest element the
// layout addresses; false if the tensor has no elements. Throws on overflow.
bool extent(int32_t ndim, const int64_t* shape, const int64_t* strides, int64_t itemsize,
            int64_t* lowest, int64_t* highest) {
  // Every factor stays within +-2^63 and every partial sum is checked
  // against int64 at once, so nothing here leaves __int128, whatever the
  // caller's 64 dimensions hold.
  constexpr __int128 kMax = std::numeric_limits<int64_t>::max();
  const auto too_large = [] { return Error(Code::kBadTensor, "tensor is too large to address"); };
  for (int32_t k = 0; k < ndim; ++k) {
    if (shape[k] == 0) return false;
  }
  __int128 lo = 0, hi = 0, contiguous = 1;
  for (int32_t k = ndim - 1; k >= 0; --k) {
    const __int128 stride = strides ? strides[k] : contiguous;
    const __int128 span = (__int128)(shape[k] - 1) * stride;
    if (span < 0)
      lo += span;
    else
      hi += span;
    if (hi > kMax || lo < -kMax) throw too_large();
    contiguous *= shape[k];
    if (contiguous > kMax) contiguous = kMax + 1;  // only a later span of 0 may follow
  }
  lo *= itemsize;
  hi = (hi + 1) * itemsize;
  if (lo < std::numeric_limits<int64_t>::min() || hi > std::numeric_limits<int64_t>::max()) {
    throw Error(Code::kBadTensor, "tensor is too large to address");
  }
  *lowest = (int64_t)lo;
  *highest = (int64_t)hi;
  return true;
}

void check_layout(const DLTensor& t) {
  // The caller's struct may hold any int there: read it as one (loading a
  // value outside DLDeviceType's enumerators as the enum is undefined in C++).
  int device_type;
  static_assert(sizeof device_type == sizeof t.device.device_type, "DLDeviceType is an int");
  std::memcpy(&device_type, &t.device.device_type, sizeof device_type);
  if (device_type != kDLCPU) {
    throw Error(Code::kBadTensor, "tensor is on device type " + std::to_string(device_type) +
                                      "; manypy accepts CPU tensors (kDLCPU = 1) only");
  }
  if (std::string why = unsupported_dtype_reason(t.dtype); !why.empty()) {
    throw Error(Code::kBadTensor, why);
  }
  if (t.ndim < 0 || t.ndim > kMaxDims) {
    throw Error(Code::kBadTensor,
                "tensor has " + std::to_string(t.ndim) + " dimensions; 0 to 64 are supported");
  }
  if (t.ndim > 0 && t.shape == nullptr) throw Error(Code::kBadTensor, "tensor shape is NULL");
  for (int32_t k = 0; k < t.ndim; ++k) {
    if (t.shape[k] < 0) {
      throw Error(Code::kBadTensor, "dimension " + std::to_string(k) + " has negative size " +
                                        std::to_string(t.shape[k]));
    }
    // torch 1.13 cannot take negative strides over DLPack (it aborts).
    if (t.strides != nullptr && t.strides[k] < 0) {
      throw Error(Code::kBadTensor, "dimension " + std::to_string(k) + " has negative stride " +
                                        std::to_string(t.strides[k]) +
                                        "; torch does not accept negative strides");
    }
  }
  // Checked here rather than left to torch, which would fail after it had
  // already taken the tensor's deleter.
  int64_t lowest = 0, highest = 0;
  extent(t.ndim, t.shape, t.strides, t.dtype.bits / 8, &lowest, &highest);
}

// Copies a strided tensor into `out` in C order.
void copy_to_contiguous(const char* src, int32_t ndim, const int64_t* shape, const int64_t* strides,
                        size_t itemsize, char* out) {
  std::vector<int64_t> index(ndim, 0);
  int64_t numel = 1;
  for (int32_t k = 0; k < ndim; ++k) numel *= shape[k];
  for (int64_t n = 0; n < numel; ++n) {
    int64_t offset = 0;
    for (int32_t k = 0; k < ndim; ++k) offset += index[k] * strides[k];
    std::memcpy(out + n * itemsize, src + offset * (int64_t)itemsize, itemsize);
    for (int32_t k = ndim - 1; k >= 0; --k) {
      if (++index[k] < shape[k]) break;
      index[k] = 0;
    }
  }
}

}  // namespace

std::string unsupported_dtype_reason(DLDataType dtype) {
  bool ok = false;
  if (dtype.lanes == 1) {
    switch (dtype.code) {
      case kDLInt:
        ok = dtype.bits == 8 || dtype.bits == 16 || dtype.bits == 32 || dtype.bits == 64;
        break;
      case kDLUInt:
        ok = dtype.bits == 8;
        break;
      case kDLFloat:
        ok = dtype.bits == 16 || dtype.bits == 32 || dtype.bits == 64;
        break;
      case kDLBfloat:
        ok = dtype.bits == 16;
        break;
      case kDLComplex:
        ok = dtype.bits == 64 || dtype.bits == 128;
        break;
      case kDLBoolCode:
        ok = dtype.bits == 8;
        break;
      default:
        break;
    }
  }
  if (ok) return {};
  return std::string("dtype ") + code_name(dtype.code) + "(code " + std::to_string(dtype.code) +
         ") with " + std::to_string(dtype.bits) + " bits x " + std::to_string(dtype.lanes) +
         " lanes has no torch equivalent (supported: int8/16/32/64, uint8, float16/32/64, "
         "bfloat16, complex64/128, bool (code 6) of 8 bits, one lane)";
}

std::shared_ptr<Tensor> Tensor::adopt(DLManagedTensor* managed) {
  if (managed == nullptr) throw Error(Code::kInvalidArgument, "tensor must not be NULL");
  try {
    check_layout(managed->dl_tensor);
  } catch (...) {
    if (managed->deleter) managed->deleter(managed);
    throw;
  }
  return std::shared_ptr<Tensor>(new Tensor(managed));
}

namespace {

// Whether [lo, hi) is mapped memory. msync(MS_ASYNC) does nothing on Linux
// but check the range: it fails with ENOMEM for any unmapped page in it.
bool mapped(uintptr_t lo, uintptr_t hi) {
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t start = lo & ~(page - 1);
  return msync(reinterpret_cast<void*>(start), hi - start, MS_ASYNC) == 0;
}

// The caller's DLManagedTensor: its memory is only as good as its word, so
// check what can be checked without a size (as from_buffer has).
void check_caller_memory(const DLTensor& t) {
  int64_t lowest = 0, highest = 0;
  if (!extent(t.ndim, t.shape, t.strides, t.dtype.bits / 8, &lowest, &highest)) return;
  if (t.data == nullptr) {
    throw Error(Code::kBadTensor, "tensor data is NULL but its shape has elements");
  }
  const __int128 base = static_cast<__int128>(reinterpret_cast<uintptr_t>(t.data)) +
                        static_cast<__int128>(t.byte_offset);
  const __int128 lo = base + lowest, hi = base + highest;
  if (lo <= 0 || hi > static_cast<__int128>(UINTPTR_MAX)) {
    throw Error(Code::kBadTensor, "tensor data + byte_offset " + std::to_string(t.byte_offset) +
                                      " addresses memory beyond the address space");
  }
  if (!mapped(static_cast<uintptr_t>(lo), static_cast<uintptr_t>(hi))) {
    throw Error(Code::kBadTensor, "tensor memory is not mapped: data + byte_offset " +
                                      std::to_string(t.byte_offset) + " + the layout's " +
                                      std::to_string(highest - lowest) +
                                      " bytes reach outside this process's memory");
  }
}

}  // namespace

std::shared_ptr<Tensor> Tensor::adopt_caller(DLManagedTensor* managed) {
  if (managed == nullptr) throw Error(Code::kInvalidArgument, "tensor must not be NULL");
  try {
    check_layout(managed->dl_tensor);
    check_caller_memory(managed->dl_tensor);
  } catch (...) {
    if (managed->deleter) managed->deleter(managed);
    throw;
  }
  return std::shared_ptr<Tensor>(new Tensor(managed));
}

std::shared_ptr<Tensor> Tensor::from_buffer(void* data, size_t data_size, DLDataType dtype,
                                            int32_t ndim, const int64_t* shape,
                                            const int64_t* strides, bool copy,
                                            void (*release)(void*), void* release_ctx) {
  auto ctx = std::make_unique<BufferContext>();
  try {
    if (ndim < 0 || ndim > kMaxDims) {
      throw Error(Code::kBadTensor,
                  "ndim is " + std::to_string(ndim) + "; 0 to 64 dimensions are supported");
    }
    if (ndim > 0 && shape == nullptr) throw Error(Code::kInvalidArgument, "shape must not be NULL");
    ctx->shape.assign(shape, shape + ndim);
    DLTensor probe{data, {kDLCPU, 0}, ndim, dtype, ctx->shape.data(), const_cast<int64_t*>(strides),
                   0};
    check_layout(probe);
    const int64_t itemsize = dtype.bits / 8;
    int64_t lowest = 0, highest = 0;
    bool any = extent(ndim, shape, strides, itemsize, &lowest, &highest);
    if (any && data == nullptr) throw Error(Code::kInvalidArgument, "data must not be NULL");
    if (any && (lowest < 0 || (uint64_t)highest > data_size)) {
      throw Error(Code::kBadTensor, "shape and strides address bytes [" + std::to_string(lowest) +
                                        ", " + std::to_string(highest) + ") but the buffer holds " +
                                        std::to_string(data_size) + " bytes");
    }
    if (strides) ctx->strides.assign(strides, strides + ndim);
    if (copy) {
      // Broadcast strides (0) let a small buffer describe more elements
      // than memory holds: the copy's size is checked, not assumed.
      int64_t numel = 1, total = 0;
      for (int32_t k = 0; k < ndim; ++k) {
        if (__builtin_mul_overflow(numel, shape[k], &numel)) numel = INT64_MAX;
      }
      if (__builtin_mul_overflow(numel, itemsize, &total) || total > INT64_MAX - 128) {
        throw Error(Code::kBadTensor, "a copy of this layout would hold more than 2^63 bytes");
      }
      size_t bytes = (size_t)total;
      ctx->owned_data = std::aligned_alloc(64, ((bytes + 63) / 64) * 64 + 64);
      if (ctx->owned_data == nullptr) throw std::bad_alloc();
      if (numel > 0) {
        if (strides == nullptr) {
          std::memcpy(ctx->owned_data, data, bytes);
        } else {
          copy_to_contiguous(static_cast<const char*>(data), ndim, shape, strides, (size_t)itemsize,
                             static_cast<char*>(ctx->owned_data));
        }
      }
      ctx->strides.clear();  // the copy is C-contiguous
      if (release) release(release_ctx);
      release = nullptr;
    } else {
      ctx->release = release;
      ctx->release_ctx = release_ctx;
    }
  } catch (...) {
    if (release) release(release_ctx);
    throw;
  }
  DLManagedTensor& m = ctx->managed;
  m.dl_tensor.data = ctx->owned_data ? ctx->owned_data : data;
  m.dl_tensor.device = {kDLCPU, 0};
  m.dl_tensor.ndim = ndim;
  m.dl_tensor.dtype = dtype;
  m.dl_tensor.shape = ctx->shape.data();
  m.dl_tensor.strides = ctx->strides.empty() ? nullptr : ctx->strides.data();
  m.dl_tensor.byte_offset = 0;
  m.manager_ctx = ctx.get();
  m.deleter = delete_buffer_tensor;
  ctx.release();
  return std::shared_ptr<Tensor>(new Tensor(&m));
}

Tensor::~Tensor() {
  if (managed_->deleter) managed_->deleter(managed_);
}

DLManagedTensor* Tensor::share(const std::shared_ptr<Tensor>& tensor) {
  auto* ctx = new ShareContext();
  ctx->tensor = tensor;
  ctx->managed.dl_tensor = tensor->dl();  // shape/strides stay owned by `tensor`
  DLTensor& t = ctx->managed.dl_tensor;
  // An empty tensor may have no data (or any byte_offset: nothing checks
  // the memory of no elements), but torch never runs the deleter of a NULL
  // data pointer: give it an address it will never read.
  alignas(64) static char no_elements[64];
  bool empty = false;
  for (int32_t k = 0; k < t.ndim; ++k) empty = empty || t.shape[k] == 0;
  if (empty || t.data == nullptr) {
    t.data = no_elements;
  } else {
    // torch 1.13 ignores byte_offset: fold it into the pointer (checked to
    // stay inside the address space when the tensor was made).
    t.data = static_cast<char*>(t.data) + t.byte_offset;
  }
  t.byte_offset = 0;
  ctx->managed.manager_ctx = ctx;
  ctx->managed.deleter = delete_share;
  return &ctx->managed;
}

std::string Tensor::describe() const {
  const DLTensor& t = dl();
  std::string text = code_name(t.dtype.code);
  if (t.dtype.code != kDLBoolCode) text += std::to_string(t.dtype.bits);
  text += "[";
  for (int32_t k = 0; k < t.ndim; ++k) text += (k ? ", " : "") + std::to_string(t.shape[k]);
  return text + "]";
}

}  // namespace manypy
