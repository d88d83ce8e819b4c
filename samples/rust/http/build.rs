//! A RUNPATH to the libmanypy manypy-sys linked, so the program runs
//! without LD_LIBRARY_PATH (a build script's link arguments reach only its
//! own package's binaries, hence this file in every program's package).
fn main() {
    if let Ok(dir) = std::env::var("DEP_MANYPY_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
