//! Archive metadata: records of any PyTorch archive, read without Python,
//! and the process-wide export hook that adds files to archives written.
use std::ffi::c_void;
use std::path::Path;

use manypy_sys as sys;

use crate::call::value_result;
use crate::error::{Code, Error, Result};
use crate::trampoline::guard;
use crate::value::{c_string, strings, CValue, Value};
use crate::version::check_library_version;

/// The record names of any PyTorch archive (TorchScript, torch.package or
/// an AOTInductor `.pt2` package), read with libtorch's reader, without
/// Python.
pub fn archive_list_files(path: impl AsRef<Path>) -> Result<Vec<String>> {
    check_library_version()?;
    let path = crate::path_c_string(path.as_ref())?;
    strings(value_result(|out| unsafe {
        sys::manypy_archive_list_files(path.as_ptr(), out)
    })?)
}

/// One record's bytes (extra files are `"extra/<name>"`); [`Code::NoSuchName`] if absent.
pub fn archive_read_file(path: impl AsRef<Path>, name: &str) -> Result<Vec<u8>> {
    check_library_version()?;
    let path = crate::path_c_string(path.as_ref())?;
    let name = c_string(name)?;
    Vec::<u8>::try_from(value_result(|out| unsafe {
        sys::manypy_archive_read_file(path.as_ptr(), name.as_ptr(), out)
    })?)
}

/// Writes a copy of the PyTorch archive at `path` (TorchScript,
/// torch.package or `.pt2`) to `new_path` with libtorch's writer, with
/// `extra_files` (name -> bytes or string) stored as `extra/<name>`
/// (replacing records of those names), plus the export hook's files: how a
/// pipeline stamps metadata on a package it did not write through manypy.
/// The copy loads like the original, but its digest differs: a trust must
/// list it anew. Errors as [`archive_list_files`], [`Code::NotFound`] for a
/// `new_path` that cannot be written, and [`Code::InvalidArgument`] for an
/// extra file that is neither bytes nor a string.
pub fn archive_save_copy(
    path: impl AsRef<Path>,
    new_path: impl AsRef<Path>,
    extra_files: &[(&str, Value)],
) -> Result<()> {
    check_library_version()?;
    let path = crate::path_c_string(path.as_ref())?;
    let new_path = crate::path_c_string(new_path.as_ref())?;
    let extra = self::extra_files(extra_files)?;
    unsafe {
        Error::check(sys::manypy_archive_save_copy(
            path.as_ptr(),
            new_path.as_ptr(),
            extra.as_ptr(),
        ))
    }
}

/// Extra files for a save: a C dict, or none when empty.
pub(crate) fn extra_files(files: &[(&str, Value)]) -> Result<ExtraFiles> {
    if files.is_empty() {
        return Ok(ExtraFiles(None));
    }
    for (name, v) in files {
        if !matches!(v, Value::Bytes(_) | Value::Str(_)) {
            return Err(Error::new(
                Code::InvalidArgument,
                format!(
                    "extra file {name:?} is a {}, not bytes or str",
                    v.kind_name()
                ),
            ));
        }
    }
    Ok(ExtraFiles(Some(
        Value::Dict(
            files
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        )
        .to_c()?,
    )))
}

pub(crate) struct ExtraFiles(Option<CValue>);

impl ExtraFiles {
    pub(crate) fn as_ptr(&self) -> *const sys::manypy_value {
        self.0.as_ref().map_or(std::ptr::null(), |v| v.as_ptr())
    }
}

/// The export hook: returns files (name -> bytes or string) to add to every
/// archive written in the process, as `extra/<name>`.
pub type ExportHook = Box<dyn Fn() -> Vec<(String, Value)> + Send + Sync + 'static>;

/// Installs the process-wide export hook, replacing any earlier one. It is
/// called for every archive written: [`crate::ScriptModule::save`],
/// [`crate::Package::save`], [`archive_save_copy`], and `torch.jit.save` / `PackageExporter` in any
/// interpreter. It runs under a lock on the writing thread: keep it quick,
/// and do not call manypy from it. A hook that panics, or returns a value
/// that is not bytes or a string, adds no files.
pub fn set_export_hook(
    hook: impl Fn() -> Vec<(String, Value)> + Send + Sync + 'static,
) -> Result<()> {
    check_library_version()?;
    let hook: ExportHook = Box::new(hook);
    let user_data = Box::into_raw(Box::new(hook)) as *mut c_void;
    unsafe {
        Error::check(sys::manypy_set_export_hook(
            Some(export),
            user_data,
            Some(free_hook),
        ))
    }
}

/// Removes the export hook.
pub fn clear_export_hook() -> Result<()> {
    check_library_version()?;
    unsafe {
        Error::check(sys::manypy_set_export_hook(
            None,
            std::ptr::null_mut(),
            None,
        ))
    }
}

unsafe extern "C" fn export(user_data: *mut c_void) -> *mut sys::manypy_value {
    let hook = &*(user_data as *const ExportHook);
    let files = match guard(hook) {
        Some(files) => files,
        None => return std::ptr::null_mut(),
    };
    let files: Vec<(&str, Value)> = files.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    match extra_files(&files) {
        Ok(ExtraFiles(Some(dict))) => {
            // Ownership passes to the C library.
            let p = dict.as_ptr();
            std::mem::forget(dict);
            p
        }
        _ => std::ptr::null_mut(),
    }
}

unsafe extern "C" fn free_hook(user_data: *mut c_void) {
    guard(|| drop(Box::from_raw(user_data as *mut ExportHook)));
}
