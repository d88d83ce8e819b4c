//! Arguments and results: a Rust tree of values, converted to and from the
//! C API's `manypy_value` at each call.
use std::ffi::CString;
use std::os::raw::c_char;

use manypy_sys as sys;

use crate::error::{Code, Error, Result};
use crate::tensor::Tensor;

/// A value crossing into or out of Python: what `manypy_value` holds.
/// Python's `None`, `bool`, `int` (fitting `i64`), `float`, `str`, `bytes`,
/// `torch.Tensor`, `list`, `tuple` and `dict` with string keys (insertion
/// order kept, as a vector of pairs).
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Value {
    #[default]
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    Tensor(Tensor),
    List(Vec<Value>),
    Tuple(Vec<Value>),
    /// String keys in insertion order. A key given twice keeps its last value
    /// when it reaches Python.
    Dict(Vec<(String, Value)>),
}

impl Value {
    /// The value under `key` of a dict (the first such entry).
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Dict(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The value's kind, for messages.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::Bytes(_) => "bytes",
            Value::Tensor(_) => "tensor",
            Value::List(_) => "list",
            Value::Tuple(_) => "tuple",
            Value::Dict(_) => "dict",
        }
    }

    /// This value as a new C value. Refuses nesting deeper than the C API's
    /// limit before going deeper, so a hostile tree cannot exhaust the stack.
    pub(crate) fn to_c(&self) -> Result<CValue> {
        self.to_c_at(1)
    }

    fn to_c_at(&self, depth: usize) -> Result<CValue> {
        let fresh = |p: *mut sys::manypy_value| {
            CValue::from_raw(p).ok_or_else(|| Error::new(Code::ResourceExhausted, "out of memory"))
        };
        unsafe {
            match self {
                Value::None => fresh(sys::manypy_value_new_none()),
                Value::Bool(b) => fresh(sys::manypy_value_new_bool(*b as i32)),
                Value::Int(i) => fresh(sys::manypy_value_new_int64(*i)),
                Value::Float(f) => fresh(sys::manypy_value_new_double(*f)),
                Value::Bytes(b) => fresh(sys::manypy_value_new_bytes(b.as_ptr().cast(), b.len())),
                Value::Str(s) => {
                    let mut out = std::ptr::null_mut();
                    Error::check(sys::manypy_value_new_string(
                        s.as_ptr().cast(),
                        s.len(),
                        &mut out,
                    ))?;
                    fresh(out)
                }
                Value::Tensor(t) => fresh(t.to_c_value()?),
                Value::List(items) | Value::Tuple(items) => {
                    let seq = fresh(if matches!(self, Value::List(_)) {
                        sys::manypy_value_new_list()
                    } else {
                        sys::manypy_value_new_tuple()
                    })?;
                    for item in items {
                        seq.append(item.to_c_nested(depth)?)?;
                    }
                    Ok(seq)
                }
                Value::Dict(entries) => {
                    let dict = fresh(sys::manypy_value_new_dict())?;
                    for (key, item) in entries {
                        dict.dict_set(key, item.to_c_nested(depth)?)?;
                    }
                    Ok(dict)
                }
            }
        }
    }

    fn to_c_nested(&self, depth: usize) -> Result<CValue> {
        let container = matches!(self, Value::List(_) | Value::Tuple(_) | Value::Dict(_));
        if container && depth >= sys::MANYPY_VALUE_MAX_DEPTH as usize {
            return Err(Error::new(
                Code::InvalidArgument,
                format!(
                    "a value nests more than {} containers",
                    sys::MANYPY_VALUE_MAX_DEPTH
                ),
            ));
        }
        self.to_c_at(depth + container as usize)
    }

    /// Copies a C value (borrowed) into a Rust value. Tensors are not copied:
    /// they take a DLPack reference to the C value's memory.
    ///
    /// # Safety
    /// `v` is a valid value (results nest at most MANYPY_VALUE_MAX_DEPTH deep).
    pub(crate) unsafe fn from_c(v: *const sys::manypy_value) -> Result<Value> {
        Ok(match sys::manypy_value_get_kind(v) {
            sys::MANYPY_VALUE_NONE => Value::None,
            sys::MANYPY_VALUE_BOOL => {
                let mut b = 0;
                Error::check(sys::manypy_value_get_bool(v, &mut b))?;
                Value::Bool(b != 0)
            }
            sys::MANYPY_VALUE_INT64 => {
                let mut i = 0;
                Error::check(sys::manypy_value_get_int64(v, &mut i))?;
                Value::Int(i)
            }
            sys::MANYPY_VALUE_DOUBLE => {
                let mut f = 0.0;
                Error::check(sys::manypy_value_get_double(v, &mut f))?;
                Value::Float(f)
            }
            sys::MANYPY_VALUE_STRING => {
                let (mut p, mut n) = (std::ptr::null(), 0usize);
                Error::check(sys::manypy_value_get_string(v, &mut p, &mut n))?;
                Value::Str(utf8(p, n)?)
            }
            sys::MANYPY_VALUE_BYTES => {
                let (mut p, mut n) = (std::ptr::null(), 0usize);
                Error::check(sys::manypy_value_get_bytes(v, &mut p, &mut n))?;
                Value::Bytes(if n == 0 {
                    Vec::new()
                } else {
                    std::slice::from_raw_parts(p as *const u8, n).to_vec()
                })
            }
            sys::MANYPY_VALUE_TENSOR => {
                let mut managed = std::ptr::null_mut();
                Error::check(sys::manypy_value_get_tensor(v, &mut managed))?;
                Value::Tensor(Tensor::from_dlpack(managed)?)
            }
            kind @ (sys::MANYPY_VALUE_LIST | sys::MANYPY_VALUE_TUPLE) => {
                let n = length(v)?;
                let mut items = Vec::with_capacity(n);
                for i in 0..n {
                    items.push(Value::from_c(item(v, i)?)?);
                }
                if kind == sys::MANYPY_VALUE_LIST {
                    Value::List(items)
                } else {
                    Value::Tuple(items)
                }
            }
            sys::MANYPY_VALUE_DICT => {
                let n = length(v)?;
                let mut entries = Vec::with_capacity(n);
                for i in 0..n {
                    let (mut k, mut kn) = (std::ptr::null(), 0usize);
                    Error::check(sys::manypy_value_dict_key(v, i, &mut k, &mut kn))?;
                    entries.push((utf8(k, kn)?, Value::from_c(item(v, i)?)?));
                }
                Value::Dict(entries)
            }
            other => {
                return Err(Error::new(
                    Code::UnsupportedType,
                    format!("a value of unknown kind {other}"),
                ))
            }
        })
    }
}

unsafe fn length(v: *const sys::manypy_value) -> Result<usize> {
    let mut n = 0usize;
    Error::check(sys::manypy_value_length(v, &mut n))?;
    Ok(n)
}

unsafe fn item(v: *const sys::manypy_value, i: usize) -> Result<*const sys::manypy_value> {
    let mut out = std::ptr::null();
    Error::check(sys::manypy_value_get_item(v, i, &mut out))?;
    Ok(out)
}

unsafe fn utf8(p: *const c_char, n: usize) -> Result<String> {
    if n == 0 {
        return Ok(String::new());
    }
    String::from_utf8(std::slice::from_raw_parts(p as *const u8, n).to_vec()).map_err(|_| {
        Error::new(
            Code::Internal,
            "the library returned a string that is not UTF-8",
        )
    })
}

/// An owned C value, freed on drop. `Send + Sync`: the C API lets any
/// number of threads read (and pass to calls) a value nobody modifies, and
/// only `&mut`-free construction code in this crate modifies one.
pub struct CValue(std::ptr::NonNull<sys::manypy_value>);

unsafe impl Send for CValue {}
unsafe impl Sync for CValue {}

impl CValue {
    pub(crate) fn from_raw(p: *mut sys::manypy_value) -> Option<CValue> {
        std::ptr::NonNull::new(p).map(CValue)
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::manypy_value {
        self.0.as_ptr()
    }

    /// Appends to a list or tuple (ownership of `item` passes to C).
    fn append(&self, item: CValue) -> Result<()> {
        let item = std::mem::ManuallyDrop::new(item);
        unsafe { Error::check(sys::manypy_value_append(self.as_ptr(), item.as_ptr())) }
    }

    /// Sets a dict entry (ownership of `item` passes to C). The key goes
    /// with its length, so a key with NUL reaches Python whole.
    pub(crate) fn dict_set(&self, key: &str, item: CValue) -> Result<()> {
        let item = std::mem::ManuallyDrop::new(item);
        unsafe {
            Error::check(sys::manypy_value_dict_set_n(
                self.as_ptr(),
                key.as_ptr().cast(),
                key.len(),
                item.as_ptr(),
            ))
        }
    }

    /// Converts to a Rust value; the C value is freed on drop as usual.
    pub(crate) fn to_value(&self) -> Result<Value> {
        unsafe { Value::from_c(self.as_ptr()) }
    }
}

impl Drop for CValue {
    fn drop(&mut self) {
        unsafe { sys::manypy_value_free(self.0.as_ptr()) }
    }
}

/// A NUL-terminated copy of `s`; an interior NUL is `InvalidArgument`.
pub(crate) fn c_string(s: &str) -> Result<CString> {
    CString::new(s)
        .map_err(|_| Error::new(Code::InvalidArgument, format!("{s:?} contains a NUL byte")))
}

/// A list of strings from the library (record names).
pub(crate) fn strings(v: Value) -> Result<Vec<String>> {
    Vec::<Value>::try_from(v)?
        .into_iter()
        .map(String::try_from)
        .collect()
}

// ---- conversions ------------------------------------------------------------

macro_rules! from_impl {
    ($($t:ty => |$v:ident| $e:expr),* $(,)?) => {$(
        impl From<$t> for Value {
            fn from($v: $t) -> Value { $e }
        }
    )*};
}
from_impl!(
    () => |_v| Value::None,
    bool => |v| Value::Bool(v),
    i64 => |v| Value::Int(v),
    i32 => |v| Value::Int(v.into()),
    u32 => |v| Value::Int(v.into()),
    f64 => |v| Value::Float(v),
    f32 => |v| Value::Float(v.into()),
    String => |v| Value::Str(v),
    &str => |v| Value::Str(v.to_owned()),
    Vec<u8> => |v| Value::Bytes(v),
    &[u8] => |v| Value::Bytes(v.to_vec()),
    Tensor => |v| Value::Tensor(v),
    &Tensor => |v| Value::Tensor(v.clone()),
    Vec<Value> => |v| Value::List(v),
    Vec<(String, Value)> => |v| Value::Dict(v),
);

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Value {
        v.map_or(Value::None, Into::into)
    }
}

fn wrong_kind(v: &Value, wanted: &str) -> Error {
    Error::new(
        Code::WrongKind,
        format!("expected {wanted}, got {}", v.kind_name()),
    )
}

macro_rules! try_from_impl {
    ($($t:ty, $wanted:literal: $pat:pat => $e:expr),* $(,)?) => {$(
        impl TryFrom<Value> for $t {
            type Error = Error;
            fn try_from(v: Value) -> Result<$t> {
                match v { $pat => Ok($e), other => Err(wrong_kind(&other, $wanted)) }
            }
        }
        impl TryFrom<&Value> for $t {
            type Error = Error;
            fn try_from(v: &Value) -> Result<$t> {
                <$t>::try_from(v.clone())
            }
        }
    )*};
}
try_from_impl!(
    bool, "bool": Value::Bool(b) => b,
    i64, "int": Value::Int(i) => i,
    f64, "float": Value::Float(f) => f,
    String, "str": Value::Str(s) => s,
    Vec<u8>, "bytes": Value::Bytes(b) => b,
    Tensor, "tensor": Value::Tensor(t) => t,
    Vec<Value>, "list or tuple": Value::List(v) | Value::Tuple(v) => v,
    Vec<(String, Value)>, "dict": Value::Dict(d) => d,
);
