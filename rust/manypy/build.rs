//! Gives this crate's own tests, examples and benches a RUNPATH to the
//! libmanypy that manypy-sys linked (DEP_MANYPY_LIB_DIR), so `cargo test`
//! runs without LD_LIBRARY_PATH. (A build script's link arguments reach only
//! its own package's binaries: a program using this crate adds its own, as
//! samples/rust/build.rs does, or installs libmanypy where the loader looks.)
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_MANYPY_LIB_DIR");
    if let Ok(dir) = std::env::var("DEP_MANYPY_LIB_DIR") {
        // Reaches this package's tests, examples and benches (not the library).
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
        // For tests that need to know which library they run against.
        println!("cargo:rustc-env=MANYPY_TEST_LIB_DIR={dir}");
    }
    if let Ok(dir) = std::env::var("DEP_MANYPY_INCLUDE_DIR") {
        println!("cargo:rustc-env=MANYPY_TEST_INCLUDE_DIR={dir}");
    }
}
