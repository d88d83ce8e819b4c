//! Errors: every C failure becomes an `Err(Error)`, never a panic.
use std::ffi::CStr;
use std::fmt;

use manypy_sys as sys;

/// What kind of failure an [`Error`] is. The C API's codes (`manypy_code`,
/// stable and append-only), plus [`Code::VersionMismatch`] and
/// [`Code::TensorLent`], which only the binding raises. A code a later
/// library adds arrives as [`Code::Unknown`] with its number.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    /// A NULL handle, an empty path, a string with an interior NUL, an option out of range.
    InvalidArgument,
    /// An index or count outside its range (interpreter index, pool size).
    OutOfRange,
    /// Python code raised an exception: see [`Error::python_type`] and [`Error::traceback`].
    Python,
    /// Python source did not compile.
    Syntax,
    /// A Python result has a type the C API cannot represent.
    UnsupportedType,
    /// A value was asked for as a kind it is not.
    WrongKind,
    /// The process ran out of static TLS for another interpreter (see docs/isolation.md).
    StaticTls,
    /// Link-map namespaces, threads, memory or stack exhausted.
    ResourceExhausted,
    /// The dynamic loader or the Python runtime could not be started.
    Loader,
    /// The interpreter cannot serve: it failed to start, or it was retired
    /// after a stopped call whose clean-up was cut short
    /// ([`Pool::check_interpreter`](crate::Pool::check_interpreter) says why).
    InterpreterBroken,
    /// A bug in manypy.
    Internal,
    /// A file does not exist or cannot be read.
    NotFound,
    /// Not a zip archive, or a truncated or corrupt one.
    BadArchive,
    /// A zip archive that is not a torch.package.
    NotAPackage,
    /// An archive of a PyTorch format this library does not read.
    UnsupportedVersion,
    /// Python code needs a module that is neither packaged nor installed.
    ModuleNotFound,
    /// A tensor with a dtype, device, shape or strides manypy cannot accept.
    BadTensor,
    /// An attribute, method, record or key that does not exist.
    NoSuchName,
    /// The call's timeout passed; its Python code was stopped.
    DeadlineExceeded,
    /// The call's cancel token was cancelled; its Python code was stopped.
    Cancelled,
    /// The pool does not trust the archive; none of it ran.
    UntrustedArchive,
    /// Refused at once, without running: the pool already has as many calls
    /// waiting for an interpreter as its queue limit allows
    /// ([`PoolBuilder::queue_limit`](crate::PoolBuilder::queue_limit)).
    /// Retry later or shed the load.
    Overloaded,
    /// Refused at once, without running: the pool is draining
    /// ([`Pool::drain`](crate::Pool::drain)); it finishes the calls it has
    /// and takes no new ones. Send the call to another pool or process.
    Draining,
    /// The loaded libmanypy is not the version this crate was built for
    /// (binding-side: checked once, before any other call).
    VersionMismatch,
    /// A tensor's data was read while it is lent to Python, which may write
    /// it (binding-side: see [`Tensor`](crate::Tensor), "Who may write a
    /// tensor's memory").
    TensorLent,
    /// A code this crate does not know (from a later library).
    Unknown(u32),
}

impl Code {
    /// The code for a raw `manypy_code`. `MANYPY_OK` (0) has no code: it is
    /// not a failure, so it maps to `Unknown(0)`.
    pub fn from_raw(raw: u32) -> Code {
        use Code::*;
        match raw {
            sys::MANYPY_ERR_INVALID_ARGUMENT => InvalidArgument,
            sys::MANYPY_ERR_OUT_OF_RANGE => OutOfRange,
            sys::MANYPY_ERR_PYTHON => Python,
            sys::MANYPY_ERR_SYNTAX => Syntax,
            sys::MANYPY_ERR_UNSUPPORTED_TYPE => UnsupportedType,
            sys::MANYPY_ERR_WRONG_KIND => WrongKind,
            sys::MANYPY_ERR_STATIC_TLS => StaticTls,
            sys::MANYPY_ERR_RESOURCE_EXHAUSTED => ResourceExhausted,
            sys::MANYPY_ERR_LOADER => Loader,
            sys::MANYPY_ERR_INTERPRETER_BROKEN => InterpreterBroken,
            sys::MANYPY_ERR_INTERNAL => Internal,
            sys::MANYPY_ERR_NOT_FOUND => NotFound,
            sys::MANYPY_ERR_BAD_ARCHIVE => BadArchive,
            sys::MANYPY_ERR_NOT_A_PACKAGE => NotAPackage,
            sys::MANYPY_ERR_UNSUPPORTED_VERSION => UnsupportedVersion,
            sys::MANYPY_ERR_MODULE_NOT_FOUND => ModuleNotFound,
            sys::MANYPY_ERR_BAD_TENSOR => BadTensor,
            sys::MANYPY_ERR_NO_SUCH_NAME => NoSuchName,
            sys::MANYPY_ERR_DEADLINE_EXCEEDED => DeadlineExceeded,
            sys::MANYPY_ERR_CANCELLED => Cancelled,
            sys::MANYPY_ERR_UNTRUSTED_ARCHIVE => UntrustedArchive,
            sys::MANYPY_ERR_OVERLOADED => Overloaded,
            sys::MANYPY_ERR_DRAINING => Draining,
            other => Unknown(other),
        }
    }

    /// The C code's number; `None` for [`Code::VersionMismatch`] and
    /// [`Code::TensorLent`], which the C API does not have.
    pub fn raw(self) -> Option<u32> {
        use Code::*;
        Some(match self {
            InvalidArgument => sys::MANYPY_ERR_INVALID_ARGUMENT,
            OutOfRange => sys::MANYPY_ERR_OUT_OF_RANGE,
            Python => sys::MANYPY_ERR_PYTHON,
            Syntax => sys::MANYPY_ERR_SYNTAX,
            UnsupportedType => sys::MANYPY_ERR_UNSUPPORTED_TYPE,
            WrongKind => sys::MANYPY_ERR_WRONG_KIND,
            StaticTls => sys::MANYPY_ERR_STATIC_TLS,
            ResourceExhausted => sys::MANYPY_ERR_RESOURCE_EXHAUSTED,
            Loader => sys::MANYPY_ERR_LOADER,
            InterpreterBroken => sys::MANYPY_ERR_INTERPRETER_BROKEN,
            Internal => sys::MANYPY_ERR_INTERNAL,
            NotFound => sys::MANYPY_ERR_NOT_FOUND,
            BadArchive => sys::MANYPY_ERR_BAD_ARCHIVE,
            NotAPackage => sys::MANYPY_ERR_NOT_A_PACKAGE,
            UnsupportedVersion => sys::MANYPY_ERR_UNSUPPORTED_VERSION,
            ModuleNotFound => sys::MANYPY_ERR_MODULE_NOT_FOUND,
            BadTensor => sys::MANYPY_ERR_BAD_TENSOR,
            NoSuchName => sys::MANYPY_ERR_NO_SUCH_NAME,
            DeadlineExceeded => sys::MANYPY_ERR_DEADLINE_EXCEEDED,
            Cancelled => sys::MANYPY_ERR_CANCELLED,
            UntrustedArchive => sys::MANYPY_ERR_UNTRUSTED_ARCHIVE,
            Overloaded => sys::MANYPY_ERR_OVERLOADED,
            Draining => sys::MANYPY_ERR_DRAINING,
            VersionMismatch | TensorLent => return None,
            Unknown(raw) => raw,
        })
    }

    /// The C API's stable name, e.g. `"MANYPY_ERR_PYTHON"`
    /// (`"MANYPY_BINDING_VERSION_MISMATCH"` and `"MANYPY_BINDING_TENSOR_LENT"`
    /// for the binding's own codes, `"MANYPY_UNKNOWN"` for codes this crate
    /// does not know).
    pub fn name(self) -> &'static str {
        use Code::*;
        match self {
            InvalidArgument => "MANYPY_ERR_INVALID_ARGUMENT",
            OutOfRange => "MANYPY_ERR_OUT_OF_RANGE",
            Python => "MANYPY_ERR_PYTHON",
            Syntax => "MANYPY_ERR_SYNTAX",
            UnsupportedType => "MANYPY_ERR_UNSUPPORTED_TYPE",
            WrongKind => "MANYPY_ERR_WRONG_KIND",
            StaticTls => "MANYPY_ERR_STATIC_TLS",
            ResourceExhausted => "MANYPY_ERR_RESOURCE_EXHAUSTED",
            Loader => "MANYPY_ERR_LOADER",
            InterpreterBroken => "MANYPY_ERR_INTERPRETER_BROKEN",
            Internal => "MANYPY_ERR_INTERNAL",
            NotFound => "MANYPY_ERR_NOT_FOUND",
            BadArchive => "MANYPY_ERR_BAD_ARCHIVE",
            NotAPackage => "MANYPY_ERR_NOT_A_PACKAGE",
            UnsupportedVersion => "MANYPY_ERR_UNSUPPORTED_VERSION",
            ModuleNotFound => "MANYPY_ERR_MODULE_NOT_FOUND",
            BadTensor => "MANYPY_ERR_BAD_TENSOR",
            NoSuchName => "MANYPY_ERR_NO_SUCH_NAME",
            DeadlineExceeded => "MANYPY_ERR_DEADLINE_EXCEEDED",
            Cancelled => "MANYPY_ERR_CANCELLED",
            UntrustedArchive => "MANYPY_ERR_UNTRUSTED_ARCHIVE",
            Overloaded => "MANYPY_ERR_OVERLOADED",
            Draining => "MANYPY_ERR_DRAINING",
            VersionMismatch => "MANYPY_BINDING_VERSION_MISMATCH",
            TensorLent => "MANYPY_BINDING_TENSOR_LENT",
            Unknown(_) => "MANYPY_UNKNOWN",
        }
    }
}

/// The label of a status code in manypy's metrics (the `code` label of
/// `manypy_requests_total`, as `manypy_pool_prometheus` writes it): the C
/// name without its `MANYPY_ERR_` (or `MANYPY_`) prefix, in lower case.
/// `"ok"` for `MANYPY_OK` (0), `"unknown"` for a code this crate does not
/// know, e.g. `code_label(3)` is `"python"`.
pub fn code_label(raw: u32) -> &'static str {
    use Code::*;
    if raw == sys::MANYPY_OK {
        return "ok";
    }
    match Code::from_raw(raw) {
        InvalidArgument => "invalid_argument",
        OutOfRange => "out_of_range",
        Python => "python",
        Syntax => "syntax",
        UnsupportedType => "unsupported_type",
        WrongKind => "wrong_kind",
        StaticTls => "static_tls",
        ResourceExhausted => "resource_exhausted",
        Loader => "loader",
        InterpreterBroken => "interpreter_broken",
        Internal => "internal",
        NotFound => "not_found",
        BadArchive => "bad_archive",
        NotAPackage => "not_a_package",
        UnsupportedVersion => "unsupported_version",
        ModuleNotFound => "module_not_found",
        BadTensor => "bad_tensor",
        NoSuchName => "no_such_name",
        DeadlineExceeded => "deadline_exceeded",
        Cancelled => "cancelled",
        UntrustedArchive => "untrusted_archive",
        Overloaded => "overloaded",
        Draining => "draining",
        // Never a C code: from_raw does not return them.
        VersionMismatch | TensorLent | Unknown(_) => "unknown",
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A failure: its [`Code`], a one-line message, and for failures a Python
/// exception caused, the exception's type and formatted traceback. One
/// pointer wide, so `Result<T, Error>` stays small.
#[derive(Clone)]
pub struct Error(Box<Inner>);

#[derive(Clone)]
struct Inner {
    code: Code,
    message: String,
    python_type: String,
    traceback: String,
}

/// `Result<T, manypy::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error raised on the Rust side of the binding.
    pub(crate) fn new(code: Code, message: impl Into<String>) -> Error {
        Error(Box::new(Inner {
            code,
            message: message.into(),
            python_type: String::new(),
            traceback: String::new(),
        }))
    }

    /// The failure's code.
    pub fn code(&self) -> Code {
        self.0.code
    }

    /// One line saying what failed, e.g.
    /// `"interpreter 1: ZeroDivisionError: division by zero"`.
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// The qualified type of the Python exception behind the failure
    /// (e.g. `"ZeroDivisionError"`), if one was.
    pub fn python_type(&self) -> Option<&str> {
        non_empty(&self.0.python_type)
    }

    /// The formatted Python traceback (or TorchScript's), if there is one.
    pub fn traceback(&self) -> Option<&str> {
        non_empty(&self.0.traceback)
    }

    /// A copy of a status the caller keeps (one a callback borrows).
    ///
    /// # Safety
    /// `status` is a live status.
    pub(crate) unsafe fn borrowed(status: *const sys::manypy_status) -> Error {
        Error(Box::new(Inner {
            code: Code::from_raw(sys::manypy_status_code(status)),
            message: owned(sys::manypy_status_message(status)),
            python_type: owned(sys::manypy_status_python_type(status)),
            traceback: owned(sys::manypy_status_traceback(status)),
        }))
    }

    /// Takes a C status: `Ok(())` for NULL, otherwise its contents as an
    /// `Error`. Frees the status either way.
    ///
    /// # Safety
    /// `status` is NULL or a status the C API returned and nobody freed.
    pub(crate) unsafe fn check(status: *mut sys::manypy_status) -> Result<()> {
        if status.is_null() {
            return Ok(());
        }
        let error = Error::borrowed(status);
        sys::manypy_status_free(status);
        Err(error)
    }
}

fn non_empty(s: &str) -> Option<&str> {
    (!s.is_empty()).then_some(s)
}

/// A C string owned by someone else, copied (lossily if it is not UTF-8:
/// an error must never fail to be reported).
pub(crate) unsafe fn owned(s: *const std::os::raw::c_char) -> String {
    if s.is_null() {
        String::new()
    } else {
        CStr::from_ptr(s).to_string_lossy().into_owned()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.0.code, self.0.message)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        d.field("code", &self.0.code)
            .field("message", &self.0.message);
        if let Some(t) = self.python_type() {
            d.field("python_type", &t);
        }
        if let Some(t) = self.traceback() {
            d.field("traceback", &t);
        }
        d.finish()
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_stay_one_pointer_wide() {
        assert_eq!(std::mem::size_of::<Error>(), std::mem::size_of::<usize>());
        assert_eq!(
            std::mem::size_of::<Result<()>>(),
            std::mem::size_of::<usize>()
        );
    }

    #[test]
    fn codes_round_trip_through_their_numbers() {
        for raw in 1..=sys::MANYPY_ERR_DRAINING {
            let code = Code::from_raw(raw);
            assert!(
                !matches!(code, Code::Unknown(_)),
                "code {raw} is not mapped"
            );
            assert_eq!(code.raw(), Some(raw));
        }
        assert_eq!(Code::from_raw(999), Code::Unknown(999));
        assert_eq!(Code::VersionMismatch.raw(), None);
        assert_eq!(Code::TensorLent.raw(), None);
    }

    #[test]
    fn labels_are_the_c_names_without_prefix_in_lower_case() {
        assert_eq!(code_label(0), "ok");
        for raw in 1..sys::MANYPY_CODE_SLOTS {
            let code = Code::from_raw(raw);
            let expected = match code {
                Code::Unknown(_) => "unknown".to_owned(),
                _ => code
                    .name()
                    .strip_prefix("MANYPY_ERR_")
                    .expect("an error code's name")
                    .to_lowercase(),
            };
            assert_eq!(code_label(raw), expected, "code {raw}");
        }
        assert_eq!(code_label(999), "unknown");
    }
}
