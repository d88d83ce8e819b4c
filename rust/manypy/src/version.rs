//! The loaded library's version, checked once against the header these
//! bindings were generated from, before any other C function is called.
use std::sync::OnceLock;

use manypy_sys as sys;

use crate::error::{Code, Error, Result};

static CHECKED: OnceLock<Result<()>> = OnceLock::new();

/// `Ok` when the loaded libmanypy is of the ABI this crate was built for:
/// the same major and, while the major is 0, the same minor (from 1.0 on, a
/// minor at least the header's). Otherwise [`Code::VersionMismatch`], naming
/// both versions. Checked once per process; every entry point of this crate
/// that reaches the C library calls it first, so a mismatched library
/// yields an `Err`, never a crash in a function it lacks or misdeclares.
pub fn check_library_version() -> Result<()> {
    CHECKED
        .get_or_init(|| {
            // Only manypy_version_number and manypy_version_string are
            // called before the check passes: every ABI has them.
            let runtime = unsafe { sys::manypy_version_number() };
            compatible(sys::MANYPY_VERSION_NUMBER, runtime).map_err(|why| {
                let runtime_string = unsafe { crate::error::owned(sys::manypy_version_string()) };
                Error::new(
                    Code::VersionMismatch,
                    format!(
                        "the loaded libmanypy is version {runtime_string}, but this crate was built \
                         for {header}: {why}",
                        header = header_version_string(),
                    ),
                )
            })
        })
        .clone()
}

/// The C header's rule for a header version and a runtime version, both
/// encoded as major * 10000 + minor * 100 + patch.
pub(crate) fn compatible(header: u32, runtime: u32) -> std::result::Result<(), &'static str> {
    let (h_major, h_minor) = (header / 10000, header / 100 % 100);
    let (r_major, r_minor) = (runtime / 10000, runtime / 100 % 100);
    if h_major != r_major {
        Err("the major versions differ")
    } else if h_major == 0 && h_minor != r_minor {
        Err("while the major is 0, the minor is the ABI and must match")
    } else if r_minor < h_minor {
        Err("the library's minor version is older than the header's")
    } else {
        Ok(())
    }
}

fn header_version_string() -> &'static str {
    std::str::from_utf8(sys::MANYPY_VERSION_STRING)
        .unwrap_or("?")
        .trim_end_matches('\0')
}

/// The version of the loaded library, e.g. `"0.3.0"`, once it passed the check.
pub fn library_version() -> Result<String> {
    check_library_version()?;
    Ok(unsafe { crate::error::owned(sys::manypy_version_string()) })
}

#[cfg(test)]
mod tests {
    use super::compatible;

    #[test]
    fn the_abi_rule_of_the_header() {
        assert!(compatible(200, 200).is_ok());
        assert!(compatible(200, 207).is_ok()); // a patch release
        assert!(compatible(200, 300).is_err()); // 0.3 is another ABI
        assert!(compatible(200, 100).is_err());
        assert!(compatible(200, 10000).is_err()); // 1.0
        assert!(compatible(10200, 10300).is_ok()); // 1.3 serves a 1.2 header
        assert!(compatible(10200, 10100).is_err());
        assert!(compatible(10200, 20200).is_err());
    }
}
