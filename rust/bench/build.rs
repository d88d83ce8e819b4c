//! Compiles the C side of the benchmark, the binding benchmarks' shared C
//! side (bindings/bench/c_side.c, plain C against manypy.h, which Java's and
//! Go's comparisons run too), and gives the program a RUNPATH to libmanypy.
fn main() {
    let c_side = concat!(env!("CARGO_MANIFEST_DIR"), "/../../bindings/bench");
    println!("cargo:rerun-if-changed={c_side}/c_side.c");
    println!("cargo:rerun-if-changed={c_side}/c_side.h");
    let mut build = cc::Build::new();
    build
        .file(format!("{c_side}/c_side.c"))
        .include(c_side)
        .opt_level(2)
        .warnings(true);
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
