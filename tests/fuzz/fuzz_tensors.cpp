// Fuzz target: tensor descriptors through the C API. The input describes
// either a DLManagedTensor for manypy_value_new_tensor (device, dtype, ndim,
// shape, strides, byte_offset, data pointer) or the arguments of
// manypy_value_new_tensor_from_buffer (data, data_size, dtype, ndim, shape,
// strides, copy), over a real heap buffer. Checked:
//  - a refused descriptor is BAD_TENSOR or INVALID_ARGUMENT, and its deleter
//    or release ran exactly once, at once;
//  - an accepted one has a supported dtype, CPU device, 0..64 dimensions,
//    no negative size or stride; from_buffer never accepts a layout that
//    addresses bytes outside [data, data + data_size), nor NULL data for
//    elements, nor does new_tensor;
//  - manypy_value_get_tensor gives back the same dtype, shape and strides,
//    byte_offset 0, and every element it addresses (up to 65,536 of them,
//    else the first, the last and 4,096 more) is readable and holds the
//    caller's bytes (for a copy: the bytes the source held at that index);
//  - the views stay valid after the value is freed; the deleter or release
//    runs exactly once, after the last view is released (it frees the
//    buffer and the shape and strides arrays, so ASan sees any later use).
#include <vector>

#include "fuzz_support.h"

namespace {

struct Owner {
  int calls = 0;
  uint8_t* buffer = nullptr;  // freed by the first call
};
Owner g_owner;

void release(void* ctx) {
  auto* owner = static_cast<Owner*>(ctx);
  ++owner->calls;
  std::free(owner->buffer);
  owner->buffer = nullptr;
}

// The caller's DLManagedTensor and the arrays it points to, all freed by its
// deleter.
struct Managed {
  DLManagedTensor m{};
  int64_t* shape = nullptr;
  int64_t* strides = nullptr;
};

void deleter(DLManagedTensor* m) {
  auto* managed = reinterpret_cast<Managed*>(m);  // m is the first member
  delete[] managed->shape;
  delete[] managed->strides;
  delete managed;
  release(&g_owner);
}

struct DType {
  uint8_t code, bits;
};
const DType kSupported[] = {{kDLInt, 8},     {kDLInt, 16},     {kDLInt, 32},      {kDLInt, 64},
                            {kDLUInt, 8},    {kDLFloat, 16},   {kDLFloat, 32},    {kDLFloat, 64},
                            {kDLBfloat, 16}, {kDLComplex, 64}, {kDLComplex, 128}, {6, 8}};

bool supported(DLDataType t) {
  if (t.lanes != 1) return false;
  for (const DType& d : kSupported)
    if (d.code == t.code && d.bits == t.bits) return true;
  return false;
}

int64_t pick_extent(fuzz::Reader& in) {
  switch (in.u8() % 8) {
    case 0:
      return static_cast<int64_t>(in.u64());  // anything
    case 1:
      return int64_t{1} << (in.u8() % 63);  // huge
    case 2:
      return -static_cast<int64_t>(in.u8() % 4);  // negative
    default:
      return in.u8() % 6;  // small
  }
}

struct Layout {
  std::vector<int64_t> shape, strides;  // strides empty: contiguous
  bool any = false;                     // addresses at least one element
  __int128 numel = 0;
  __int128 lo = 0, hi = 0;  // element offsets addressed
};

// Saturating at +-2^63, just past int64, which no accepted layout reaches
// (their byte extents fit int64): every product is of two saturated values
// (at most 2^126) and every sum of a saturated value and one product, so
// nothing leaves __int128.
__int128 sat(__int128 v) {
  const __int128 big = static_cast<__int128>(1) << 63;
  return v > big ? big : v < -big ? -big : v;
}

Layout describe(const int64_t* shape, const int64_t* strides, int32_t ndim) {
  Layout l;
  l.shape.assign(shape, shape + ndim);
  if (strides) l.strides.assign(strides, strides + ndim);
  l.numel = 1;
  __int128 contiguous = 1;
  for (int32_t k = ndim - 1; k >= 0; --k) {
    const __int128 extent = sat(shape[k]);  // shapes and strides are int64: no
    const __int128 stride = strides ? sat(strides[k]) : contiguous;  // overflow
    const __int128 span = sat((extent - 1) * sat(stride));
    if (shape[k] == 0) l.numel = 0;
    if (l.numel != 0) {
      if (span < 0)
        l.lo = sat(l.lo + span);
      else
        l.hi = sat(l.hi + span);
      l.numel = sat(l.numel * extent);
    }
    contiguous = sat(contiguous * (shape[k] > 0 ? extent : 1));
  }
  l.any = l.numel != 0;
  return l;
}

// The multi-indices to read: all of them, or a sample.
template <typename Fn>
void for_each_index(const Layout& l, uint64_t seed, Fn&& fn) {
  const size_t ndim = l.shape.size();
  std::vector<int64_t> index(ndim, 0);
  if (l.numel <= 65536) {
    for (__int128 n = 0; n < l.numel; ++n) {
      fn(index);
      for (size_t k = ndim; k-- > 0;) {
        if (++index[k] < l.shape[k]) break;
        index[k] = 0;
      }
    }
    return;
  }
  fn(index);
  for (size_t k = 0; k < ndim; ++k) index[k] = l.shape[k] - 1;
  fn(index);
  for (int r = 0; r < 4096; ++r) {
    for (size_t k = 0; k < ndim; ++k) {
      seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
      index[k] = static_cast<int64_t>((seed >> 11) % static_cast<uint64_t>(l.shape[k]));
    }
    fn(index);
  }
}

// In elements. Only for accepted layouts, whose extent fits in int64.
__int128 offset_of(const Layout& l, const std::vector<int64_t>& index) {
  __int128 off = 0, contiguous = 1;
  for (size_t k = l.shape.size(); k-- > 0;) {
    off += static_cast<__int128>(index[k]) * (l.strides.empty() ? contiguous : l.strides[k]);
    if (l.strides.empty()) contiguous *= l.shape[k];
  }
  return off;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Reader in(data, size);
  const uint8_t mode = in.u8();
  const bool managed_api = mode & 1;
  bool copy = mode & 2;

  // The buffer and a snapshot of what it holds.
  const size_t buffer_size = in.u16() % 4097;
  g_owner = Owner{};
  g_owner.buffer = static_cast<uint8_t*>(std::malloc(buffer_size ? buffer_size : 1));
  for (size_t k = 0; k < buffer_size; ++k) g_owner.buffer[k] = static_cast<uint8_t>(k * 31 + 7);
  const std::string snapshot(reinterpret_cast<char*>(g_owner.buffer), buffer_size);
  const size_t data_offset = in.u16() % (buffer_size + 1);
  uint8_t* base = in.u8() % 16 == 0 ? nullptr : g_owner.buffer + data_offset;

  DLDataType dtype;
  if (in.u8() % 4) {
    const DType& d = kSupported[in.u8() % (sizeof kSupported / sizeof kSupported[0])];
    dtype = {d.code, d.bits, 1};
  } else {
    dtype = {in.u8(), in.u8(), in.u16()};
  }
  int32_t ndim = in.u8() % 4 ? in.u8() % 5 : static_cast<int32_t>(in.u32());
  // Exactly ndim entries (0..64): reading more is a heap overflow.
  const int32_t entries = ndim < 0 ? 0 : ndim > 64 ? 64 : ndim;
  auto* shape = new int64_t[entries > 0 ? entries : 1];
  for (int32_t k = 0; k < entries; ++k) shape[k] = pick_extent(in);
  int64_t* strides = nullptr;
  if (in.u8() % 2) {
    strides = new int64_t[entries > 0 ? entries : 1];
    for (int32_t k = 0; k < entries; ++k) strides[k] = pick_extent(in);
  }
  const Layout want = describe(shape, strides, entries);

  manypy_value* value = nullptr;
  manypy_code code;
  uint64_t byte_offset = 0;
  size_t data_size = 0;
  Managed* managed = nullptr;
  if (managed_api) {
    managed = new Managed();
    managed->shape = shape;
    managed->strides = strides;
    DLTensor& t = managed->m.dl_tensor;
    t.data = base;
    t.device = in.u8() % 8
                   ? DLDevice{kDLCPU, 0}
                   : DLDevice{static_cast<DLDeviceType>(in.u8()), static_cast<int>(in.u8())};
    t.ndim = ndim;
    t.dtype = dtype;
    t.shape = shape;
    t.strides = strides;
    byte_offset = in.u8() % 4 ? in.u8() % 64 : in.u64();
    t.byte_offset = byte_offset;
    managed->m.manager_ctx = managed;
    managed->m.deleter = deleter;
    code = fuzz::take(manypy_value_new_tensor(&managed->m, &value), "manypy_value_new_tensor");
    shape = strides = nullptr;  // the deleter's now
  } else {
    // A copy of a broadcast view (zero strides) of N elements allocates N
    // of them: legitimate up to memory, so copies stay under 16 MB here,
    // except past int64, where manypy must refuse the layout.
    const __int128 copy_bytes = sat(want.numel) * (dtype.bits / 8);
    if (copy && copy_bytes > (16 << 20) && copy_bytes <= INT64_MAX) copy = false;
    const size_t room = buffer_size - data_offset;
    data_size = in.u8() % 2 ? room : in.u16() % (room + 1);
    code = fuzz::take(manypy_value_new_tensor_from_buffer(base, data_size, dtype, ndim, shape,
                                                          strides, copy, release, &g_owner, &value),
                      "manypy_value_new_tensor_from_buffer");
    delete[] shape;  // copied by the call
    delete[] strides;
    shape = strides = nullptr;
  }

  if (code != MANYPY_OK) {
    FUZZ_CHECK(code == MANYPY_ERR_BAD_TENSOR || code == MANYPY_ERR_INVALID_ARGUMENT ||
                   code == MANYPY_ERR_RESOURCE_EXHAUSTED,
               manypy_code_name(code));
    FUZZ_CHECK(value == nullptr, "a failed call wrote its out-parameter");
    FUZZ_CHECK(g_owner.calls == 1, "a refused tensor's deleter/release ran " +
                                       std::to_string(g_owner.calls) + " times");
    return 0;
  }

  // Accepted: it must be a tensor manypy documents as acceptable.
  FUZZ_CHECK(supported(dtype), "accepted dtype code " + std::to_string(dtype.code) + " bits " +
                                   std::to_string(dtype.bits) + " lanes " +
                                   std::to_string(dtype.lanes));
  FUZZ_CHECK(ndim >= 0 && ndim <= 64, "accepted ndim " + std::to_string(ndim));
  for (size_t k = 0; k < want.shape.size(); ++k) {
    FUZZ_CHECK(want.shape[k] >= 0, "accepted a negative size");
    FUZZ_CHECK(want.strides.empty() || want.strides[k] >= 0, "accepted a negative stride");
  }
  const int64_t itemsize = dtype.bits / 8;
  // The bytes the layout addresses, relative to `base`.
  const __int128 first = want.lo * itemsize + byte_offset;
  const __int128 end = (want.hi + 1) * itemsize + byte_offset;
  if (want.any) {
    FUZZ_CHECK(base != nullptr, "accepted NULL data for " +
                                    std::to_string(static_cast<long long>(want.numel)) +
                                    " elements");
  }
  bool readable;
  if (managed_api) {
    // The caller vouches for its DLPack tensor; read only what it really has.
    readable = !want.any || (first >= 0 && end <= static_cast<__int128>(buffer_size - data_offset));
  } else {
    FUZZ_CHECK(!want.any || (first >= 0 && end <= static_cast<__int128>(data_size)),
               "from_buffer accepted a layout addressing bytes outside the buffer");
    readable = true;
    if (!copy)
      FUZZ_CHECK(g_owner.calls == 0, "a borrowed buffer was released early");
    else
      FUZZ_CHECK(g_owner.calls == 1, "a copied buffer's release did not run exactly once");
  }

  DLManagedTensor* views[2] = {};
  for (DLManagedTensor*& view : views) {
    FUZZ_CHECK(fuzz::take(manypy_value_get_tensor(value, &view), "get_tensor") == MANYPY_OK,
               "get_tensor");
    const DLTensor& t = view->dl_tensor;
    FUZZ_CHECK(t.ndim == ndim && t.dtype.code == dtype.code && t.dtype.bits == dtype.bits &&
                   t.dtype.lanes == dtype.lanes && t.device.device_type == kDLCPU &&
                   t.byte_offset == 0,
               "the view's descriptor changed");
    for (int32_t k = 0; k < ndim; ++k) {
      FUZZ_CHECK(t.shape[k] == want.shape[k], "the view's shape changed");
      if (!managed_api && copy) {
        FUZZ_CHECK(t.strides == nullptr, "a copy is not C-contiguous");
      } else if (want.strides.empty()) {
        FUZZ_CHECK(t.strides == nullptr, "contiguous strides appeared");
      } else {
        FUZZ_CHECK(t.strides != nullptr && t.strides[k] == want.strides[k],
                   "the view's strides changed");
      }
    }
    if (want.any && !(!managed_api && copy)) {
      FUZZ_CHECK(
          reinterpret_cast<uintptr_t>(t.data) == reinterpret_cast<uintptr_t>(base) + byte_offset,
          "the view does not point at the caller's data");
    }
  }
  manypy_value_free(value);
  FUZZ_CHECK(g_owner.calls == (!managed_api && copy ? 1 : 0),
             "the data was released while views of it live");

  // Read every element through the view that outlived its value.
  if (readable && want.any) {
    const Layout copied = [&] {
      Layout c = want;
      c.strides.clear();
      return c;
    }();
    const bool contiguous_copy = !managed_api && copy;
    const Layout& view_layout = contiguous_copy ? copied : want;
    const uint8_t* view_data = static_cast<const uint8_t*>(views[1]->dl_tensor.data);
    for_each_index(view_layout, size, [&](const std::vector<int64_t>& index) {
      const __int128 at = offset_of(view_layout, index) * itemsize;
      uint8_t got[16];
      std::memcpy(got, view_data + static_cast<int64_t>(at), static_cast<size_t>(itemsize));
      const __int128 src = data_offset + byte_offset + offset_of(want, index) * itemsize;
      FUZZ_CHECK(std::memcmp(got, snapshot.data() + static_cast<int64_t>(src),
                             static_cast<size_t>(itemsize)) == 0,
                 "an element does not hold the caller's bytes");
    });
  }
  views[0]->deleter(views[0]);
  FUZZ_CHECK(g_owner.calls == (!managed_api && copy ? 1 : 0), "released while a view lives");
  views[1]->deleter(views[1]);
  FUZZ_CHECK(g_owner.calls == 1, "the deleter/release ran " + std::to_string(g_owner.calls) +
                                     " times after the last view went");
  return 0;
}
