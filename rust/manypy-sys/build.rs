//! Finds libmanypy for the linker, in this order:
//!
//! 1. `MANYPY_LIB_DIR`: a directory holding libmanypy.so (an install's lib
//!    directory, or a build tree's `build/lib`);
//! 2. pkg-config: `manypy` (an install) or `manypy-uninstalled` (a build tree,
//!    with `PKG_CONFIG_PATH=<build>/pkgconfig`), version 0.3.x.
//!
//! When neither finds it, the build fails with a message naming both. On
//! docs.rs (`DOCS_RS` set) it links nothing: see `main`. The
//! directory found is passed to dependent build scripts as
//! `DEP_MANYPY_LIB_DIR` (and the header's as `DEP_MANYPY_INCLUDE_DIR`), so
//! they can give their binaries a RUNPATH: programs then run without
//! LD_LIBRARY_PATH.
use std::env;
use std::path::{Path, PathBuf};

// The ABI this crate's bindings were generated for: libmanypy.so.0.3.
const ABI_MIN: &str = "0.3";
const ABI_NEXT: &str = "0.4";

fn main() {
    println!("cargo:rerun-if-env-changed=MANYPY_LIB_DIR");
    println!("cargo:rerun-if-env-changed=MANYPY_INCLUDE_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=DOCS_RS");

    // docs.rs builds documentation on machines without libmanypy. rustdoc
    // links nothing, so the crate's docs need no library: skip the search
    // rather than fail. (Any other build needs the library and looks for it.)
    if env::var_os("DOCS_RS").is_some() {
        return;
    }

    if let Some(dir) = env::var_os("MANYPY_LIB_DIR") {
        let dir = PathBuf::from(dir);
        if !has_library(&dir) {
            fail(&format!(
                "MANYPY_LIB_DIR={} holds no libmanypy.so",
                dir.display()
            ));
        }
        println!("cargo:rustc-link-search=native={}", dir.display());
        println!("cargo:rustc-link-lib=dylib=manypy");
        println!("cargo:lib_dir={}", dir.display());
        if let Some(include) = env::var_os("MANYPY_INCLUDE_DIR") {
            println!("cargo:include_dir={}", PathBuf::from(include).display());
        }
        return;
    }

    let probe = pkg_config::Config::new()
        .range_version(ABI_MIN..ABI_NEXT)
        .cargo_metadata(true)
        .probe("manypy");
    match probe {
        Ok(library) => {
            if let Some(dir) = library.link_paths.iter().find(|d| has_library(d)) {
                println!("cargo:lib_dir={}", dir.display());
            }
            if let Some(include) = library.include_paths.first() {
                println!("cargo:include_dir={}", include.display());
            }
        }
        Err(error) => fail(&format!(
            "pkg-config did not find manypy {ABI_MIN}.x: {error}"
        )),
    }
}

fn has_library(dir: &Path) -> bool {
    dir.join("libmanypy.so").exists()
}

fn fail(why: &str) -> ! {
    eprintln!(
        "\nmanypy-sys: cannot find libmanypy ({why}).\n\
         Tell the build where it is, in any of these ways:\n\
         \x20 - Debian: apt-get install libmanypy-dev, which puts manypy.pc where\n\
         \x20   pkg-config looks;\n\
         \x20 - pkg-config: PKG_CONFIG_PATH=<prefix>/lib/pkgconfig (the directory\n\
         \x20   holding manypy.pc) for another install, or\n\
         \x20   PKG_CONFIG_PATH=<manypy build dir>/pkgconfig for a build tree\n\
         \x20   (its manypy-uninstalled.pc);\n\
         \x20 - MANYPY_LIB_DIR=<directory holding libmanypy.so> (e.g. <build dir>/lib).\n"
    );
    std::process::exit(1);
}
