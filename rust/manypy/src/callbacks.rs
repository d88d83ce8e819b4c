//! Operator callbacks: user code around sampled torch operators, in every
//! interpreter of the process and in the host's libtorch.
use std::ffi::{c_void, CStr};
use std::marker::PhantomData;

use manypy_sys as sys;

use crate::error::{Error, Result};
use crate::tensor::DType;
use crate::trampoline::guard;
use crate::version::check_library_version;

/// An operator callback. Runs on the thread running the operator,
/// concurrently from many threads; it must not call manypy. A panic is
/// caught before it reaches C (see [`crate::callback_panics`]).
pub type OpCallback = Box<dyn Fn(&OpEvent<'_>) + Send + Sync + 'static>;

/// One sampled operator, valid during the callback only (its lifetime says so).
pub struct OpEvent<'a> {
    raw: &'a sys::manypy_op_event,
}

fn text<'a>(p: *const std::os::raw::c_char) -> &'a str {
    if p.is_null() {
        return "";
    }
    unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("")
}

impl<'a> OpEvent<'a> {
    /// The operator's name, e.g. `"aten::add"`.
    pub fn name(&self) -> &'a str {
        text(self.raw.name)
    }
    pub fn sequence_number(&self) -> i64 {
        self.raw.sequence_number
    }
    /// The OS thread id (gettid) running the operator.
    pub fn thread_id(&self) -> u64 {
        self.raw.thread_id
    }
    /// The interpreter's index in the process, or `None` for the host's
    /// libtorch (TorchScript).
    pub fn interpreter(&self) -> Option<usize> {
        usize::try_from(self.raw.interpreter).ok()
    }
    /// CLOCK_MONOTONIC nanoseconds.
    pub fn start_ns(&self) -> i64 {
        self.raw.start_ns
    }
    /// 0 in the enter callback.
    pub fn end_ns(&self) -> i64 {
        self.raw.end_ns
    }
    /// The call's model id ([`crate::CallOptionsBuilder::context`]), "" if none.
    pub fn model_id(&self) -> &'a str {
        text(self.raw.model_id)
    }
    /// The call's request id, "" if none.
    pub fn request_id(&self) -> &'a str {
        text(self.raw.request_id)
    }
    /// The inputs' kinds, dtypes and shapes (empty unless the registration
    /// asked for inputs).
    pub fn inputs(&self) -> impl ExactSizeIterator<Item = OpInput<'a>> + 'a {
        let raw: *const sys::manypy_op_event = self.raw;
        let n = self.raw.num_inputs;
        (0..n).map(move |i| OpInput {
            raw: unsafe { &*sys::manypy_op_event_input(raw, i) },
        })
    }
}

/// One operator input: never its data.
pub struct OpInput<'a> {
    raw: &'a sys::manypy_op_input,
}

/// What an operator input is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum InputKind {
    Tensor,
    Int,
    Float,
    Bool,
    None,
    Other,
}

impl<'a> OpInput<'a> {
    pub fn kind(&self) -> InputKind {
        match u32::try_from(self.raw.kind) {
            Ok(sys::MANYPY_VALUE_TENSOR) => InputKind::Tensor,
            Ok(sys::MANYPY_VALUE_INT64) => InputKind::Int,
            Ok(sys::MANYPY_VALUE_DOUBLE) => InputKind::Float,
            Ok(sys::MANYPY_VALUE_BOOL) => InputKind::Bool,
            Ok(sys::MANYPY_VALUE_NONE) => InputKind::None,
            _ => InputKind::Other,
        }
    }
    /// A tensor input's dtype.
    pub fn dtype(&self) -> Option<DType> {
        (self.kind() == InputKind::Tensor)
            .then(|| DType::from_dl(self.raw.dtype))
            .flatten()
    }
    /// A tensor input's shape (empty otherwise).
    pub fn shape(&self) -> &'a [i64] {
        match usize::try_from(self.raw.ndim) {
            Ok(n) if n > 0 && !self.raw.shape.is_null() => unsafe {
                std::slice::from_raw_parts(self.raw.shape, n)
            },
            _ => &[],
        }
    }
}

/// Registers operator callbacks; see [`OpCallbacks::register`].
///
/// ```no_run
/// # fn main() -> manypy::Result<()> {
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
/// let seen = Arc::new(AtomicU64::new(0));
/// let counter = seen.clone();
/// let registration = manypy::OpCallbacks::new()
///     .on_exit(move |event| {
///         if event.model_id() == "resnet18" {
///             counter.fetch_add(1, Ordering::Relaxed);
///         }
///     })
///     .sampling_probability(0.1)
///     .register()?;
/// // ... calls ...
/// drop(registration); // no callback runs after this
/// # Ok(()) }
/// ```
pub struct OpCallbacks {
    enter: Option<OpCallback>,
    exit: Option<OpCallback>,
    sampling_probability: f64,
    needs_inputs: bool,
}

impl Default for OpCallbacks {
    fn default() -> Self {
        OpCallbacks {
            enter: None,
            exit: None,
            sampling_probability: 1.0,
            needs_inputs: false,
        }
    }
}

struct Pair {
    enter: Option<OpCallback>,
    exit: Option<OpCallback>,
}

impl OpCallbacks {
    /// No callbacks yet, sampling probability 1, no inputs.
    pub fn new() -> OpCallbacks {
        OpCallbacks::default()
    }
    /// Called when a sampled operator starts.
    pub fn on_enter(mut self, f: impl Fn(&OpEvent<'_>) + Send + Sync + 'static) -> Self {
        self.enter = Some(Box::new(f));
        self
    }
    /// Called when a sampled operator ends.
    pub fn on_exit(mut self, f: impl Fn(&OpEvent<'_>) + Send + Sync + 'static) -> Self {
        self.exit = Some(Box::new(f));
        self
    }
    /// Probability in (0, 1] that an operator is sampled (default 1).
    pub fn sampling_probability(mut self, p: f64) -> Self {
        self.sampling_probability = p;
        self
    }
    /// Whether events carry each input's kind, dtype and shape.
    pub fn needs_inputs(mut self, yes: bool) -> Self {
        self.needs_inputs = yes;
        self
    }

    /// Registers the callbacks in every interpreter of the process (later
    /// ones too) and the host. At most 16 registrations live at once.
    pub fn register(self) -> Result<OpCallbackRegistration> {
        check_library_version()?;
        let enter_fn: sys::manypy_op_callback_fn = self.enter.is_some().then_some(on_enter);
        let exit_fn: sys::manypy_op_callback_fn = self.exit.is_some().then_some(on_exit);
        let pair = Box::into_raw(Box::new(Pair {
            enter: self.enter,
            exit: self.exit,
        }));
        let mut id = 0u64;
        // The C library runs free_pair exactly once: on removal, or now if this fails.
        unsafe {
            Error::check(sys::manypy_add_op_callbacks(
                enter_fn,
                exit_fn,
                pair as *mut c_void,
                Some(free_pair),
                self.sampling_probability,
                self.needs_inputs as i32,
                &mut id,
            ))?;
        }
        Ok(OpCallbackRegistration {
            id,
            _not_clone: PhantomData,
        })
    }
}

unsafe extern "C" fn on_enter(event: *const sys::manypy_op_event, user_data: *mut c_void) {
    let pair = &*(user_data as *const Pair);
    if let Some(f) = &pair.enter {
        let event = OpEvent { raw: &*event };
        guard(|| f(&event));
    }
}

unsafe extern "C" fn on_exit(event: *const sys::manypy_op_event, user_data: *mut c_void) {
    let pair = &*(user_data as *const Pair);
    if let Some(f) = &pair.exit {
        let event = OpEvent { raw: &*event };
        guard(|| f(&event));
    }
}

unsafe extern "C" fn free_pair(user_data: *mut c_void) {
    // A closure's captures may panic in their Drop too.
    guard(|| drop(Box::from_raw(user_data as *mut Pair)));
}

/// A live registration: dropping it removes the callbacks (no callback of
/// it runs after that, and its closures are freed).
pub struct OpCallbackRegistration {
    id: u64,
    _not_clone: PhantomData<()>,
}

impl OpCallbackRegistration {
    /// The registration's id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Removes the callbacks now, reporting a failure (dropping ignores it).
    pub fn remove(self) -> Result<()> {
        let id = self.id;
        std::mem::forget(self);
        unsafe { Error::check(sys::manypy_remove_op_callbacks(id)) }
    }
}

impl Drop for OpCallbackRegistration {
    fn drop(&mut self) {
        // Only an unknown id fails, and this id is ours until now.
        let _ = unsafe { Error::check(sys::manypy_remove_op_callbacks(self.id)) };
    }
}

impl std::fmt::Debug for OpCallbackRegistration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpCallbackRegistration")
            .field("id", &self.id)
            .finish()
    }
}
