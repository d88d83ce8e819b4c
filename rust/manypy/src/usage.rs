//! API usage logging: each distinct usage key of the process, once.
use std::ffi::c_void;

use manypy_sys as sys;

use crate::error::{owned, Error, Result};
use crate::trampoline::guard;
use crate::value::c_string;
use crate::version::check_library_version;

/// The API usage handler.
pub type ApiUsageHandler = Box<dyn Fn(&str) + Send + Sync + 'static>;

/// Installs `handler` for the process, replacing any earlier one. It is
/// called once per distinct key: torch's (`"torch.python.import"`, ...),
/// manypy's (`"manypy.pool.create"`, ...), [`log_api_usage`]'s, and model
/// code's. Before this returns it is called, on this thread, with every key
/// already seen. It may run on any thread, under a lock: keep it quick and
/// do not call manypy from it.
pub fn set_api_usage_handler(handler: impl Fn(&str) + Send + Sync + 'static) -> Result<()> {
    check_library_version()?;
    let handler: ApiUsageHandler = Box::new(handler);
    let user_data = Box::into_raw(Box::new(handler)) as *mut c_void;
    // free_handler runs exactly once, when the handler is replaced or removed.
    let status =
        unsafe { sys::manypy_set_api_usage_handler(Some(on_key), user_data, Some(free_handler)) };
    unsafe { Error::check(status) }
}

/// Removes the API usage handler.
pub fn clear_api_usage_handler() -> Result<()> {
    check_library_version()?;
    unsafe {
        Error::check(sys::manypy_set_api_usage_handler(
            None,
            std::ptr::null_mut(),
            None,
        ))
    }
}

/// Logs a key of the caller's; a key already seen is ignored.
pub fn log_api_usage(key: &str) -> Result<()> {
    check_library_version()?;
    let key = c_string(key)?;
    unsafe { Error::check(sys::manypy_log_api_usage(key.as_ptr())) }
}

unsafe extern "C" fn on_key(key: *const std::os::raw::c_char, user_data: *mut c_void) {
    let handler = &*(user_data as *const ApiUsageHandler);
    let key = owned(key);
    guard(|| handler(&key));
}

unsafe extern "C" fn free_handler(user_data: *mut c_void) {
    guard(|| drop(Box::from_raw(user_data as *mut ApiUsageHandler)));
}
