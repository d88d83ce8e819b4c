//! Compiles the C side of the benchmark (src/c_side.c, plain C against
//! manypy.h) and gives the program a RUNPATH to libmanypy.
fn main() {
    println!("cargo:rerun-if-changed=src/c_side.c");
    let mut build = cc::Build::new();
    build.file("src/c_side.c").opt_level(2).warnings(true);
    if let Ok(dir) = std::env::var("DEP_MANYPY_INCLUDE_DIR") {
        build.include(dir);
    } else {
        build.include(concat!(env!("CARGO_MANIFEST_DIR"), "/../../capi/include"));
    }
    build.compile("manypy_bench_c");
    if let Ok(dir) = std::env::var("DEP_MANYPY_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
