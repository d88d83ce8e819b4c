//! torch.package archives loaded into a pool.
use std::path::Path;
use std::sync::Arc;

use manypy_sys as sys;

use crate::call::value_result;
use crate::error::{Error, Result};
// Only the docs name it (intra-doc links to its variants).
#[cfg(doc)]
use crate::error::Code;
use crate::handle::Handle;
use crate::object::Object;
use crate::pool::Pool;
use crate::value::{c_string, strings, Value};

struct PackageHandle {
    raw: Handle<sys::manypy_package>, // freed before the pool goes
    pool: Pool,
}

/// A torch.package archive loaded into a [`Pool`]. Keeps the pool alive.
/// `Clone` shares it; `Send + Sync`.
#[derive(Clone)]
pub struct Package(Arc<PackageHandle>);

impl Package {
    pub(crate) fn new(raw: *mut sys::manypy_package, pool: Pool) -> Result<Package> {
        let raw = Handle::returned(raw, "package")?;
        Ok(Package(Arc::new(PackageHandle { raw, pool })))
    }

    pub(crate) fn ptr(&self) -> *mut sys::manypy_package {
        self.0.raw.as_ptr()
    }

    /// The pool the package was loaded into.
    pub fn pool(&self) -> &Pool {
        &self.0.pool
    }

    /// Unpickles `module`.`name` (e.g. `"model"`, `"model.pkl"`): in one
    /// interpreter now, so errors surface here, and lazily in the others.
    pub fn load_pickle(&self, module: &str, name: &str) -> Result<Object> {
        let (module, name) = (c_string(module)?, c_string(name)?);
        let mut out = std::ptr::null_mut();
        unsafe {
            Error::check(sys::manypy_package_load_pickle(
                self.ptr(),
                module.as_ptr(),
                name.as_ptr(),
                &mut out,
            ))?
        };
        Object::new(out, self.clone())
    }

    /// The names of every record in the archive, read without Python.
    pub fn list_files(&self) -> Result<Vec<String>> {
        strings(value_result(|out| unsafe {
            sys::manypy_package_list_files(self.ptr(), out)
        })?)
    }

    /// One record's bytes, read without Python ([`Code::NoSuchName`] if absent).
    pub fn read_file(&self, name: &str) -> Result<Vec<u8>> {
        let name = c_string(name)?;
        let v = value_result(|out| unsafe {
            sys::manypy_package_read_file(self.ptr(), name.as_ptr(), out)
        })?;
        Vec::<u8>::try_from(v)
    }

    /// Writes a copy of the archive to `path`, with `extra_files` (name ->
    /// bytes or string) stored as `extra/<name>`, plus the export hook's.
    pub fn save(&self, path: impl AsRef<Path>, extra_files: &[(&str, Value)]) -> Result<()> {
        let path = crate::path_c_string(path.as_ref())?;
        let extra = crate::metadata::extra_files(extra_files)?;
        unsafe {
            Error::check(sys::manypy_package_save_file(
                self.ptr(),
                path.as_ptr(),
                extra.as_ptr(),
            ))
        }
    }
}

impl std::fmt::Debug for Package {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Package").finish_non_exhaustive()
    }
}
