//! CPU tensors crossing the C API through DLPack, without copying.
//!
//! A [`Tensor`] is a cheap, shared handle (`Clone` shares the data) to
//! immutable data owned either by Rust (a buffer moved or copied in) or by
//! the C library (a DLPack tensor a call returned). Data is read through
//! views whose lifetime is tied to the handle.
use std::any::Any;
use std::fmt;
use std::sync::Arc;

use manypy_sys as sys;

use crate::error::{Code, Error, Result};

/// Element types of the C API: every dtype `manypy_value_new_tensor` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DType {
    Int8,
    Int16,
    Int32,
    Int64,
    UInt8,
    Float16,
    Float32,
    Float64,
    BFloat16,
    Complex64,
    Complex128,
    /// One byte per element, 0 or 1 (`MANYPY_DL_BOOL`).
    Bool,
}

impl DType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        (self.to_dl().bits / 8) as usize
    }

    pub(crate) fn to_dl(self) -> sys::DLDataType {
        use DType::*;
        let (code, bits) = match self {
            Int8 => (sys::kDLInt, 8),
            Int16 => (sys::kDLInt, 16),
            Int32 => (sys::kDLInt, 32),
            Int64 => (sys::kDLInt, 64),
            UInt8 => (sys::kDLUInt, 8),
            Float16 => (sys::kDLFloat, 16),
            Float32 => (sys::kDLFloat, 32),
            Float64 => (sys::kDLFloat, 64),
            BFloat16 => (sys::kDLBfloat, 16),
            Complex64 => (sys::kDLComplex, 64),
            Complex128 => (sys::kDLComplex, 128),
            Bool => (sys::MANYPY_DL_BOOL, 8),
        };
        sys::DLDataType { code: code as u8, bits, lanes: 1 }
    }

    pub(crate) fn from_dl(dt: sys::DLDataType) -> Option<DType> {
        use DType::*;
        if dt.lanes != 1 {
            return None;
        }
        Some(match (dt.code as u32, dt.bits) {
            (sys::kDLInt, 8) => Int8,
            (sys::kDLInt, 16) => Int16,
            (sys::kDLInt, 32) => Int32,
            (sys::kDLInt, 64) => Int64,
            (sys::kDLUInt, 8) => UInt8,
            (sys::kDLFloat, 16) => Float16,
            (sys::kDLFloat, 32) => Float32,
            (sys::kDLFloat, 64) => Float64,
            (sys::kDLBfloat, 16) => BFloat16,
            (sys::kDLComplex, 64) => Complex64,
            (sys::kDLComplex, 128) => Complex128,
            (sys::MANYPY_DL_BOOL, 8) => Bool,
            _ => return None,
        })
    }
}

/// IEEE half precision, as its bits (no arithmetic: convert with a crate such as `half`).
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct F16(pub u16);

/// bfloat16, as its bits.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BF16(pub u16);

/// A complex number of two `f32` (torch.complex64).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Complex32 {
    pub re: f32,
    pub im: f32,
}

/// A complex number of two `f64` (torch.complex128).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Complex64 {
    pub re: f64,
    pub im: f64,
}

mod sealed {
    pub trait Sealed {}
}

/// A Rust type a tensor's elements can be read as or built from. Sealed:
/// implemented exactly for the C API's dtypes.
pub trait Element: sealed::Sealed + Copy + Send + Sync + 'static {
    /// The element's dtype.
    const DTYPE: DType;
    /// Whether the bytes of `data` are valid values of `Self` (only `bool`
    /// has invalid bit patterns).
    #[doc(hidden)]
    fn valid(_data: &[u8]) -> bool {
        true
    }
}

macro_rules! element {
    ($($t:ty => $d:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t { const DTYPE: DType = DType::$d; }
    )*};
}
element!(i8 => Int8, i16 => Int16, i32 => Int32, i64 => Int64, u8 => UInt8, F16 => Float16,
         f32 => Float32, f64 => Float64, BF16 => BFloat16, Complex32 => Complex64,
         Complex64 => Complex128);

impl sealed::Sealed for bool {}
impl Element for bool {
    const DTYPE: DType = DType::Bool;
    fn valid(data: &[u8]) -> bool {
        data.iter().all(|&b| b <= 1)
    }
}

/// Who frees the tensor's memory when the last handle (Rust's or the C
/// library's) lets go.
enum Owner {
    /// A Rust buffer, dropped on release.
    Rust(#[allow(dead_code)] Box<dyn Any + Send + Sync>),
    /// A DLPack tensor from the C library: its deleter runs on release.
    DLPack(*mut sys::DLManagedTensor),
}

struct Inner {
    data: *const u8, // byte_offset applied
    extent: usize,   // bytes from `data` that the shape and strides reach
    dtype: DType,
    shape: Vec<i64>,
    strides: Option<Vec<i64>>, // in elements; None: C-contiguous
    owner: Owner,
}

// The data is never written through a handle, the C API lets any thread run
// a DLPack deleter, and Rust buffers are `Send + Sync`.
unsafe impl Send for Inner {}
unsafe impl Sync for Inner {}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Owner::DLPack(managed) = self.owner {
            unsafe {
                if let Some(deleter) = (*managed).deleter {
                    deleter(managed);
                }
            }
        }
    }
}

/// A CPU tensor: dtype, shape, optional strides, and immutable data.
/// `Clone` is cheap and shares the data. `Send + Sync`: the data is never
/// mutated through a handle.
#[derive(Clone)]
pub struct Tensor(Arc<Inner>);

impl Tensor {
    /// A contiguous tensor holding a copy of `data`, of shape `shape`.
    pub fn from_slice<T: Element>(data: &[T], shape: &[i64]) -> Result<Tensor> {
        Self::from_buffer(data.to_vec(), shape)
    }

    /// A contiguous tensor over `data`, moved in without copying.
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[i64]) -> Result<Tensor> {
        Self::from_buffer(data, shape)
    }

    /// A contiguous tensor over any owned buffer of elements (a `Vec<T>`,
    /// `Box<[T]>`, `Arc<[T]>`, a memory map...), without copying. The buffer
    /// is dropped, on whichever thread lets go last, when neither Rust nor
    /// any interpreter needs it any more (a model that keeps the tensor
    /// keeps the buffer).
    pub fn from_buffer<T, B>(buffer: B, shape: &[i64]) -> Result<Tensor>
    where
        T: Element,
        B: AsRef<[T]> + Send + Sync + 'static,
    {
        let count = element_count(shape)?;
        // Boxed first, so the slice's address is final (an array's would move).
        let buffer: Box<B> = Box::new(buffer);
        let slice: &[T] = (*buffer).as_ref();
        if slice.len() != count {
            return Err(Error::new(
                Code::BadTensor,
                format!("shape {shape:?} holds {count} elements, the buffer {}", slice.len()),
            ));
        }
        let data = slice.as_ptr() as *const u8;
        Ok(Tensor(Arc::new(Inner {
            data,
            extent: std::mem::size_of_val(slice),
            dtype: T::DTYPE,
            shape: shape.to_vec(),
            strides: None,
            owner: Owner::Rust(buffer),
        })))
    }

    /// A contiguous tensor of dtype `dtype` holding a copy of `bytes`
    /// (native byte order), for dtypes without a Rust type of their own.
    pub fn from_bytes(dtype: DType, bytes: &[u8], shape: &[i64]) -> Result<Tensor> {
        let count = element_count(shape)?;
        if bytes.len() != count * dtype.size() {
            return Err(Error::new(
                Code::BadTensor,
                format!("shape {shape:?} of {dtype:?} needs {} bytes, got {}", count * dtype.size(), bytes.len()),
            ));
        }
        if dtype == DType::Bool && !bool::valid(bytes) {
            return Err(Error::new(Code::BadTensor, "a bool tensor's bytes must be 0 or 1"));
        }
        // u64 storage keeps every dtype aligned (complex128 needs 8).
        let mut storage = vec![0u64; bytes.len().div_ceil(8)];
        let data = storage.as_mut_ptr() as *mut u8;
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), data, bytes.len()) };
        Ok(Tensor(Arc::new(Inner {
            data,
            extent: bytes.len(),
            dtype,
            shape: shape.to_vec(),
            strides: None,
            owner: Owner::Rust(Box::new(storage)),
        })))
    }

    /// Takes ownership of a DLPack tensor the C library handed out.
    ///
    /// # Safety
    /// `managed` is a valid DLManagedTensor whose deleter nobody else calls.
    pub(crate) unsafe fn from_dlpack(managed: *mut sys::DLManagedTensor) -> Result<Tensor> {
        let t = &(*managed).dl_tensor;
        // Owned from here on: the deleter runs even if the checks fail.
        let mut inner = Inner {
            data: std::ptr::null(),
            extent: 0,
            dtype: DType::UInt8,
            shape: Vec::new(),
            strides: None,
            owner: Owner::DLPack(managed),
        };
        let dtype = DType::from_dl(t.dtype).ok_or_else(|| {
            Error::new(Code::BadTensor, format!("unsupported DLPack dtype {:?}", (t.dtype.code, t.dtype.bits, t.dtype.lanes)))
        })?;
        let ndim = usize::try_from(t.ndim).map_err(|_| Error::new(Code::BadTensor, "negative ndim"))?;
        let shape = if ndim == 0 { Vec::new() } else { std::slice::from_raw_parts(t.shape, ndim).to_vec() };
        let strides = if t.strides.is_null() || ndim == 0 {
            None
        } else {
            Some(std::slice::from_raw_parts(t.strides, ndim).to_vec())
        };
        let count = element_count(&shape)?;
        inner.extent = extent(&shape, strides.as_deref(), dtype.size(), count)?;
        inner.data = (t.data as *const u8).add(t.byte_offset as usize);
        inner.dtype = dtype;
        inner.shape = shape;
        inner.strides = strides.filter(|s| !is_c_contiguous(&inner.shape, s));
        Ok(Tensor(Arc::new(inner)))
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.0.dtype
    }

    /// The sizes of each dimension (empty for a scalar).
    pub fn shape(&self) -> &[i64] {
        &self.0.shape
    }

    /// The strides in elements, or `None` when C-contiguous.
    pub fn strides(&self) -> Option<&[i64]> {
        self.0.strides.as_deref()
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.0.shape.iter().product::<i64>() as usize
    }

    /// Whether the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the elements are stored densely in C order.
    pub fn is_contiguous(&self) -> bool {
        self.0.strides.is_none()
    }

    /// The elements as a slice, without copying; borrowed from this handle.
    /// `Err` (`WrongKind`) when `T` is not the tensor's dtype, (`BadTensor`)
    /// when the tensor is not contiguous (see [`Tensor::to_vec`]) or, for
    /// `bool`, when a byte is neither 0 nor 1.
    pub fn as_slice<T: Element>(&self) -> Result<&[T]> {
        self.check_type::<T>()?;
        if !self.is_contiguous() {
            return Err(Error::new(
                Code::BadTensor,
                format!("the tensor is not contiguous (strides {:?}): use to_vec", self.strides()),
            ));
        }
        let bytes = self.as_bytes()?;
        if !T::valid(bytes) {
            return Err(Error::new(Code::BadTensor, "a bool tensor holds a byte that is neither 0 nor 1"));
        }
        if bytes.is_empty() {
            return Ok(&[]);
        }
        if (bytes.as_ptr() as usize) % std::mem::align_of::<T>() != 0 {
            return Err(Error::new(Code::BadTensor, "the tensor's data is not aligned for its dtype"));
        }
        Ok(unsafe { std::slice::from_raw_parts(bytes.as_ptr() as *const T, self.len()) })
    }

    /// The raw bytes of a contiguous tensor, borrowed from this handle.
    pub fn as_bytes(&self) -> Result<&[u8]> {
        if !self.is_contiguous() {
            return Err(Error::new(Code::BadTensor, "the tensor is not contiguous: use to_vec"));
        }
        if self.0.extent == 0 {
            return Ok(&[]);
        }
        Ok(unsafe { std::slice::from_raw_parts(self.0.data, self.0.extent) })
    }

    /// The elements in C order, copied: works for any strides.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if self.is_contiguous() {
            return self.as_slice::<T>().map(<[T]>::to_vec);
        }
        self.check_type::<T>()?;
        let bytes = self.c_order_bytes();
        if !T::valid(&bytes) {
            return Err(Error::new(Code::BadTensor, "a bool tensor holds a byte that is neither 0 nor 1"));
        }
        Ok(bytes
            .chunks_exact(std::mem::size_of::<T>())
            .map(|b| unsafe { std::ptr::read_unaligned(b.as_ptr() as *const T) })
            .collect())
    }

    /// The elements' bytes in C order, copied, whatever the strides.
    pub fn c_order_bytes(&self) -> Vec<u8> {
        let size = self.0.dtype.size();
        if self.is_contiguous() {
            return self.as_bytes().map(<[u8]>::to_vec).unwrap_or_default();
        }
        let strides = self.0.strides.as_deref().unwrap_or(&[]);
        let shape = &self.0.shape;
        let mut out = Vec::with_capacity(self.len() * size);
        let mut index = vec![0i64; shape.len()];
        for _ in 0..self.len() {
            let offset: i64 = index.iter().zip(strides).map(|(i, s)| i * s).sum();
            // Within `extent`: checked when the tensor was made.
            let element = unsafe { std::slice::from_raw_parts(self.0.data.add(offset as usize * size), size) };
            out.extend_from_slice(element);
            for d in (0..shape.len()).rev() {
                index[d] += 1;
                if index[d] < shape[d] {
                    break;
                }
                index[d] = 0;
            }
        }
        out
    }

    fn check_type<T: Element>(&self) -> Result<()> {
        if T::DTYPE != self.0.dtype {
            return Err(Error::new(
                Code::WrongKind,
                format!("the tensor is {:?}, not {:?}", self.0.dtype, T::DTYPE),
            ));
        }
        Ok(())
    }

    /// The address of the first element: equal for tensors that share memory.
    pub fn data_ptr(&self) -> *const u8 {
        self.0.data
    }

    /// A new C tensor value sharing this tensor's memory: the value holds a
    /// reference to it, released by the C library when it is done (maybe
    /// after the call, if a model kept the tensor).
    pub(crate) fn to_c_value(&self) -> Result<*mut sys::manypy_value> {
        unsafe extern "C" fn release(ctx: *mut std::ffi::c_void) {
            drop(Arc::from_raw(ctx as *const Inner));
        }
        let inner = &*self.0;
        let ctx = Arc::into_raw(self.0.clone()) as *mut std::ffi::c_void;
        let mut out = std::ptr::null_mut();
        let strides = inner.strides.as_ref().map_or(std::ptr::null(), |s| s.as_ptr());
        // On failure the C library calls `release` at once.
        unsafe {
            Error::check(sys::manypy_value_new_tensor_from_buffer(
                inner.data as *mut std::ffi::c_void,
                inner.extent,
                inner.dtype.to_dl(),
                inner.shape.len() as i32,
                inner.shape.as_ptr(),
                strides,
                0,
                Some(release),
                ctx,
                &mut out,
            ))?;
        }
        Ok(out)
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tensor")
            .field("dtype", &self.0.dtype)
            .field("shape", &self.0.shape)
            .field("strides", &self.0.strides)
            .finish_non_exhaustive()
    }
}

/// Two tensors are equal when dtype, shape and elements (in C order,
/// compared bytewise) are.
impl PartialEq for Tensor {
    fn eq(&self, other: &Tensor) -> bool {
        self.dtype() == other.dtype()
            && self.shape() == other.shape()
            && self.c_order_bytes() == other.c_order_bytes()
    }
}

fn element_count(shape: &[i64]) -> Result<usize> {
    shape.iter().try_fold(1usize, |acc, &d| {
        let d = usize::try_from(d)
            .map_err(|_| Error::new(Code::BadTensor, format!("negative size in shape {shape:?}")))?;
        acc.checked_mul(d)
            .ok_or_else(|| Error::new(Code::BadTensor, format!("shape {shape:?} overflows")))
    })
}

/// Whether strides address the elements densely in C order (the strides of
/// dimensions of size 1, and of empty tensors, do not matter).
fn is_c_contiguous(shape: &[i64], strides: &[i64]) -> bool {
    if shape.contains(&0) {
        return true;
    }
    let mut expected = 1i64;
    for (&n, &s) in shape.iter().zip(strides).rev() {
        if n != 1 && s != expected {
            return false;
        }
        expected *= n;
    }
    true
}

/// Bytes from the first element to past the last one the layout reaches.
fn extent(shape: &[i64], strides: Option<&[i64]>, size: usize, count: usize) -> Result<usize> {
    if count == 0 {
        return Ok(0);
    }
    let Some(strides) = strides else {
        return count
            .checked_mul(size)
            .ok_or_else(|| Error::new(Code::BadTensor, "tensor too large"));
    };
    let mut last: usize = 0;
    for (&n, &s) in shape.iter().zip(strides) {
        let s = usize::try_from(s).map_err(|_| Error::new(Code::BadTensor, "negative stride"))?;
        last = (n as usize - 1)
            .checked_mul(s)
            .and_then(|x| x.checked_add(last))
            .ok_or_else(|| Error::new(Code::BadTensor, "tensor too large"))?;
    }
    (last + 1)
        .checked_mul(size)
        .ok_or_else(|| Error::new(Code::BadTensor, "tensor too large"))
}
