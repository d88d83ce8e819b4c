//! A libmanypy of another version is refused with an Err, never a crash, as
//! the Java tests show it: a fake library with the real SONAME and symbol
//! versions (so the loader accepts it in the real one's place) claims 1.0.0.
//! Only its version functions work; every other function aborts, so the
//! test also shows that the binding calls nothing before the check.
use std::path::{Path, PathBuf};
use std::process::Command;

use manypy::sys;

/// The names of every function manypy.h declares.
fn functions(header: &str) -> Vec<String> {
    let mut names = Vec::new();
    for declaration in header.split(';').filter(|d| d.contains("MANYPY_API")) {
        let at = declaration.find("MANYPY_API").unwrap();
        let rest = &declaration[at..];
        // The first manypy_ identifier followed by '(' is the function's name.
        let mut search = 0;
        while let Some(i) = rest[search..].find("manypy_") {
            let start = search + i;
            let end = start
                + rest[start..]
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(0);
            if rest[end..].trim_start().starts_with('(') {
                names.push(rest[start..end].to_owned());
                break;
            }
            search = end;
        }
    }
    names
}

/// Builds the fake library in `dir`; returns its directory.
fn build_fake(dir: &Path) -> PathBuf {
    let header_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../capi/include/manypy.h");
    let header = std::fs::read_to_string(&header_path).unwrap();
    let names = functions(&header);
    assert!(
        names.len() > 80,
        "parsed only {} functions from manypy.h",
        names.len()
    );
    let mut source = String::from("#include <stdint.h>\n#include <stdlib.h>\n");
    for name in &names {
        source += &match name.as_str() {
            "manypy_version_number" => format!("uint32_t {name}(void) {{ return 10000; }}\n"),
            "manypy_version_string" => {
                format!("const char* {name}(void) {{ return \"1.0.0\"; }}\n")
            }
            _ => format!("void {name}(void) {{ abort(); }}\n"),
        };
    }
    let abi = format!(
        "{}.{}",
        sys::MANYPY_VERSION_MAJOR,
        sys::MANYPY_VERSION_MINOR
    );
    std::fs::write(dir.join("fake.c"), source).unwrap();
    // The real version script: each function with the version node of the
    // release that added it, as the probe was linked against.
    let map = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../capi/manypy.map");
    std::fs::copy(map, dir.join("fake.map")).unwrap();
    let soname = format!("libmanypy.so.{abi}");
    let status = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .current_dir(dir)
        .args([
            "-shared",
            "-fPIC",
            "-o",
            &soname,
            "fake.c",
            "-Wl,--version-script=fake.map",
        ])
        .arg(format!("-Wl,-soname,{soname}"))
        .status()
        .expect("run the C compiler");
    assert!(status.success(), "the fake library did not build");
    dir.to_path_buf()
}

/// The example program (cargo test builds examples), beside this test's deps directory.
fn probe() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples/library_version");
    assert!(path.exists(), "{} was not built", path.display());
    path
}

#[test]
fn a_library_of_another_version_is_an_err() {
    let dir = std::env::temp_dir().join(format!("manypy-fake-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fake = build_fake(&dir);

    let out = Command::new(probe())
        .env("LD_LIBRARY_PATH", &fake)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "the probe did not report a mismatch: {stderr}"
    );
    assert!(
        stderr.contains("MANYPY_BINDING_VERSION_MISMATCH"),
        "{stderr}"
    );
    let header_version = std::str::from_utf8(sys::MANYPY_VERSION_STRING)
        .unwrap()
        .trim_end_matches('\0');
    assert!(
        stderr.contains("1.0.0") && stderr.contains(header_version),
        "both versions are named: {stderr}"
    );

    // The same program against the real library.
    let out = Command::new(probe())
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout.trim(),
        format!("libmanypy {}", manypy::library_version().unwrap())
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
