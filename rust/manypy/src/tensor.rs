//! CPU tensors crossing the C API through DLPack.
//!
//! A [`Tensor`] is a cheap, shared handle (`Clone` shares the data) to data
//! owned either by Rust (a buffer moved or copied in) or by the C library (a
//! DLPack tensor a call returned). Python may write a tensor it is lent
//! without a copy, so at any moment a tensor's memory is either lent (Python
//! may write it, Rust cannot read it) or frozen (Rust reads it, calls get
//! copies): see [`Tensor`], "Who may write a tensor's memory". Data is read
//! through views whose lifetime is tied to the handle.
use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};
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

    /// Every dtype with its DLPack code and bits, in declaration order (so
    /// `DL[dtype as usize]` is the dtype's row): the one table both
    /// directions read.
    const DL: [(DType, u32, u8); 12] = {
        use DType::*;
        [
            (Int8, sys::kDLInt, 8),
            (Int16, sys::kDLInt, 16),
            (Int32, sys::kDLInt, 32),
            (Int64, sys::kDLInt, 64),
            (UInt8, sys::kDLUInt, 8),
            (Float16, sys::kDLFloat, 16),
            (Float32, sys::kDLFloat, 32),
            (Float64, sys::kDLFloat, 64),
            (BFloat16, sys::kDLBfloat, 16),
            (Complex64, sys::kDLComplex, 64),
            (Complex128, sys::kDLComplex, 128),
            (Bool, sys::MANYPY_DL_BOOL, 8),
        ]
    };

    pub(crate) fn to_dl(self) -> sys::DLDataType {
        let (_, code, bits) = Self::DL[self as usize];
        sys::DLDataType {
            code: code as u8,
            bits,
            lanes: 1,
        }
    }

    pub(crate) fn from_dl(dt: sys::DLDataType) -> Option<DType> {
        if dt.lanes != 1 {
            return None;
        }
        Self::DL
            .iter()
            .find(|&&(_, code, bits)| code == dt.code as u32 && bits == dt.bits)
            .map(|&(d, ..)| d)
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
    /// A Rust buffer (`Box<B>` as a raw pointer, so that nothing retags it
    /// while Python uses the memory), dropped on release by `drop`.
    Rust {
        buffer: *mut (),
        drop: unsafe fn(*mut ()),
    },
    /// A DLPack tensor from the C library: its deleter runs on release.
    DLPack(*mut sys::DLManagedTensor),
}

/// Drops a buffer that `Box::into_raw` gave up.
unsafe fn drop_boxed<B>(buffer: *mut ()) {
    drop(Box::from_raw(buffer.cast::<B>()));
}

// Who may use a tensor's memory, one of three (`Inner::access`; see
// `Tensor`, "Who may write a tensor's memory"):
/// Nobody: the next call lends it without a copy, or the next read freezes it.
const FREE: u8 = 0;
/// A C value holds it (a call's arguments, prepared `Args`, a result that is
/// a view of it, or an interpreter whose model kept it): Python may write
/// it, Rust does not read it, and other calls get copies. Back to `FREE`
/// when the C library releases it.
const LENT: u8 = 1;
/// Rust has read it and views may be alive: never lent again, so it never
/// changes; calls get copies. Final.
const FROZEN: u8 = 2;

struct Inner {
    data: *const u8, // byte_offset applied
    extent: usize,   // bytes from `data` that the shape and strides reach
    dtype: DType,
    shape: Vec<i64>,
    strides: Option<Vec<i64>>, // in elements; None: C-contiguous
    owner: Owner,
    access: AtomicU8,
}

// Shared by threads: Rust reads the data only when it is `FROZEN`, which
// nothing writes (the binding never lends a frozen tensor), and Python
// writes it only while it is `LENT`, when Rust does not read it. A Rust
// buffer is `Send` and is never touched but to drop it; the C API lets any
// thread run a DLPack deleter.
unsafe impl Send for Inner {}
unsafe impl Sync for Inner {}

impl Drop for Inner {
    fn drop(&mut self) {
        match self.owner {
            Owner::Rust { buffer, drop } => unsafe { drop(buffer) },
            Owner::DLPack(managed) => unsafe {
                if let Some(deleter) = (*managed).deleter {
                    deleter(managed);
                }
            },
        }
    }
}

/// A CPU tensor: dtype, shape, optional strides, and data. `Clone` is cheap
/// and shares the data. `Send + Sync`.
///
/// # Who may write a tensor's memory
///
/// A tensor lent to Python without a copy becomes a torch tensor over the
/// same memory, and torch tensors are writable: a model may change it in
/// place during the call (`x.mul_(2)`), and, if it keeps the tensor, later,
/// during another call on another thread. So a tensor's memory is, at any
/// moment, Python's to write or Rust's to read, never both:
///
/// - **Lent.** Passing a tensor to a call (in a [`Value`](crate::Value),
///   converted at the call or once by [`Args`](crate::Args)) lends it
///   without a copy, unless it is already lent or frozen. It stays lent
///   until the C library lets go of it: when the call's arguments are freed
///   and the interpreter drops it, at the end of the call, unless prepared
///   `Args` hold it, a result of the call is a view of it (an identity model
///   returns its input), or the model kept it, in which case it stays lent
///   for as long as the model holds it. While it is lent, reads
///   ([`as_slice`](Tensor::as_slice), [`as_bytes`](Tensor::as_bytes),
///   [`to_vec`](Tensor::to_vec), [`c_order_bytes`](Tensor::c_order_bytes),
///   `as_array`, `==`) are `Err` with [`Code::TensorLent`], and every other
///   call it is passed to gets a copy, taken when the arguments are
///   converted (so a copy taken while a model writes the tensor may show
///   part of what it wrote).
/// - **Frozen.** The first read when nothing holds it freezes it: from then
///   on nothing writes it, and every call it is passed to gets a copy, so
///   views stay valid and unchanging. A read after a call shows what the
///   model wrote during it.
///
/// Memory that Python must not write never reaches Python uncopied:
/// [`from_buffer`](Tensor::from_buffer) takes only buffers it owns
/// exclusively and may write (no shared borrow, `Arc`, or read-only map), and
/// shared data comes in through [`from_slice`](Tensor::from_slice), a copy.
///
/// A result is Rust's alone. The C library hands a result's memory over
/// without a copy only when nothing in the interpreter can reach it once the
/// call has dropped its references (an identity model returns the caller's
/// own memory, which stays lent to that result), and copies it otherwise (a
/// weight read through [`getattr`](crate::Object::getattr), a tensor the
/// model keeps). So no model writes a result after its call returned, unless
/// Rust lends the result to a later call, as above.
#[derive(Clone)]
pub struct Tensor(Arc<Inner>);

impl Tensor {
    /// A contiguous tensor holding a copy of `data`, of shape `shape`: the
    /// way in for memory that must not change, such as a shared borrow, a
    /// `static`, or a read-only memory map. Python writes only the copy.
    pub fn from_slice<T: Element>(data: &[T], shape: &[i64]) -> Result<Tensor> {
        Self::from_buffer(data.to_vec(), shape)
    }

    /// A contiguous tensor over `data`, moved in without copying. Calls may
    /// write it: see [`Tensor`].
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[i64]) -> Result<Tensor> {
        Self::from_buffer(data, shape)
    }

    /// A contiguous tensor over a buffer that it owns from now on, without
    /// copying. The buffer must be owned, writable and exclusive
    /// (`AsMut<[T]> + Send + 'static`): a `Vec<T>`, `Box<[T]>`, `[T; N]`,
    /// `&'static mut [T]` (a leaked one), or a writable memory map (a shared
    /// file mapping's writes reach the file). A model may write the memory
    /// (see [`Tensor`]), and may keep it past the call, so the tensor drops
    /// the buffer, on whichever thread lets go last, only when neither Rust
    /// nor any interpreter needs it any more.
    ///
    /// ```
    /// # use manypy::Tensor;
    /// let t = Tensor::from_buffer(vec![1.0f32, 2.0], &[2]).unwrap();
    /// let leaked: &'static mut [f32] = Box::leak(vec![1.0f32, 2.0].into_boxed_slice());
    /// let u = Tensor::from_buffer(leaked, &[2]).unwrap();
    /// # assert_eq!(t, u);
    /// ```
    ///
    /// Memory a model must not write does not compile. A shared borrow, even
    /// `'static` (copy it with [`from_slice`](Tensor::from_slice)):
    ///
    /// ```compile_fail,E0277
    /// static WEIGHTS: [f32; 2] = [1.0, 2.0];
    /// let t = manypy::Tensor::from_buffer(&WEIGHTS[..], &[2]);
    /// ```
    ///
    /// A buffer others share:
    ///
    /// ```compile_fail,E0277
    /// let shared: std::sync::Arc<[f32]> = vec![1.0f32, 2.0].into();
    /// let t = manypy::Tensor::from_buffer(shared.clone(), &[2]);
    /// ```
    ///
    /// A read-only memory map, or anything else that only gives `&[T]`
    /// (`memmap2::Mmap` is such a type):
    ///
    /// ```compile_fail,E0277
    /// struct ReadOnlyMap(&'static [u8]);
    /// impl AsRef<[u8]> for ReadOnlyMap {
    ///     fn as_ref(&self) -> &[u8] { self.0 }
    /// }
    /// let t = manypy::Tensor::from_buffer(ReadOnlyMap(b"\x01\x02"), &[2]);
    /// ```
    ///
    /// A mutable borrow that ends: a model may keep the tensor past the call.
    ///
    /// ```compile_fail,E0597
    /// let mut data = vec![1.0f32, 2.0];
    /// let t = manypy::Tensor::from_buffer(&mut data[..], &[2]);
    /// # drop(data); drop(t);
    /// ```
    pub fn from_buffer<T, B>(buffer: B, shape: &[i64]) -> Result<Tensor>
    where
        T: Element,
        B: AsMut<[T]> + Send + 'static,
    {
        Self::over_owned(buffer, T::DTYPE, shape, |b| {
            let slice = b.as_mut();
            (slice.as_mut_ptr().cast(), slice.len())
        })
    }

    /// A contiguous tensor of dtype `dtype` holding a copy of `bytes`
    /// (native byte order), for dtypes without a Rust type of their own.
    pub fn from_bytes(dtype: DType, bytes: &[u8], shape: &[i64]) -> Result<Tensor> {
        let count = element_count(shape)?;
        if count.checked_mul(dtype.size()) != Some(bytes.len()) {
            return Err(Error::new(
                Code::BadTensor,
                format!(
                    "shape {shape:?} of {dtype:?} needs {count} elements of {} bytes, got {} bytes",
                    dtype.size(),
                    bytes.len()
                ),
            ));
        }
        if dtype == DType::Bool && !bool::valid(bytes) {
            return Err(Error::new(
                Code::BadTensor,
                "a bool tensor's bytes must be 0 or 1",
            ));
        }
        // u64 storage keeps every dtype aligned (complex128 needs 8).
        let storage = vec![0u64; bytes.len().div_ceil(8)];
        Self::over_owned(storage, dtype, shape, |storage| {
            let data = storage.as_mut_ptr().cast::<u8>();
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), data, bytes.len()) };
            (data, count)
        })
    }

    /// A contiguous tensor over memory in `buffer`, which it owns from now
    /// on: `elements` finds the memory (its address and element count) and
    /// is the last code to touch the buffer until it is dropped.
    fn over_owned<B: Send + 'static>(
        buffer: B,
        dtype: DType,
        shape: &[i64],
        elements: impl FnOnce(&mut B) -> (*mut u8, usize),
    ) -> Result<Tensor> {
        let count = element_count(shape)?;
        // Boxed first, so the memory's address is final (an array's would move).
        let raw = Box::into_raw(Box::new(buffer));
        // Owned from here on: dropped if the check fails.
        let mut inner = Inner {
            data: std::ptr::null(),
            extent: 0,
            dtype,
            shape: shape.to_vec(),
            strides: None,
            owner: Owner::Rust {
                buffer: raw.cast(),
                drop: drop_boxed::<B>,
            },
            access: AtomicU8::new(FREE),
        };
        // Safety: `raw` is the only pointer to the buffer.
        let (data, len) = elements(unsafe { &mut *raw });
        if len != count {
            return Err(Error::new(
                Code::BadTensor,
                format!("shape {shape:?} holds {count} elements, the buffer {len}"),
            ));
        }
        inner.data = data;
        inner.extent = count * dtype.size(); // the size of memory that exists
        Ok(Tensor(Arc::new(inner)))
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
            access: AtomicU8::new(FREE),
        };
        let dtype = DType::from_dl(t.dtype).ok_or_else(|| {
            Error::new(
                Code::BadTensor,
                format!(
                    "unsupported DLPack dtype {:?}",
                    (t.dtype.code, t.dtype.bits, t.dtype.lanes)
                ),
            )
        })?;
        let ndim =
            usize::try_from(t.ndim).map_err(|_| Error::new(Code::BadTensor, "negative ndim"))?;
        let shape = if ndim == 0 {
            Vec::new()
        } else {
            std::slice::from_raw_parts(t.shape, ndim).to_vec()
        };
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

    /// Whether a C value holds the tensor now, so that Python may write it and
    /// reads are `Err` ([`Code::TensorLent`]). A call on another thread may
    /// change the answer at any time.
    pub fn is_lent(&self) -> bool {
        self.0.access.load(Ordering::Acquire) == LENT
    }

    /// Freezes the tensor for reading (see [`Tensor`]): `Err` while it is lent.
    fn freeze(&self) -> Result<()> {
        let access = &self.0.access;
        // Acquire: a read after a call sees what the model wrote (the release
        // callback stored FREE after it).
        if access.load(Ordering::Acquire) == FROZEN {
            return Ok(());
        }
        match access.compare_exchange(FREE, FROZEN, Ordering::Acquire, Ordering::Acquire) {
            Ok(_) | Err(FROZEN) => Ok(()),
            Err(_) => Err(Error::new(
                Code::TensorLent,
                "the tensor is lent to Python, which may write it (a call, prepared Args, a result \
                 that is a view of it, or a model that kept it holds it): it can be read once they let \
                 go, or copy it in with Tensor::from_slice to read it meanwhile",
            )),
        }
    }

    /// The elements as a slice, without copying; borrowed from this handle.
    /// Freezes the tensor ([`Tensor`]). `Err` (`WrongKind`) when `T` is not
    /// the tensor's dtype, (`BadTensor`) when the tensor is not contiguous
    /// (see [`Tensor::to_vec`]) or, for `bool`, when a byte is neither 0 nor
    /// 1, (`TensorLent`) while Python may write it.
    pub fn as_slice<T: Element>(&self) -> Result<&[T]> {
        self.check_type::<T>()?;
        if !self.is_contiguous() {
            return Err(Error::new(
                Code::BadTensor,
                format!(
                    "the tensor is not contiguous (strides {:?}): use to_vec",
                    self.strides()
                ),
            ));
        }
        let bytes = self.as_bytes()?;
        if !T::valid(bytes) {
            return Err(Error::new(
                Code::BadTensor,
                "a bool tensor holds a byte that is neither 0 nor 1",
            ));
        }
        if bytes.is_empty() {
            return Ok(&[]);
        }
        if (bytes.as_ptr() as usize) % std::mem::align_of::<T>() != 0 {
            return Err(Error::new(
                Code::BadTensor,
                "the tensor's data is not aligned for its dtype",
            ));
        }
        Ok(unsafe { std::slice::from_raw_parts(bytes.as_ptr() as *const T, self.len()) })
    }

    /// The raw bytes of a contiguous tensor, borrowed from this handle.
    /// Freezes the tensor; `Err` (`TensorLent`) while Python may write it.
    pub fn as_bytes(&self) -> Result<&[u8]> {
        if !self.is_contiguous() {
            return Err(Error::new(
                Code::BadTensor,
                "the tensor is not contiguous: use to_vec",
            ));
        }
        self.freeze()?;
        if self.0.extent == 0 {
            return Ok(&[]);
        }
        Ok(unsafe { std::slice::from_raw_parts(self.0.data, self.0.extent) })
    }

    /// The elements in C order, copied: works for any strides. Freezes the
    /// tensor; `Err` (`TensorLent`) while Python may write it.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if self.is_contiguous() {
            return self.as_slice::<T>().map(<[T]>::to_vec);
        }
        self.check_type::<T>()?;
        let bytes = self.c_order_bytes()?;
        if !T::valid(&bytes) {
            return Err(Error::new(
                Code::BadTensor,
                "a bool tensor holds a byte that is neither 0 nor 1",
            ));
        }
        Ok(bytes
            .chunks_exact(std::mem::size_of::<T>())
            .map(|b| unsafe { std::ptr::read_unaligned(b.as_ptr() as *const T) })
            .collect())
    }

    /// The elements' bytes in C order, copied, whatever the strides.
    /// Freezes the tensor; `Err` (`TensorLent`) while Python may write it.
    pub fn c_order_bytes(&self) -> Result<Vec<u8>> {
        if self.is_contiguous() {
            return self.as_bytes().map(<[u8]>::to_vec);
        }
        self.freeze()?;
        let size = self.0.dtype.size();
        let strides = self.0.strides.as_deref().unwrap_or(&[]);
        let shape = &self.0.shape;
        let mut out = Vec::with_capacity(self.len() * size);
        let mut index = vec![0i64; shape.len()];
        for _ in 0..self.len() {
            let offset: i64 = index.iter().zip(strides).map(|(i, s)| i * s).sum();
            // Within `extent`: checked when the tensor was made.
            let element = unsafe {
                std::slice::from_raw_parts(self.0.data.add(offset as usize * size), size)
            };
            out.extend_from_slice(element);
            for d in (0..shape.len()).rev() {
                index[d] += 1;
                if index[d] < shape[d] {
                    break;
                }
                index[d] = 0;
            }
        }
        Ok(out)
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

    /// A new C tensor value for a call: over this tensor's memory, which it
    /// lends (the value holds a reference, released by the C library when
    /// it and every interpreter are done), when the tensor is free; a copy
    /// when it is frozen or already lent (see [`Tensor`]).
    pub(crate) fn to_c_value(&self) -> Result<*mut sys::manypy_value> {
        unsafe extern "C" fn release(ctx: *mut std::ffi::c_void) {
            let inner = Arc::from_raw(ctx as *const Inner);
            // Release: whoever freezes it next sees what Python wrote.
            inner.access.store(FREE, Ordering::Release);
        }
        let inner = &*self.0;
        let lend = inner
            .access
            .compare_exchange(FREE, LENT, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        let (copy, release, ctx): (i32, Option<unsafe extern "C" fn(*mut std::ffi::c_void)>, _) =
            if lend {
                (
                    0,
                    Some(release),
                    Arc::into_raw(self.0.clone()) as *mut std::ffi::c_void,
                )
            } else {
                (1, None, std::ptr::null_mut())
            };
        let mut out = std::ptr::null_mut();
        let strides = inner
            .strides
            .as_ref()
            .map_or(std::ptr::null(), |s| s.as_ptr());
        // On failure the C library calls `release` at once. A copy is made
        // before this returns; the C library only reads the memory for it.
        unsafe {
            Error::check(sys::manypy_value_new_tensor_from_buffer(
                inner.data as *mut std::ffi::c_void,
                inner.extent,
                inner.dtype.to_dl(),
                inner.shape.len() as i32,
                inner.shape.as_ptr(),
                strides,
                copy,
                release,
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
/// compared bytewise) are. Comparing reads, so it freezes both ([`Tensor`]);
/// a tensor that is lent cannot be read, and equals only views of its own
/// memory with its own layout.
impl PartialEq for Tensor {
    fn eq(&self, other: &Tensor) -> bool {
        if self.dtype() != other.dtype() || self.shape() != other.shape() {
            return false;
        }
        if self.data_ptr() == other.data_ptr() && self.strides() == other.strides() {
            return true; // the same elements: nothing to read
        }
        matches!((self.c_order_bytes(), other.c_order_bytes()), (Ok(a), Ok(b)) if a == b)
    }
}

fn element_count(shape: &[i64]) -> Result<usize> {
    shape.iter().try_fold(1usize, |acc, &d| {
        let d = usize::try_from(d).map_err(|_| {
            Error::new(Code::BadTensor, format!("negative size in shape {shape:?}"))
        })?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dtype_table_is_in_declaration_order_and_round_trips() {
        for (i, &(dtype, ..)) in DType::DL.iter().enumerate() {
            assert_eq!(dtype as usize, i, "{dtype:?}");
            assert_eq!(DType::from_dl(dtype.to_dl()), Some(dtype));
        }
        assert_eq!(
            DType::from_dl(sys::DLDataType {
                code: sys::kDLFloat as u8,
                bits: 32,
                lanes: 2
            }),
            None
        );
        assert_eq!(
            DType::from_dl(sys::DLDataType {
                code: sys::kDLFloat as u8,
                bits: 8,
                lanes: 1
            }),
            None
        );
    }
}
