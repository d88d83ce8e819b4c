//! Gives this crate's own tests a RUNPATH to the libmanypy that manypy-sys
//! linked (DEP_MANYPY_LIB_DIR), as manypy's build script does for its own.
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_MANYPY_LIB_DIR");
    if let Ok(dir) = std::env::var("DEP_MANYPY_LIB_DIR") {
        // Reaches this package's tests, examples and benches (not the library).
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
